package cache

import (
	"container/list"
	"os"
	"path/filepath"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// defaultOpenFiles returns DefaultOpenFiles, or a quarter of the process's
// limit of open files when that is lower, leaving the rest to FUSE, the
// object store and the metadata engine.
func defaultOpenFiles() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur >= 4*DefaultOpenFiles {
		return DefaultOpenFiles
	}
	return max(1, int(lim.Cur/4))
}

// handle is an open cached file with its checked trailer, shared by
// concurrent range reads. It holds a reference for each reader and one
// for the open-file table while it is in one; the file closes when the
// last is released.
type handle struct {
	f    *os.File
	t    table
	refs atomic.Int32
	key  string
	el   *list.Element // in the table's recency list, nil outside
}

// openHandle opens the file of key under root and checks its trailer. The
// caller holds the only reference.
func openHandle(root, key string) (*handle, error) {
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(key)))
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err == nil {
		var t table
		if t, err = readTable(key, f, info.Size()); err == nil {
			h := &handle{f: f, t: t, key: key}
			h.refs.Store(1)
			return h, nil
		}
	}
	f.Close()
	return nil, err
}

// size returns the size of the file.
func (h *handle) size() int64 { return encodedSize(h.t.n) }

// readAt fills p from off in the data of the file, checking the pages
// read.
func (h *handle) readAt(p []byte, off int64) error { return h.t.readAt(h.f, p, off) }

// release drops a reference, closing the file with the last.
func (h *handle) release() {
	if h.refs.Add(-1) == 0 {
		h.f.Close()
	}
}

// openFiles keeps up to max cached files open, so that a range read costs
// one pread instead of an open, a stat, reading the trailer and a close.
// It holds only files whose key is in the directory's index: whatever
// drops a key from the index drops its handle. It does no IO but closing
// files; the caller holds the directory's lock.
type openFiles struct {
	max    int
	ll     *list.List // front = most recently used; values are *handle
	byKey  map[string]*handle
	closed bool // after Close nothing is added
}

func newOpenFiles(n int) *openFiles {
	return &openFiles{max: n, ll: list.New(), byKey: map[string]*handle{}}
}

// get returns the handle of key with a reference for the caller, or nil.
func (o *openFiles) get(key string) *handle {
	h := o.byKey[key]
	if h != nil {
		h.refs.Add(1)
		o.ll.MoveToFront(h.el)
	}
	return h
}

// add keeps h, which the caller holds a reference to, open for later
// reads, closing the least recently used handles beyond the bound. It
// keeps nothing when key has a handle already, the bound is zero or the
// table is closed.
func (o *openFiles) add(h *handle) {
	if o.closed || o.max <= 0 || o.byKey[h.key] != nil {
		return
	}
	h.refs.Add(1)
	h.el = o.ll.PushFront(h)
	o.byKey[h.key] = h
	for o.ll.Len() > o.max {
		o.drop(o.ll.Back().Value.(*handle).key)
	}
}

// drop forgets the handle of key, closing it unless a read holds it.
func (o *openFiles) drop(key string) {
	h := o.byKey[key]
	if h == nil {
		return
	}
	delete(o.byKey, key)
	o.ll.Remove(h.el)
	h.el = nil
	h.release()
}

// close drops every handle and keeps no more.
func (o *openFiles) close() {
	o.closed = true
	for key := range o.byKey {
		o.drop(key)
	}
}
