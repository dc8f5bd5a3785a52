package vfs

import (
	"context"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// Handles of regular files: open and create, which give them, and flush,
// fsync and release, which commit and close them.

// Create makes and opens a regular file.
func (v *VFS) Create(ctx context.Context, parent meta.Ino, name []byte, mode, umask uint16, flags uint32) (*meta.Attr, uint64, error) {
	if f := internalByName(parent, name); f != nil {
		if flags&syscall.O_EXCL != 0 {
			return nil, 0, syscall.EEXIST
		}
		return v.openInternal(ctx, f, flags)
	}
	nn := meta.NewNode{Type: store.TypeFile, Mode: mode, Umask: umask}
	cr, counted := capability[meta.Creator](v.meta)
	var a *meta.Attr
	var err error
	if counted {
		a, err = cr.Create(ctx, parent, name, nn)
	} else {
		a, err = v.meta.Mknod(ctx, parent, name, nn)
	}
	if meta.Errno(err) == syscall.EEXIST && flags&syscall.O_EXCL == 0 {
		// The kernel believed the name missing (another mount created it
		// since): open(2) without O_EXCL opens what is there.
		return v.openExisting(ctx, parent, name, flags)
	}
	if err != nil {
		return nil, 0, err
	}
	v.view.entry(parent, name, a)
	if !counted {
		v.meta.Created(a.Ino)
	}
	f := v.openFileRef(a)
	f.mu.Lock()
	f.mu.noCaps = true // a new file has no attributes but inherited ACLs
	f.mu.noXattrs = a.Flags&meta.FlagACL == 0
	f.mu.Unlock()
	return a, v.addHandle(&handle{ino: a.Ino, flags: flags, file: f}), nil
}

// Tmpfile makes and opens an unnamed regular file in directory parent
// (open(2) with O_TMPFILE): it has no link until Link gives it a name,
// and goes at its last release otherwise. A Meta without the ability
// (TmpfileCreator) fails it with EOPNOTSUPP, which the kernel reports.
func (v *VFS) Tmpfile(ctx context.Context, parent meta.Ino, mode, umask uint16, flags uint32) (*meta.Attr, uint64, error) {
	tc, ok := capability[meta.TmpfileCreator](v.meta)
	if !ok {
		return nil, 0, syscall.EOPNOTSUPP
	}
	if IsInternal(parent) {
		return nil, 0, syscall.ENOTDIR
	}
	a, err := tc.Tmpfile(ctx, parent, meta.NewNode{Type: store.TypeFile, Mode: mode, Umask: umask})
	if err != nil {
		return nil, 0, err
	}
	v.view.attr(a)
	f := v.openFileRef(a)
	f.mu.Lock()
	f.mu.noCaps = true // a new file has no attributes but inherited ACLs
	f.mu.noXattrs = a.Flags&meta.FlagACL == 0
	f.mu.Unlock()
	return a, v.addHandle(&handle{ino: a.Ino, flags: flags, file: f}), nil
}

// openExisting opens the file name in parent for a create that found it
// there. The kernel neither checks permissions nor truncates after a
// create, so Open does both.
func (v *VFS) openExisting(ctx context.Context, parent meta.Ino, name []byte, flags uint32) (*meta.Attr, uint64, error) {
	a, err := v.meta.Lookup(ctx, parent, name)
	if err != nil {
		return nil, 0, err
	}
	switch a.Type {
	case store.TypeFile:
	case store.TypeDir:
		return nil, 0, syscall.EISDIR
	default:
		return nil, 0, syscall.EEXIST
	}
	a, fh, err := v.Open(ctx, a.Ino, flags&^syscall.O_CREAT)
	if err != nil {
		return nil, 0, err
	}
	v.view.entry(parent, name, a)
	return a, fh, nil
}

// Open opens ino with open(2) flags.
//
// The kernel opens the inode its cached entry names, which another mount
// may have unlinked or replaced since (a rename over the name, the way
// git, editors and package managers update files), or whose attributes
// it cached before another mount changed the file (it would then read
// only up to the old length, and append at the old end). Such an open
// fails once with ESTALE: the kernel then looks every name of the path up
// again, which also refreshes the attributes, and retries, and gets the
// file the name leads to now. A retry that reaches the same inode without
// a new lookup (a file opened in the trash, or through /proc/PID/fd) goes
// through.
func (v *VFS) Open(ctx context.Context, ino meta.Ino, flags uint32) (*meta.Attr, uint64, error) {
	if f := internalByIno(ino); f != nil {
		return v.openInternal(ctx, f, flags)
	}
	if f := v.fileOf(ino); f != nil && f.holdsAccessChange() {
		// The open checks permissions against the engine's mode and
		// owner, which must include a chmod or chown held on the file
		// (an execve right after a chmod +x, a chmod 600 before
		// another user's open). The kernel was shown the change when
		// it was held: what it caches is what the commit wrote.
		if err := f.applyHeld(ctx); err != nil {
			return nil, 0, err
		}
		f.mu.Lock()
		a := f.mu.attr
		f.mu.Unlock()
		if a != nil {
			v.view.attr(a)
		}
	}
	xgen := v.xattrGen.Load()
	a, err := v.openMeta(ctx, ino, flags)
	if err != nil {
		return nil, 0, v.staleIfGone(ctx, ino, err)
	}
	pid := meta.CredOf(ctx).Pid
	stalePages := false
	if gone, changed := unlinked(a), a.Type == store.TypeFile && v.view.attrChanged(a); gone || changed {
		if v.stale.refuse(ino, pid) {
			v.meta.Release(context.WithoutCancel(ctx), ino)
			v.forgetAhead(ino) // the lookup again must reach the engine
			return nil, 0, syscall.ESTALE
		}
		if changed {
			// A retry without a new lookup: at least make the kernel
			// fetch the attributes again before it reads, and drop its
			// pages (see keep below).
			v.invalidateInode(ino, false)
			stalePages = true
		}
	} else {
		v.stale.passed(ino, pid)
	}
	if a.Type == store.TypeDir {
		v.meta.Release(context.WithoutCancel(ctx), ino)
		return nil, 0, syscall.EISDIR
	}
	if a.Type != store.TypeFile {
		// Fifos, sockets and devices are served by the kernel; a handle
		// only keeps the inode alive.
		return a, v.addHandle(&handle{ino: ino, flags: flags}), nil
	}
	f := v.openFileRef(a)
	if v.meta.NoXattrs(a) {
		// The open read the file as having no extended attributes: the
		// kernel's GETXATTR of its capabilities before a write and cp
		// -a's listing need not ask the engine while it is open, unless
		// this mount set one since the read began. (Another mount's
		// setxattr changes the ctime, so openFileRef already forgot
		// what this mount knew when the version it read is new.)
		f.mu.Lock()
		if v.xattrGen.Load() == xgen {
			f.mu.noCaps, f.mu.noXattrs = true, true
		}
		f.mu.Unlock()
	}
	// The kernel's cached attributes are the file's version in the
	// engine (or have expired: it fetches them again before it reads),
	// and it drops its pages itself when attributes it fetches show a
	// new mtime or length (FUSE_AUTO_INVAL_DATA): so its pages are this
	// version's, and re-reading an unchanged file need not come here.
	keep := flags&syscall.O_TRUNC == 0 && !stalePages
	h := &handle{ino: ino, flags: flags, file: f, keep: keep}
	if keep && flags&syscall.O_ACCMODE != syscall.O_WRONLY {
		// The kernel may serve every read of this open from its pages,
		// so no read may come here to count as the access: the open
		// counts instead, judged on the attributes it found (in the
		// default noatime mode, or when relatime says no, this costs
		// nothing).
		h.read.Store(true)
		v.touchAtime(ctx, ino, f, a)
	}
	fh := v.addHandle(h)
	if flags&syscall.O_TRUNC != 0 && a.Length > 0 {
		if a, err = v.SetAttr(ctx, ino, meta.SetSize|meta.SetViaHandle, &meta.Attr{}); err != nil {
			v.Release(ctx, fh, 0)
			return nil, 0, err
		}
	}
	return a, fh, nil
}

// openMeta opens ino in the metadata client: from its open cache
// (OpenCacher) when what that holds is the version the kernel was given
// and the file still has a name, otherwise from the engine.
func (v *VFS) openMeta(ctx context.Context, ino meta.Ino, flags uint32) (*meta.Attr, error) {
	if oc, ok := capability[meta.OpenCacher](v.meta); ok {
		if a, ok := oc.OpenCached(ctx, ino, flags); ok {
			if !unlinked(a) && !v.view.attrChanged(a) {
				return a, nil
			}
			v.meta.Release(context.WithoutCancel(ctx), ino)
		}
	}
	return v.meta.Open(ctx, ino, flags)
}

// KeepCache reports whether the kernel may keep the pages it caches of
// the file fh opened (FOPEN_KEEP_CACHE): they are of the version the open
// found. Otherwise the kernel drops them at the open.
func (v *VFS) KeepCache(fh uint64) bool {
	h, err := v.handle(fh)
	return err == nil && h.keep
}

// DirectIO reports whether the kernel must send every read and write of
// the file fh opened here, bypassing its page cache: so it must for the
// internal files, whose content is made as it is read.
func (v *VFS) DirectIO(fh uint64) bool {
	h, err := v.handle(fh)
	return err == nil && h.internal != nil
}

// Flush commits the handle's buffered writes (close(2) of a descriptor)
// and, when lockOwner is not 0, drops the POSIX locks that owner holds on
// the file, as closing any descriptor of it does. The handle forgets the
// owner (see "Record lock owners" in lock.go): a FLUSH carries a
// process's owner, never an OFD lock's. A cancellation of ctx (the
// closing process was killed) ends the wait for the commit, which goes
// on in the background, and never keeps the locks.
func (v *VFS) Flush(ctx context.Context, fh uint64, lockOwner uint64) error {
	h, err := v.handle(fh)
	if err != nil || h.internal != nil {
		return err
	}
	// Commit before the locks go, so that the next holder reads it.
	if h.file != nil {
		err = h.file.flush(ctx)
	}
	if lockOwner != 0 {
		v.closedBy(h, lockOwner)
		if lerr := v.meta.ReleaseLocks(context.WithoutCancel(ctx), h.ino, lockOwner); err == nil {
			err = lerr
		}
	}
	return err
}

// Fsync makes the file's writes durable in the volume.
func (v *VFS) Fsync(ctx context.Context, fh uint64) error {
	if err := v.Flush(ctx, fh, 0); err != nil {
		return err
	}
	if err := v.data.Sync(ctx); err != nil {
		v.log().Error("fsync: sync stored blocks", "err", err)
		return syscall.EIO
	}
	return nil
}

// Release closes a handle (the last close of an open file description);
// the last handle of a file commits its writes. A flock held by
// flockOwner (not 0) is released, and so are the OFD locks taken through
// the handle, for which the kernel sends no owner (see "Record lock
// owners" in lock.go). Release runs to the end whatever becomes of ctx
// (only its credentials count): no process waits for it that could give
// up — the kernel sends it after the last close, and a failed open cleans
// up with it — and what comes next, the next holder of the lock or the
// next open, must find the writes committed and the handle gone.
func (v *VFS) Release(ctx context.Context, fh uint64, flockOwner uint64) error {
	ctx = context.WithoutCancel(ctx)
	v.mu.Lock()
	h, ok := v.mu.handles[fh]
	delete(v.mu.handles, fh)
	var owners map[uint64]struct{}
	counted := false
	if ok && h.internal == nil {
		// At once, with the handle: lock requests that come after
		// this RELEASE must find its locks gone.
		owners, counted = v.beginReleaseLocked(h, flockOwner != 0)
	}
	v.mu.Unlock()
	if !ok {
		return syscall.EBADF
	}
	if h.internal != nil {
		v.releaseInternal(h.internal)
		return nil
	}
	if counted {
		defer v.endRelease(h.ino)
	}
	var err error
	if f := h.file; f != nil {
		// Commit before the locks go, so that the next holder reads it.
		err = f.flush(ctx)
	}
	if flockOwner != 0 {
		if _, ferr := v.meta.Flock(ctx, h.ino, flockOwner, meta.LockUnlock, false); err == nil {
			err = ferr
		}
	}
	if counted && testHookReleasingLocks != nil {
		testHookReleasingLocks(h.ino)
	}
	if lerr := v.releaseRecordLocks(ctx, h.ino, owners); err == nil {
		err = lerr
	}
	if f := h.file; f != nil {
		if testHookReleaseFlushed != nil {
			testHookReleaseFlushed(h.ino)
		}
		if ferr := v.unref(ctx, f); err == nil {
			err = ferr
		}
	}
	if rerr := v.meta.Release(ctx, h.ino); err == nil {
		err = rerr
	}
	return err
}

// testHookReleaseFlushed, when set by a test, runs in Release between the
// flush and the release of the file's reference.
var testHookReleaseFlushed func(meta.Ino)

// unref drops a handle's reference to f. The last one takes f out of the
// open files only once nothing is held back on it: a SetAttr that found f
// open may have held a change after Release flushed, and that change must
// reach the engine before a caller can miss f and read the engine.
func (v *VFS) unref(ctx context.Context, f *openFile) error {
	var err error
	for {
		v.mu.Lock()
		f.mu.Lock()
		last := f.mu.refs == 1
		if last && f.holdsLocked() && err == nil {
			f.mu.Unlock()
			v.mu.Unlock()
			err = f.applyHeld(ctx)
			continue
		}
		f.mu.refs--
		if last {
			delete(v.mu.files, f.ino)
			if len(f.mu.held) == 0 {
				f.mu.closed = true
			} else if f.mu.heldTimer == nil {
				// What failed to apply stays with f, for a timer to retry.
				f.mu.heldTimer = time.AfterFunc(heldDelay, f.applyHeldLater)
			}
		}
		f.mu.Unlock()
		v.mu.Unlock()
		return err
	}
}
