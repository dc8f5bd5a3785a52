// Package subtree serves one directory of a volume as if it were the
// whole volume: what `sluice mount --subdir` mounts. Ops wraps the
// metadata operations of a mount (meta.Ops) and renumbers one inode: the
// directory's own number goes up as meta.RootIno, and RootIno coming
// down names the directory. Every other inode keeps its number, so the
// records, the caches and the data are the volume's as they are.
//
// Nothing outside the directory can be reached through Ops: a name is
// looked up only in a directory the caller reached, ".." of the root is
// the root, the volume's own root is never handed up, and Reachable
// tells whether an inode number the caller did not get from Ops (a file
// handle of NFS, open_by_handle_at) lies inside. A symlink is data: one
// whose target points out of the directory is a plain symlink, which
// the kernel resolves in the caller's own file system tree.
package subtree

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
)

// maxDepth bounds the directories Reachable climbs.
const maxDepth = 4096

// Ops is meta.Ops on the tree under one directory. It has each optional
// capability of meta (meta.Creator, …) exactly when the Ops it wraps has
// it: Unwrap returns that, for the caller to ask.
type Ops struct {
	inner meta.Ops
	root  meta.Ino
}

// New returns inner's operations on the tree under the directory root.
func New(inner meta.Ops, root meta.Ino) *Ops { return &Ops{inner: inner, root: root} }

// Unwrap returns the wrapped operations, whose optional capabilities
// Ops has.
func (s *Ops) Unwrap() meta.Ops { return s.inner }

// Root returns the number of the directory served as the root.
func (s *Ops) Root() meta.Ino { return s.root }

// In returns the volume's number of the inode the caller names ino.
func (s *Ops) In(ino meta.Ino) meta.Ino {
	if ino == meta.RootIno {
		return s.root
	}
	return ino
}

// Out returns the caller's number of the volume's inode ino.
func (s *Ops) Out(ino meta.Ino) meta.Ino {
	if ino == s.root {
		return meta.RootIno
	}
	return ino
}

// attr returns a copy of a with the caller's numbers (never a itself,
// which the wrapped operations may keep in their caches).
func (s *Ops) attr(a *meta.Attr) *meta.Attr {
	if a == nil {
		return nil
	}
	c := *a
	c.Ino = s.Out(c.Ino)
	if c.Ino == meta.RootIno {
		c.Parent = meta.RootIno
	} else if c.Parent != 0 {
		c.Parent = s.Out(c.Parent)
	}
	return &c
}

func (s *Ops) out(a *meta.Attr, err error) (*meta.Attr, error) {
	if err != nil {
		return nil, err
	}
	return s.attr(a), nil
}

// outside reports an inode the caller must not get: the volume's root,
// above the tree.
func (s *Ops) outside(a *meta.Attr) bool {
	return a != nil && a.Ino == meta.RootIno && s.root != meta.RootIno
}

// Reachable reports whether the inode the caller names ino lies in the
// tree: nil, or syscall.ESTALE (as for a file handle of a file gone). It
// climbs the parents the records name; a file with several links names
// none, and is reachable only when the caller already holds it
// (ESTALE here).
func (s *Ops) Reachable(ctx context.Context, ino meta.Ino) error {
	ino = s.In(ino)
	for n := 0; n < maxDepth; n++ {
		if ino == s.root {
			return nil
		}
		if ino == meta.RootIno || ino == 0 {
			return syscall.ESTALE
		}
		a, err := s.inner.GetAttr(ctx, ino)
		if err != nil {
			return err
		}
		ino = a.Parent
	}
	return fmt.Errorf("inode %d: more than %d directories above it: %w", ino, maxDepth, syscall.ESTALE)
}

// name returns the volume's parent and name of the caller's name in
// parent: ".." of the root is the root itself.
func (s *Ops) name(parent meta.Ino, name []byte) (meta.Ino, []byte) {
	p := s.In(parent)
	if p == s.root && string(name) == ".." {
		return p, []byte(".")
	}
	return p, name
}

// found returns what a lookup found, unless it is above the tree.
func (s *Ops) found(a *meta.Attr, err error) (*meta.Attr, error) {
	if err == nil && s.outside(a) {
		return nil, syscall.ENOENT
	}
	return s.out(a, err)
}

