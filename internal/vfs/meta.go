package vfs

import "github.com/sluicefs/sluice/internal/meta"

// Meta is the metadata service a VFS runs on: the list of operations a
// mount uses, declared once as meta.Ops (where its contract is). The
// POSIX core (*meta.Client) and the client of the metadata server
// (internal/meta/remote) implement it. Its optional capabilities
// (meta.Creator, meta.LookerAhead, …) are declared beside it; the VFS asks
// for each with a type assertion and works without it.
type Meta = meta.Ops
