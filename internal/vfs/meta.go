package vfs

import (
	"context"

	"github.com/sluicefs/sluice/internal/meta"
)

// Meta is the metadata service a VFS runs on: the list of operations a
// mount uses, declared once as meta.Ops (where its contract is). The
// POSIX core (*meta.Client) and the client of the metadata server
// (internal/meta/remote) implement it. Its optional capabilities
// (meta.Creator, meta.LookerAhead, …) are declared beside it; the VFS asks
// for each with a type assertion and works without it.
type Meta = meta.Ops

// wrapper is a Meta that wraps another (package subtree's): it has an
// optional capability only when the Meta it wraps has it.
type wrapper interface{ Unwrap() meta.Ops }

// capability returns m as T when m has that optional capability: m is a
// T, and so is every Meta it wraps.
func capability[T any](m Meta) (T, bool) {
	c, ok := m.(T)
	for inner := m; ok; {
		w, wraps := inner.(wrapper)
		if !wraps {
			break
		}
		inner = w.Unwrap()
		_, ok = inner.(T)
	}
	if !ok {
		var zero T
		return zero, false
	}
	return c, true
}

// subtreeMeta is a Meta that serves one directory of the volume as the
// root (package subtree): the VFS checks with it that an inode number it
// did not hand out itself (a file handle) lies inside, and gives the
// controls, which work on the volume's own numbers, those (In).
type subtreeMeta interface {
	Reachable(ctx context.Context, ino meta.Ino) error
	In(ino meta.Ino) meta.Ino
}