// Lookup looks name up in parent; ".." of the root is the root.
func (s *Ops) Lookup(ctx context.Context, parent meta.Ino, name []byte) (*meta.Attr, error) {
	p, n := s.name(parent, name)
	return s.found(s.inner.Lookup(ctx, p, n))
}

// GetAttr is meta.Ops's GetAttr, on the tree's numbers.
func (s *Ops) GetAttr(ctx context.Context, ino meta.Ino) (*meta.Attr, error) {
	return s.out(s.inner.GetAttr(ctx, s.In(ino)))
}

// SetAttr is meta.Ops's SetAttr, on the tree's numbers.
func (s *Ops) SetAttr(ctx context.Context, ino meta.Ino, mask uint32, in *meta.Attr) (*meta.Attr, error) {
	return s.out(s.inner.SetAttr(ctx, s.In(ino), mask, in))
}

// PreviewAttr decides from a alone, which carries the caller's numbers.
func (s *Ops) PreviewAttr(ctx context.Context, a *meta.Attr, mask uint32, in *meta.Attr) (*meta.Attr, bool) {
	return s.inner.PreviewAttr(ctx, a, mask, in)
}

// ApplyAttrChanges is meta.Ops's ApplyAttrChanges, on the tree's numbers.
func (s *Ops) ApplyAttrChanges(ctx context.Context, ino meta.Ino, changes []meta.AttrChange) (*meta.Attr, error) {
	return s.out(s.inner.ApplyAttrChanges(ctx, s.In(ino), changes))
}

// Access is meta.Ops's Access, on the tree's numbers.
func (s *Ops) Access(ctx context.Context, ino meta.Ino, mask uint32) error {
	return s.inner.Access(ctx, s.In(ino), mask)
}

// TouchAtime is meta.Ops's TouchAtime, on the tree's numbers.
func (s *Ops) TouchAtime(ctx context.Context, ino meta.Ino, a *meta.Attr) error {
	return s.inner.TouchAtime(ctx, s.In(ino), a)
}

// RecordsAtime is meta.Ops's RecordsAtime, on the tree's numbers.
func (s *Ops) RecordsAtime() bool { return s.inner.RecordsAtime() }

// StatFS is meta.Ops's StatFS, on the tree's numbers.
func (s *Ops) StatFS(ctx context.Context) (meta.StatFS, error) { return s.inner.StatFS(ctx) }

// Mknod is meta.Ops's Mknod, on the tree's numbers.
func (s *Ops) Mknod(ctx context.Context, parent meta.Ino, name []byte, nn meta.NewNode) (*meta.Attr, error) {
	return s.out(s.inner.Mknod(ctx, s.In(parent), name, nn))
}

// Link is meta.Ops's Link, on the tree's numbers.
func (s *Ops) Link(ctx context.Context, ino, newParent meta.Ino, name []byte) (*meta.Attr, error) {
	return s.out(s.inner.Link(ctx, s.In(ino), s.In(newParent), name))
}

// Unlink is meta.Ops's Unlink, on the tree's numbers.
func (s *Ops) Unlink(ctx context.Context, parent meta.Ino, name []byte) error {
	return s.inner.Unlink(ctx, s.In(parent), name)
}

// Rmdir is meta.Ops's Rmdir, on the tree's numbers.
func (s *Ops) Rmdir(ctx context.Context, parent meta.Ino, name []byte) error {
	return s.inner.Rmdir(ctx, s.In(parent), name)
}

// Rename is meta.Ops's Rename, on the tree's numbers.
func (s *Ops) Rename(ctx context.Context, srcParent meta.Ino, srcName []byte, dstParent meta.Ino, dstName []byte, flags uint32) error {
	return s.inner.Rename(ctx, s.In(srcParent), srcName, s.In(dstParent), dstName, flags)
}

// ReadLink is meta.Ops's ReadLink, on the tree's numbers.
func (s *Ops) ReadLink(ctx context.Context, ino meta.Ino) ([]byte, error) {
	return s.inner.ReadLink(ctx, s.In(ino))
}

// Open is meta.Ops's Open, on the tree's numbers.
func (s *Ops) Open(ctx context.Context, ino meta.Ino, flags uint32) (*meta.Attr, error) {
	return s.out(s.inner.Open(ctx, s.In(ino), flags))
}

