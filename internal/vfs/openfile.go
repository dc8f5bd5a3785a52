package vfs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
)

// The open file: the state one mount shares between the handles of a
// regular file (writer, reader, length, cached slice lists, attributes),
// and how it is brought up to date with what the engine says.

// openFile is the state shared by all handles of one regular file: its
// writer, its length as this mount knows it, and the slice lists it read.
// The attribute changes and copy it holds back (held, copy and the fields
// beside them) form a state machine described in held.go ("Held changes
// and copies"); its writer commits through it (Commit, in commit.go).
type openFile struct {
	ino  meta.Ino
	meta Meta
	view *kernelView
	// committed, when set, is told of each slice committed to the file,
	// with its length.
	committed func(ino meta.Ino, idx uint32, n uint32)
	log       func() *slog.Logger
	writer    *chunk.FileWriter
	reader    *chunk.FileReader

	mu struct {
		sync.Mutex
		refs      int
		length    uint64
		lastWrite time.Time
		chunks    map[uint32][]meta.Slice // committed slice lists read so far
		// gen counts invalidations of chunks, so a list fetched before
		// one is not cached after it.
		gen uint64
		// seen is the version of the file that chunks and the kernel's
		// pages were read at (or later): set at open and when a lock
		// proves them current, moved along by this mount's own commits
		// when nobody else changed the file in between.
		seen meta.Version
		// noCaps records that the file has no security.capability
		// attribute, which the kernel asks for before writes and
		// chown: set when this mount created the file or the engine
		// said so, cleared when this mount sets an attribute
		// (VFS.capsMayChange) or sees another mount's change.
		noCaps bool
		// noXattrs records that the file has no extended attributes at
		// all (cp -a lists them twice per file), kept as noCaps is.
		noXattrs bool
		// xgen counts this mount's xattr changes of the file, so an
		// answer read before one does not set noCaps or noXattrs.
		xgen uint64
		// learnt counts the recordings of attr (see learnt).
		learnt uint64
		// attr is the file's attributes as this mount last saw them,
		// with held-back changes applied (its mode tells KillSetID
		// whether there are setuid and setgid bits to drop).
		attr *meta.Attr
		// held are attribute changes (chown, chmod, utimes) held back
		// to commit with the buffered writes in one transaction, or
		// together (see VFS.SetAttr); heldTimes tells that one of them
		// sets times.
		held      []meta.AttrChange
		heldTimes bool
		heldTimer *time.Timer // applies held changes no commit took; nil when unarmed
		// copy is a copy_file_range(2) into the file, answered and held
		// back to commit with the changes held after it (see
		// VFS.CopyFileRange); nil when none. copiedTo are the files
		// holding a copy from this one, which commit before this one
		// changes.
		copy     *heldCopy
		copiedTo []*openFile
		// copyErr is the failure of a held copy's commit: the copy is
		// lost, and every flush (fsync, close) from then on reports it,
		// as a failed commit of buffered writes is reported (see
		// chunk.FileWriter.Flush), not only the one that tried it.
		copyErr error
		// closed is set when the last handle went and nothing was held:
		// from then on changes go to the engine at once (see hold).
		closed bool
	}
}

var (
	_ chunk.SliceSource = (*openFile)(nil)
	_ chunk.Committer   = (*openFile)(nil)
)

// ReadChunk serves slice lists from the file's cache, filled from meta.
func (f *openFile) ReadChunk(ctx context.Context, ino meta.Ino, idx uint32) ([]meta.Slice, error) {
	f.mu.Lock()
	ss, ok := f.mu.chunks[idx]
	gen := f.mu.gen
	f.mu.Unlock()
	if ok {
		return ss, nil
	}
	ss, err := f.meta.ReadChunk(ctx, ino, idx)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	if f.mu.gen == gen {
		f.mu.chunks[idx] = ss
	}
	f.mu.Unlock()
	return ss, nil
}

// revalidate brings the file up to a, its attributes as of a lock just
// taken. When the file is still at the version this mount last saw, what
// it cached stays (no round trip); otherwise the cached slice lists go
// and revalidate reports true: the kernel's pages must go too.
func (f *openFile) revalidate(a *meta.Attr) bool {
	v := meta.VersionOf(a)
	f.mu.Lock()
	defer f.mu.Unlock()
	if v == f.mu.seen {
		return false
	}
	f.dropListsLocked()
	f.mu.length = max(a.Length, f.pendingEndLocked())
	f.mu.seen = v
	f.mu.noCaps, f.mu.noXattrs = false, false
	f.setAttrLocked(a)
	return true
}

