package vfs

import "github.com/sluicefs/sluice/internal/meta"

// Meta is the metadata service a VFS runs on: the list of operations a
// mount uses, declared once as meta.Ops (where its contract is). The
// POSIX core (*meta.Client) and the client of the metadata server
// (internal/meta/remote) implement it.
type Meta = meta.Ops

// The optional capabilities of a Meta, declared beside meta.Ops; the VFS
// asks for each with a type assertion and works without it.
type (
	// Creator: meta.Creator.
	Creator = meta.Creator
	// TmpfileCreator: meta.TmpfileCreator.
	TmpfileCreator = meta.TmpfileCreator
	// CopyCommitter: meta.CopyCommitter.
	CopyCommitter = meta.CopyCommitter
	// LookerAhead: meta.LookerAhead.
	LookerAhead = meta.LookerAhead
	// OpenCacher: meta.OpenCacher.
	OpenCacher = meta.OpenCacher
)