// Created is meta.Ops's Created, on the tree's numbers.
func (s *Ops) Created(ino meta.Ino) { s.inner.Created(s.In(ino)) }

// Release is meta.Ops's Release, on the tree's numbers.
func (s *Ops) Release(ctx context.Context, ino meta.Ino) error {
	return s.inner.Release(ctx, s.In(ino))
}

// OpenDir is meta.Ops's OpenDir, on the tree's numbers.
func (s *Ops) OpenDir(ctx context.Context, ino meta.Ino) (*meta.Attr, error) {
	return s.out(s.inner.OpenDir(ctx, s.In(ino)))
}

// ReadDir is meta.Ops's ReadDir, on the tree's numbers.
func (s *Ops) ReadDir(ctx context.Context, ino meta.Ino, after []byte, limit int, plus bool) ([]meta.Entry, error) {
	es, err := s.inner.ReadDir(ctx, s.In(ino), after, limit, plus)
	if err != nil {
		return nil, err
	}
	out := make([]meta.Entry, len(es))
	for i, e := range es {
		out[i] = meta.Entry{Name: e.Name, Ino: s.Out(e.Ino), Type: e.Type, Attr: s.attr(e.Attr)}
	}
	return out, nil
}

// ReadChunk is meta.Ops's ReadChunk, on the tree's numbers.
func (s *Ops) ReadChunk(ctx context.Context, ino meta.Ino, idx uint32) ([]meta.Slice, error) {
	return s.inner.ReadChunk(ctx, s.In(ino), idx)
}

// NewSliceID is meta.Ops's NewSliceID, on the tree's numbers.
func (s *Ops) NewSliceID(ctx context.Context) (uint64, error) { return s.inner.NewSliceID(ctx) }

// WriteSliceAttr is meta.Ops's WriteSliceAttr, on the tree's numbers.
func (s *Ops) WriteSliceAttr(ctx context.Context, ino meta.Ino, idx uint32, sl meta.Slice, changes []meta.AttrChange, unsynced bool) (meta.Version, *meta.Attr, error) {
	v, a, err := s.inner.WriteSliceAttr(ctx, s.In(ino), idx, sl, changes, unsynced)
	if err != nil {
		return v, nil, err
	}
	return v, s.attr(a), nil
}

// Fallocate is meta.Ops's Fallocate, on the tree's numbers.
func (s *Ops) Fallocate(ctx context.Context, ino meta.Ino, mode uint32, off, length uint64) error {
	return s.inner.Fallocate(ctx, s.In(ino), mode, off, length)
}

// CopyFileRange is meta.Ops's CopyFileRange, on the tree's numbers.
func (s *Ops) CopyFileRange(ctx context.Context, src meta.Ino, srcOff uint64, dst meta.Ino, dstOff uint64, length uint64) (uint64, *meta.Attr, error) {
	n, a, err := s.inner.CopyFileRange(ctx, s.In(src), srcOff, s.In(dst), dstOff, length)
	if err != nil {
		return n, nil, err
	}
	return n, s.attr(a), nil
}

// Flock is meta.Ops's Flock, on the tree's numbers.
func (s *Ops) Flock(ctx context.Context, ino meta.Ino, owner uint64, typ uint32, block bool) (*meta.Attr, error) {
	return s.out(s.inner.Flock(ctx, s.In(ino), owner, typ, block))
}

// GetLk is meta.Ops's GetLk, on the tree's numbers.
func (s *Ops) GetLk(ctx context.Context, ino meta.Ino, owner uint64, lk meta.PosixLock) (meta.PosixLock, error) {
	return s.inner.GetLk(ctx, s.In(ino), owner, lk)
}

// SetLk is meta.Ops's SetLk, on the tree's numbers.
func (s *Ops) SetLk(ctx context.Context, ino meta.Ino, owner uint64, lk meta.PosixLock, block bool) (*meta.Attr, error) {
	return s.out(s.inner.SetLk(ctx, s.In(ino), owner, lk, block))
}

// ReleaseLocks is meta.Ops's ReleaseLocks, on the tree's numbers.
func (s *Ops) ReleaseLocks(ctx context.Context, ino meta.Ino, owner uint64) error {
	return s.inner.ReleaseLocks(ctx, s.In(ino), owner)
}

