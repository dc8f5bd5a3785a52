package vfs

import (
	"context"
	"errors"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// Locks are where programs on different mounts meet (SQLite, mail spools,
// build caches), so they carry the lock-to-read rule: a lock taken makes
// this mount's view of the file current, and a lock released first commits
// what this mount wrote to it.

// Flock applies flock(2) for owner on the handle's file.
func (v *VFS) Flock(ctx context.Context, fh uint64, owner uint64, typ uint32, block bool) error {
	h, err := v.handle(fh)
	if err != nil {
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

// GetLk reports a lock that conflicts with lk (F_GETLK).
func (v *VFS) GetLk(ctx context.Context, ino meta.Ino, owner uint64, lk meta.PosixLock) (meta.PosixLock, error) {
	return v.meta.GetLk(ctx, ino, owner, lk)
}

// SetLk applies a POSIX record lock (F_SETLK, F_SETLKW with block).
func (v *VFS) SetLk(ctx context.Context, ino meta.Ino, owner uint64, lk meta.PosixLock, block bool) error {
	if lk.Type == meta.LockUnlock {
		return v.unlock(ctx, ino, func(ctx context.Context) error {
			_, err := v.meta.SetLk(ctx, ino, owner, lk, block)
			return err
		})
	}
	a, err := v.meta.SetLk(ctx, ino, owner, lk, block)
	if err != nil {
		return err
	}
	v.locked(a)
	return nil
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
	if la, ok := v.meta.(LookerAhead); ok {
		la.ForgetAhead(ino)
	}
}
