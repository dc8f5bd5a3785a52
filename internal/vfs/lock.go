package vfs

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// Locks are where programs on different mounts meet (SQLite, mail spools,
// build caches), so they carry the lock-to-read rule: a lock taken makes
// this mount's view of the file current, and a lock released first commits
// what this mount wrote to it.

// Flock applies flock(2) for owner on the handle's file. It first waits
// for the releases of the file's handles in progress (see
// waitReleases).
func (v *VFS) Flock(ctx context.Context, fh uint64, owner uint64, typ uint32, block bool) error {
	h, err := v.handle(fh)
	if err != nil {
		return err
	}
	if err := v.waitReleases(ctx, h.ino); err != nil {
		return err
	}
	if typ == meta.LockUnlock {
		return v.unlock(ctx, h.ino, func(ctx context.Context) error {
			_, err := v.meta.Flock(ctx, h.ino, owner, typ, block)
			return err
		})
	}
	a, err := v.meta.Flock(ctx, h.ino, owner, typ, block)
	if err != nil {
		return err
	}
	v.locked(a)
	return nil
}

// Record lock owners.
//
// The kernel sends fcntl(2) record locks of both kinds alike, with an
// opaque lock owner id, and Sluice keeps them alike, by (session, owner):
//
//   - A POSIX lock (F_SETLK, F_SETLKW) belongs to a process: its owner is
//     the process's file table (a files_struct, which the threads of a
//     process and a CLONE_FILES child share). Closing any descriptor of
//     the file drops it: every close(2) sends a FLUSH carrying this owner.
//   - An OFD lock (F_OFD_SETLK, F_OFD_SETLKW) belongs to an open file
//     description: its owner is the kernel's struct file, which is one
//     handle here. Closing a descriptor does not drop it; the last close
//     of the description does, and for that the kernel sends nothing but
//     the RELEASE of the handle: no unlock, and no owner (a RELEASE
//     carries one only for flock(2)). Its owner never comes in a FLUSH,
//     which carries file tables only.
//
// So a handle remembers the owners that lock through it (recordOwners),
// and a FLUSH of the handle forgets its owner, whose POSIX locks it drops
// anyway. An owner still remembered at the RELEASE of the handle is an
// OFD owner: a process that took a POSIX lock through the handle had to
// close its descriptor of it (a FLUSH, answered before the kernel can
// send the RELEASE) for the description to go. Release drops the locks
// of those owners. Remembering an owner once too often costs a release
// of nothing; it never drops a lock that should stay. This depends on
// the kernel sending FLUSH at close, which it does while Flush is
// implemented and no open sets FOPEN_NOFLUSH.
//
// The kernel sends RELEASE after close(2) has returned, and the requests
// that follow may overtake it here: another process's F_OFD_GETLK would
// still see the lock, and a new description that the kernel gave the
// address, and so the owner id, of the closed one would merge its lock
// into the one about to be dropped. So lock requests on a file wait for
// the releases of its handles that drop locks (see waitReleases), once
// Release has begun.

// GetLk reports a lock that conflicts with lk (F_GETLK, F_OFD_GETLK)
// through handle fh.
func (v *VFS) GetLk(ctx context.Context, fh uint64, owner uint64, lk meta.PosixLock) (meta.PosixLock, error) {
	h, err := v.handle(fh)
	if err != nil {
		return meta.PosixLock{}, err
	}
	if err := v.waitReleases(ctx, h.ino); err != nil {
		return meta.PosixLock{}, err
	}
	return v.meta.GetLk(ctx, h.ino, owner, lk)
}

// SetLk applies a record lock (F_SETLK, F_OFD_SETLK, and F_SETLKW,
// F_OFD_SETLKW with block) for owner through handle fh. The owner is
// remembered on the handle before the request (a wait ended by a signal
// may still have taken the lock) and again after it (a FLUSH of the
// owner may have come meanwhile): see "Record lock owners".
func (v *VFS) SetLk(ctx context.Context, fh uint64, owner uint64, lk meta.PosixLock, block bool) error {
	h, err := v.handle(fh)
	if err != nil {
		return err
	}
	if err := v.waitReleases(ctx, h.ino); err != nil {
		return err
	}
	if lk.Type == meta.LockUnlock {
		return v.unlock(ctx, h.ino, func(ctx context.Context) error {
			_, err := v.meta.SetLk(ctx, h.ino, owner, lk, block)
			return err
		})
	}
	v.lockingThrough(h, owner)
	a, err := v.meta.SetLk(ctx, h.ino, owner, lk, block)
	if err != nil {
		return err
	}
	v.lockingThrough(h, owner)
	v.locked(a)
	return nil
}

// lockingThrough remembers that owner locks through h.
func (v *VFS) lockingThrough(h *handle, owner uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if h.recordOwners == nil {
		h.recordOwners = map[uint64]struct{}{}
	}
	h.recordOwners[owner] = struct{}{}
}

// closedBy forgets owner on h: a FLUSH of h carried it, so it is a
// process's (POSIX) owner, whose locks the FLUSH drops.
func (v *VFS) closedBy(h *handle, owner uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(h.recordOwners, owner)
}

// lockRelease is the releases of one file's handles in progress that
// drop locks: n of them, and done, closed when the last one ends.
type lockRelease struct {
	n    int
	done chan struct{}
}

