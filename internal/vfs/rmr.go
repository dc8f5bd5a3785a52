package vfs

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/sluicefs/sluice/internal/control"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// rmrPage is how many entries of a directory RemoveTree lists at once.
const rmrPage = 1000

// RemoveTree removes the entry name of directory parent and, when it is a
// directory, everything below it, as `rm -rf` does: depth first, each
// entry with Unlink or Rmdir and the credentials in ctx, so that
// permissions, the sticky bit and the trash apply to every entry as they
// would to rm's system calls (on a volume with a trash, files go to it).
// Entries of a directory are removed by up to workers goroutines across
// the whole tree (at least 1).
//
// An entry that cannot be removed is recorded in fails, with its path
// relative to parent ("name/sub/file"), and the walk goes on with the
// others; the directories above it then stay, as rm leaves them. removed
// is called once per entry removed. RemoveTree returns an error only when
// it could not start (the entry is missing or is an internal file) or
// ctx ended.
//
// The kernel may still cache names of the removed tree: RemoveTree drops
// those this mount handed it (see kernelView) and the entry of the top,
// so that the mount shows the tree gone at once.
func (v *VFS) RemoveTree(ctx context.Context, parent meta.Ino, name []byte, workers int, fails *control.Failures, removed func()) error {
	if internalByName(parent, name) != nil {
		return syscall.EPERM
	}
	a, err := v.meta.Lookup(ctx, parent, name)
	if err != nil {
		return err
	}
	r := &remover{v: v, fails: fails, removed: removed, tokens: make(chan struct{}, max(workers, 1)-1)}
	path := string(name)
	isDir := a.Type == store.TypeDir
	if !isDir || r.dir(ctx, a.Ino, path) {
		r.remove(ctx, parent, name, isDir, path)
	}
	v.invalidateEntry(parent, name)
	return ctx.Err()
}

// remover is one RemoveTree.
type remover struct {
	v       *VFS
	fails   *control.Failures
	removed func()
	// tokens bounds the goroutines beyond the caller's: an entry is
	// handed to a new goroutine when a token is free, and handled by the
	// goroutine that lists it otherwise, so the walk never waits for a
	// token while holding one.
	tokens chan struct{}
}

// dir removes every entry of directory ino (at path), and reports whether
// it is empty now.
func (r *remover) dir(ctx context.Context, ino meta.Ino, path string) bool {
	// rm lists a directory before it removes its entries: it needs to
	// read it.
	if _, err := r.v.meta.OpenDir(ctx, ino); err != nil {
		r.fail(ctx, path, err)
		return false
	}
	empty := true
	var after []byte
	for {
		es, err := r.v.meta.ReadDir(ctx, ino, after, rmrPage, false)
		if err != nil {
			r.fail(ctx, path, err)
			return false
		}
		var left atomic.Bool // an entry of this page stays
		var wg sync.WaitGroup
		for _, e := range es {
			work := func() {
				if !r.entry(ctx, ino, e, path+"/"+string(e.Name)) {
					left.Store(true)
				}
			}
			select {
			case r.tokens <- struct{}{}:
				wg.Add(1)
				go func() {
					defer func() { <-r.tokens; wg.Done() }()
					work()
				}()
			default:
				work()
			}
		}
		wg.Wait()
		if left.Load() {
			empty = false
		}
		if len(es) < rmrPage || ctx.Err() != nil {
			break
		}
		// Entries that stay sort before the page's last name, so the
		// next page starts after it.
		after = es[len(es)-1].Name
	}
	r.v.invalidateNames(ino)
	return empty && ctx.Err() == nil
}

// entry removes the entry e of directory dir, with its tree, and reports
// whether it went.
func (r *remover) entry(ctx context.Context, dir meta.Ino, e meta.Entry, path string) bool {
	if ctx.Err() != nil {
		return false
	}
	isDir := e.Type == store.TypeDir
	if isDir && !r.dir(ctx, e.Ino, path) {
		return false
	}
	return r.remove(ctx, dir, e.Name, isDir, path)
}

// remove unlinks name from dir, or removes it as an empty directory.
func (r *remover) remove(ctx context.Context, dir meta.Ino, name []byte, isDir bool, path string) bool {
	var err error
	if isDir {
		err = r.v.Rmdir(ctx, dir, name)
	} else {
		err = r.v.Unlink(ctx, dir, name)
	}
	if err != nil {
		r.fail(ctx, path, err)
		return false
	}
	r.removed()
	return true
}

// fail records a failure, unless it is the end of ctx, which RemoveTree
// reports itself.
func (r *remover) fail(ctx context.Context, path string, err error) {
	if ctx.Err() != nil {
		return
	}
	r.fails.Add(path, err)
}

// invalidateEntry drops the kernel's entry for name in parent.
func (v *VFS) invalidateEntry(parent meta.Ino, name []byte) {
	k := v.kernelCache()
	if k == nil {
		return
	}
	if err := k.InvalidateEntry(parent, name); err != nil && !errors.Is(err, syscall.ENOENT) {
		v.log().Warn("cannot invalidate the kernel's entry of a name", "dir", parent, "name", string(name), "err", err)
	}
}
