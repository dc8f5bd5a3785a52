package vfs

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// dirPage is how many entries a directory stream fetches per round trip.
const dirPage = 1000

// DirEntry is one entry of a directory listing. Off is the stream offset
// just after the entry, to resume from.
type DirEntry struct {
	Name []byte
	Ino  meta.Ino
	Type uint8
	Off  uint64
	Attr *meta.Attr // with plus; nil for "." and ".." or a vanished inode
}

// dirStream reads a directory in pages. Offsets 1 and 2 follow "." and
// ".."; entry i of the listing has offset i+3. Only the current page is
// held, so listing a huge directory keeps memory flat.
type dirStream struct {
	ino    meta.Ino
	parent meta.Ino
	// attr is the directory's attributes at opendir, which fstat(2) of
	// the handle shows, with no link, once the directory is gone (see
	// VFS.removedOpenDir).
	attr meta.Attr

	mu     sync.Mutex
	base   uint64       // offset before page[0]
	page   []meta.Entry // current page
	after  []byte       // the name page starts after (nil: the first page)
	plus   bool         // page carries attributes
	eof    bool         // page is the last one
	loaded bool
	// internal are the entries of the internal files, which end the
	// listing of the root unless hidden.
	internal []meta.Entry
	real     int // entries of page from the engine; the internal files follow
}

// OpenDir opens directory ino for listing.
func (v *VFS) OpenDir(ctx context.Context, ino meta.Ino) (uint64, error) {
	a, err := v.openDirMeta(ctx, ino)
	if err != nil {
		// A directory another mount removed or renamed over: the kernel
		// looks the path up again (see Open).
		return 0, v.staleIfGone(ctx, ino, err)
	}
	d := &dirStream{ino: ino, parent: a.Parent, attr: *a, base: 2}
	if ino == meta.RootIno && !v.conf.HideInternal {
		d.internal = v.internalEntries()
	}
	keep := false
	if v.conf.ReaddirCache {
		// The kernel keeps a listing while the directory's modification
		// time it caches is the one it had when it listed (it fetches the
		// attributes again once they expire). So the listing is this
		// version's unless the kernel may hold other attributes than a:
		// then it drops the listing now (no KeepCache) and, told to
		// forget the attributes, tags the new listing with a's time.
		// A change of the entries within meta's DirMtimeSkip of the last
		// stamp leaves that time as it was, so a listing begun less
		// than listingSettle after it is not kept either.
		keep = !v.view.attrChanged(a) && v.view.listedSettled(a, listingSettle)
		if !keep {
			v.invalidateInode(ino, false)
		}
	}
	return v.addHandle(&handle{ino: ino, dir: d, keep: keep}), nil
}

// openDirMeta opens directory ino in the metadata client: from its open
// cache (OpenCacher) when what that holds is the version the kernel was
// given, otherwise from the engine.
func (v *VFS) openDirMeta(ctx context.Context, ino meta.Ino) (*meta.Attr, error) {
	if oc, ok := capability[meta.OpenCacher](v.meta); ok {
		if a, ok := oc.OpenDirCached(ctx, ino); ok && !v.view.attrChanged(a) {
			return a, nil
		}
	}
	return v.meta.OpenDir(ctx, ino)
}

// listingSettle is how long after a directory's modification time a
// listing of it must begin for the kernel to keep it: meta's default
// DirMtimeSkip, within which a change of the entries may leave that time
// alone, and a margin for the clocks of the hosts that stamp it.
const listingSettle = meta.DefaultDirMtimeSkip + 100*time.Millisecond

// CacheDir reports whether the kernel may keep directory listings
// (Config.ReaddirCache); KeepCache tells, per open directory, whether it
// may list again from what it kept.
func (v *VFS) CacheDir() bool { return v.conf.ReaddirCache }

// ReleaseDir closes a directory handle.
func (v *VFS) ReleaseDir(fh uint64) {
	v.mu.Lock()
	delete(v.mu.handles, fh)
	v.mu.Unlock()
}

// ReadDir calls emit for the entries from offset off on, until emit returns
// false (the caller's buffer is full) or the directory ends. With plus
// the entries carry attributes.
func (v *VFS) ReadDir(ctx context.Context, fh uint64, off uint64, plus bool, emit func(DirEntry) bool) error {
	h, err := v.handle(fh)
	if err != nil {
		return err
	}
	d := h.dir
	if d == nil {
		return syscall.ENOTDIR
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if off == 0 {
		v.accessed(ctx, h)
		if v.conf.ReaddirCache {
			v.view.listing(d.ino)
		}
		// A new listing or rewinddir(3): read afresh.
		d.base, d.page, d.after, d.eof, d.loaded = 2, nil, nil, false, false
		if !emit(DirEntry{Name: []byte("."), Ino: d.ino, Type: store.TypeDir, Off: 1}) {
			return nil
		}
		off = 1
	}
	if off == 1 {
		parent := d.parent
		if d.ino == meta.RootIno || parent == 0 {
			parent = meta.RootIno
		}
		if !emit(DirEntry{Name: []byte(".."), Ino: parent, Type: store.TypeDir, Off: 2}) {
			return nil
		}
		off = 2
	}
	if off < d.base {
		// Seek backwards: start over and page forward.
		d.base, d.page, d.after, d.eof, d.loaded = 2, nil, nil, false, false
	}
	for {
		switch {
		case !d.loaded:
			if err := d.fetch(ctx, v.meta, d.base, d.after, plus); err != nil {
				return err
			}
		case plus && !d.plus && off < d.base+uint64(d.real):
			// The kernel switched to READDIRPLUS within the page. Read
			// the rest of it again, with attributes, from the entry at
			// off: entries added or removed before that one since the
			// page was read must not shift the offsets that follow. (A
			// switch the other way keeps the page; the attributes go
			// unused.)
			after := d.after
			if i := off - d.base; i > 0 {
				after = d.page[i-1].Name
			}
			if err := d.fetch(ctx, v.meta, off, after, plus); err != nil {
				return err
			}
		}
		for off < d.base+uint64(len(d.page)) {
			e := d.page[off-d.base]
			off++
			if plus && e.Attr != nil {
				// The kernel keeps the entry and its attributes.
				v.view.entry(d.ino, e.Name, e.Attr)
			}
			if !emit(DirEntry{Name: e.Name, Ino: e.Ino, Type: e.Type, Off: off, Attr: v.withPending(e.Attr)}) {
				return nil
			}
		}
		if d.eof {
			return nil
		}
		// Move to the next page.
		last := d.page[len(d.page)-1].Name
		if err := d.fetch(ctx, v.meta, d.base+uint64(len(d.page)), last, plus); err != nil {
			return err
		}
	}
}

// fetch reads the page of entries after the name after, whose first
// entry has offset base+1. A failure (an interrupted request) keeps the
// page the stream had, so that the kernel's retry at the same offset
// resumes where it stopped.
func (d *dirStream) fetch(ctx context.Context, m Meta, base uint64, after []byte, plus bool) error {
	es, err := m.ReadDir(ctx, d.ino, after, dirPage, plus)
	if err != nil {
		return err
	}
	d.base, d.page, d.after, d.plus, d.loaded = base, es, after, plus, true
	d.eof = len(es) < dirPage
	d.real = len(es)
	if d.eof && d.internal != nil {
		// The internal files end the root's listing; entries of the
		// same names are shadowed.
		page := es[:0:0]
		for _, e := range es {
			if internalByName(meta.RootIno, e.Name) == nil {
				page = append(page, e)
			}
		}
		d.real = len(page)
		d.page = append(page, d.internal...)
	}
	return nil
}