// learnt returns how many times the file's attributes were recorded
// (setAttrLocked), by this mount's commits among others; 0 for nil. A
// reader of attributes compares it before and after its read to tell
// whether a commit landed meanwhile (VFS.GetAttr).
func (f *openFile) learnt() uint64 {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.learnt
}

// setAttrLocked records a as the file's attributes, unless changes or a
// copy are held back: their preview stays until they commit.
func (f *openFile) setAttrLocked(a *meta.Attr) {
	f.mu.learnt++
	if f.holdsLocked() && f.mu.attr != nil {
		return
	}
	cp := *a
	f.mu.attr = &cp
}

// setAttr refreshes what the file knows from attributes just read or
// changed; a truncation drops cached slice lists.
func (f *openFile) setAttr(a *meta.Attr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a.Length != f.mu.length {
		f.dropListsLocked()
	}
	f.mu.length = a.Length
	f.setAttrLocked(a)
}

// forgetSlices drops the cached slice lists, after the file's chunks
// changed behind it (compaction).
func (f *openFile) forgetSlices() {
	f.mu.Lock()
	f.dropListsLocked()
	f.mu.Unlock()
}

// dropListsLocked drops every cached slice list, including those being
// fetched (see gen); f.mu is held.
func (f *openFile) dropListsLocked() {
	clear(f.mu.chunks)
	f.mu.gen++
}

// pendingEndLocked returns the end of what this mount wrote or copied
// into the file and has not committed yet; f.mu is held.
func (f *openFile) pendingEndLocked() uint64 {
	end := f.writer.PendingEnd()
	if c := f.mu.copy; c != nil {
		end = max(end, c.DstOff+c.Len)
	}
	return end
}

// overlayAttr reports buffered writes, a held copy and held attribute
// changes in a's length and times.
func (f *openFile) overlayAttr(a *meta.Attr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a.Length = max(a.Length, f.pendingEndLocked())
	if p := f.mu.attr; f.holdsLocked() && p != nil {
		a.Mode, a.Uid, a.Gid = p.Mode, p.Uid, p.Gid
		a.Atime, a.Atimensec = p.Atime, p.Atimensec
		a.Ctime, a.Ctimensec = p.Ctime, p.Ctimensec
		if f.mu.heldTimes || f.mu.copy != nil {
			a.Mtime, a.Mtimensec = p.Mtime, p.Mtimensec
			return
		}
	}
	if lw := f.mu.lastWrite; !lw.IsZero() && f.writer.Dirty() {
		if lw.Unix() > a.Mtime || lw.Unix() == a.Mtime && uint32(lw.Nanosecond()) > a.Mtimensec {
			a.Mtime, a.Mtimensec = lw.Unix(), uint32(lw.Nanosecond())
			a.Ctime, a.Ctimensec = a.Mtime, a.Mtimensec
		}
	}
}

// openFileRef returns the open file of ino, creating it, with one more
// reference.
func (v *VFS) openFileRef(a *meta.Attr) *openFile {
	v.mu.Lock()
	defer v.mu.Unlock()
	f := v.mu.files[a.Ino]
	if f == nil {
		f = &openFile{ino: a.Ino, meta: v.meta, view: v.view, log: v.log}
		if v.compact != nil {
			f.committed = v.compact.committed
		}
		f.writer = v.data.NewWriter(a.Ino, f)
		f.reader = v.data.NewReader(a.Ino)
		f.mu.chunks = map[uint32][]meta.Slice{}
		v.mu.files[a.Ino] = f
	}
	f.mu.Lock()
	f.mu.refs++
	// Close-to-open: a new open sees what other mounts committed (the
	// kernel drops its pages of the file at every open).
	f.dropListsLocked()
	f.mu.length = max(a.Length, f.pendingEndLocked())
	if v := meta.VersionOf(a); v != f.mu.seen {
		f.mu.noCaps, f.mu.noXattrs = false, false
		f.mu.seen = v
	}
	f.setAttrLocked(a)
	f.mu.Unlock()
	return f
}

// refresh re-reads a file's attributes after a change made in metadata
// behind its writer, dropping its cached slice lists.
func (v *VFS) refresh(ctx context.Context, f *openFile) error {
	a, err := v.meta.GetAttr(ctx, f.ino)
	if err != nil {
		return err
	}
	v.refreshed(f, a)
	return nil
}

// refreshed records a, the attributes of a change made in metadata behind
// the writer of f, dropping its cached slice lists.
func (v *VFS) refreshed(f *openFile, a *meta.Attr) {
	f.mu.Lock()
	f.dropListsLocked()
	f.mu.length = a.Length
	f.mu.Unlock()
	// The kernel applied the change to its own attributes (or dropped
	// them); the next open need not send it looking again.
	v.view.attr(a)
}
