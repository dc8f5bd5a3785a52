package vfs

import (
	"context"

	"github.com/sluicefs/sluice/internal/meta"
)

// Flock applies flock(2) for owner on the handle's file.
func (v *VFS) Flock(ctx context.Context, fh uint64, owner uint64, typ uint32, block bool) error {
	h, err := v.handle(fh)
	if err != nil {
		return err
	}
	return v.Meta.Flock(ctx, h.ino, owner, typ, block)
}

// GetLk reports a lock that conflicts with lk (F_GETLK).
func (v *VFS) GetLk(ctx context.Context, ino meta.Ino, owner uint64, lk meta.PosixLock) (meta.PosixLock, error) {
	return v.Meta.GetLk(ctx, ino, owner, lk)
}

// SetLk applies a POSIX record lock (F_SETLK, F_SETLKW with block).
func (v *VFS) SetLk(ctx context.Context, ino meta.Ino, owner uint64, lk meta.PosixLock, block bool) error {
	return v.Meta.SetLk(ctx, ino, owner, lk, block)
}