// beginReleaseLocked takes h's remembered record lock owners (those of
// the OFD locks of its description) as h leaves the handle table, and,
// when it has some or flock is set (the release drops a flock), counts
// a release of h's file in progress until endRelease. It reports
// whether it counted one. v.mu is held.
func (v *VFS) beginReleaseLocked(h *handle, flock bool) (owners map[uint64]struct{}, counted bool) {
	owners, h.recordOwners = h.recordOwners, nil
	if len(owners) == 0 && !flock {
		return nil, false
	}
	r := v.mu.releasing[h.ino]
	if r == nil {
		r = &lockRelease{done: make(chan struct{})}
		v.mu.releasing[h.ino] = r
	}
	r.n++
	return owners, true
}

// endRelease ends a release of ino counted by beginReleaseLocked.
func (v *VFS) endRelease(ino meta.Ino) {
	v.mu.Lock()
	defer v.mu.Unlock()
	r := v.mu.releasing[ino]
	if r.n--; r.n == 0 {
		delete(v.mu.releasing, ino)
		close(r.done)
	}
}

// waitReleases waits until no release of ino's handles that drops locks
// is in progress. The wait is bounded by those releases' own metadata
// requests; an interrupted caller (ctx done) ends it with EINTR.
func (v *VFS) waitReleases(ctx context.Context, ino meta.Ino) error {
	for {
		v.mu.Lock()
		r := v.mu.releasing[ino]
		v.mu.Unlock()
		if r == nil {
			return nil
		}
		if testHookWaitRelease != nil {
			testHookWaitRelease(ino)
		}
		select {
		case <-r.done:
		case <-ctx.Done():
			return syscall.EINTR
		}
	}
}

// Test hooks, set by tests only: testHookWaitRelease runs when a lock
// request of ino is about to wait for a release; testHookReleasingLocks
// runs in a Release that drops locks, before it drops the record locks.
var testHookWaitRelease, testHookReleasingLocks func(meta.Ino)

// releaseRecordLocks drops the record locks of owners on ino: the OFD
// locks of a released handle (see beginReleaseLocked).
func (v *VFS) releaseRecordLocks(ctx context.Context, ino meta.Ino, owners map[uint64]struct{}) error {
	var errs []error
	for o := range owners {
		if err := v.meta.ReleaseLocks(ctx, ino, o); err != nil {
			errs = append(errs, fmt.Errorf("release the record locks of owner %#x on inode %d: %w", o, ino, err))
		}
	}
	return errors.Join(errs...)
}

// unlock commits this mount's buffered writes of ino, then releases the
// lock. The lock goes even when the commit fails (the program would
// otherwise hold it until it exits) or ctx is cancelled (the request was
// interrupted); the failure is reported.
func (v *VFS) unlock(ctx context.Context, ino meta.Ino, release func(context.Context) error) error {
	var ferr error
	if f := v.fileOf(ino); f != nil {
		ferr = f.flush(ctx)
	}
	return errors.Join(ferr, release(context.WithoutCancel(ctx)))
}

// locked makes this mount's view of a current after a lock on it was
// taken; a is the inode as the lock's transaction read it.
//
// The file's data: when a is still the version this mount's caches hold,
// nothing happens. Otherwise the cached slice lists go and the kernel
// drops the file's pages and attributes.
//
// The names around it: a program that holds a lock asks about names next
// to the file (SQLite's hot-journal check looks for "db-journal"), and
// another mount may have created or removed them. Every entry of the
// file's directory (of the directory itself, for a lock on one) that the
// kernel may still cache is dropped, so those questions reach the engine.
// Only names handed to the kernel within its entry timeout are known to
// the view and need a notification; the rest the kernel has forgotten.
func (v *VFS) locked(a *meta.Attr) {
	if f := v.fileOf(a.Ino); f == nil || f.revalidate(a) {
		v.invalidateInode(a.Ino, true)
	}
	v.forgetAhead(a.Ino) // the next open reads the engine, not an open cache
	if a.Type == store.TypeDir {
		v.invalidateNames(a.Ino)
	} else if a.Parent != 0 {
		v.invalidateNames(a.Parent)
	}
}

// invalidateInode drops the kernel's attributes of ino and, with data, its
// pages.
func (v *VFS) invalidateInode(ino meta.Ino, data bool) {
	k := v.kernelCache()
	if k == nil {
		return
	}
	if err := k.InvalidateInode(ino, data); err != nil && !errors.Is(err, syscall.ENOENT) {
		v.log().Warn("cannot invalidate the kernel's cache of a file", "ino", ino, "err", err)
	}
}

// invalidateNames drops the kernel's entries of dir that it may still
// cache, and the metadata client's listing of dir (see LookerAhead), so
// that the next lookups in dir reach the engine.
func (v *VFS) invalidateNames(dir meta.Ino) {
	v.forgetAhead(dir)
	k := v.kernelCache()
	if k == nil {
		return
	}
	for _, name := range v.view.takeNames(dir) {
		if err := k.InvalidateEntry(dir, []byte(name)); err != nil && !errors.Is(err, syscall.ENOENT) {
			v.log().Warn("cannot invalidate the kernel's entry of a name", "dir", dir, "name", name, "err", err)
		}
	}
}

// forgetAhead drops what the metadata client's statahead and open cache
// hold of ino (see LookerAhead and OpenCacher).
func (v *VFS) forgetAhead(ino meta.Ino) {
	if la, ok := capability[meta.LookerAhead](v.meta); ok {
		la.ForgetAhead(ino)
	}
}