// XattrSupported is meta.Ops's XattrSupported, on the tree's numbers.
func (s *Ops) XattrSupported(name string) bool { return s.inner.XattrSupported(name) }

// NoXattrs is meta.Ops's NoXattrs, on the tree's numbers.
func (s *Ops) NoXattrs(a *meta.Attr) bool { return s.inner.NoXattrs(a) }

// GetXattr is meta.Ops's GetXattr, on the tree's numbers.
func (s *Ops) GetXattr(ctx context.Context, ino meta.Ino, name string) ([]byte, error) {
	return s.inner.GetXattr(ctx, s.In(ino), name)
}

// ListXattr is meta.Ops's ListXattr, on the tree's numbers.
func (s *Ops) ListXattr(ctx context.Context, ino meta.Ino) ([]string, error) {
	return s.inner.ListXattr(ctx, s.In(ino))
}

// SetXattr is meta.Ops's SetXattr, on the tree's numbers.
func (s *Ops) SetXattr(ctx context.Context, ino meta.Ino, name string, value []byte, flags uint32) error {
	return s.inner.SetXattr(ctx, s.In(ino), name, value, flags)
}

// RemoveXattr is meta.Ops's RemoveXattr, on the tree's numbers.
func (s *Ops) RemoveXattr(ctx context.Context, ino meta.Ino, name string) error {
	return s.inner.RemoveXattr(ctx, s.In(ino), name)
}

// The optional capabilities: each is called only when the wrapped Ops
// has it (see Unwrap).

// Create is meta.Creator's.
func (s *Ops) Create(ctx context.Context, parent meta.Ino, name []byte, nn meta.NewNode) (*meta.Attr, error) {
	return s.out(s.inner.(meta.Creator).Create(ctx, s.In(parent), name, nn))
}

// Tmpfile is meta.TmpfileCreator's.
func (s *Ops) Tmpfile(ctx context.Context, parent meta.Ino, nn meta.NewNode) (*meta.Attr, error) {
	return s.out(s.inner.(meta.TmpfileCreator).Tmpfile(ctx, s.In(parent), nn))
}

// CommitCopy is meta.CopyCommitter's.
func (s *Ops) CommitCopy(ctx context.Context, cp meta.HeldCopy, held []meta.AttrChange) (meta.Version, *meta.Attr, error) {
	cp.Src, cp.Dst = s.In(cp.Src), s.In(cp.Dst)
	v, a, err := s.inner.(meta.CopyCommitter).CommitCopy(ctx, cp, held)
	if err != nil {
		return v, nil, err
	}
	return v, s.attr(a), nil
}

// LookupAhead is meta.LookerAhead's.
func (s *Ops) LookupAhead(ctx context.Context, parent meta.Ino, name []byte) (*meta.Attr, time.Duration, error) {
	p, n := s.name(parent, name)
	a, age, err := s.inner.(meta.LookerAhead).LookupAhead(ctx, p, n)
	a, err = s.found(a, err)
	return a, age, err
}

// ForgetAhead is meta.LookerAhead's.
func (s *Ops) ForgetAhead(ino meta.Ino) { s.inner.(meta.LookerAhead).ForgetAhead(s.In(ino)) }

// OpenCached is meta.OpenCacher's.
func (s *Ops) OpenCached(ctx context.Context, ino meta.Ino, flags uint32) (*meta.Attr, bool) {
	a, ok := s.inner.(meta.OpenCacher).OpenCached(ctx, s.In(ino), flags)
	return s.attr(a), ok
}

// OpenDirCached is meta.OpenCacher's.
func (s *Ops) OpenDirCached(ctx context.Context, ino meta.Ino) (*meta.Attr, bool) {
	a, ok := s.inner.(meta.OpenCacher).OpenDirCached(ctx, s.In(ino))
	return s.attr(a), ok
}

var (
	_ meta.Ops            = (*Ops)(nil)
	_ meta.Creator        = (*Ops)(nil)
	_ meta.TmpfileCreator = (*Ops)(nil)
	_ meta.CopyCommitter  = (*Ops)(nil)
	_ meta.LookerAhead    = (*Ops)(nil)
	_ meta.OpenCacher     = (*Ops)(nil)
)
