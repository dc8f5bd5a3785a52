package meta

import (
	"context"
	"time"
)

// Ops is the list of metadata operations a mount uses, stated once. The
// VFS (package vfs) and the access paths above it use exactly these; the
// POSIX core, *Client, implements exactly these and the optional
// capabilities below (a test holds it to that); and the protocol of the
// metadata server is derived from this list (package wire's operation
// table, whose test fails when an operation here has no entry there).
// The other implementation is the client of the metadata server
// (internal/meta/remote), which sends each operation whole.
//
// Adding an operation: declare it here (or in a capability), implement
// it on *Client with a conformance case in metatest, and give it an
// entry in wire's operation table.
//
// The contract is package meta's: every method takes the caller's
// credentials in ctx (WithCred), checks POSIX permissions itself,
// and returns errors that wrap a syscall.Errno for POSIX failures
// (ErrNoInode for an inode that no longer exists); anything else is
// an I/O failure. A cancelled ctx ends a blocking call (a lock wait) with
// EINTR.
type Ops interface {
	// Names and attributes.
	Lookup(ctx context.Context, parent Ino, name []byte) (*Attr, error)
	GetAttr(ctx context.Context, ino Ino) (*Attr, error)
	SetAttr(ctx context.Context, ino Ino, mask uint32, in *Attr) (*Attr, error)
	// PreviewAttr tells what SetAttr would make of a file whose
	// attributes are a, when a alone decides it; the change may then be
	// held back and applied by WriteSliceAttr.
	PreviewAttr(ctx context.Context, a *Attr, mask uint32, in *Attr) (*Attr, bool)
	ApplyAttrChanges(ctx context.Context, ino Ino, changes []AttrChange) (*Attr, error)
	Access(ctx context.Context, ino Ino, mask uint32) error
	// TouchAtime records a read of ino as the mount's atime mode says;
	// RecordsAtime tells whether the mode records any (not noatime).
	TouchAtime(ctx context.Context, ino Ino, a *Attr) error
	RecordsAtime() bool
	StatFS(ctx context.Context) (StatFS, error)

	// Changes of the namespace.
	Mknod(ctx context.Context, parent Ino, name []byte, nn NewNode) (*Attr, error)
	Link(ctx context.Context, ino, newParent Ino, name []byte) (*Attr, error)
	Unlink(ctx context.Context, parent Ino, name []byte) error
	Rmdir(ctx context.Context, parent Ino, name []byte) error
	Rename(ctx context.Context, srcParent Ino, srcName []byte, dstParent Ino, dstName []byte, flags uint32) error
	ReadLink(ctx context.Context, ino Ino) ([]byte, error)

	// Open files and directories. Open and OpenDir check access for the
	// open flags; Release ends what Open began (an unlinked file's data
	// lives until its last release). Created tells the client that the
	// file it just made is open, as Open would have.
	Open(ctx context.Context, ino Ino, flags uint32) (*Attr, error)
	Created(ino Ino)
	Release(ctx context.Context, ino Ino) error
	OpenDir(ctx context.Context, ino Ino) (*Attr, error)
	// ReadDir returns up to limit entries of directory ino whose names
	// sort after after (nil: from the start), with attributes when plus.
	ReadDir(ctx context.Context, ino Ino, after []byte, limit int, plus bool) ([]Entry, error)

	// File data: slice lists of chunks.
	ReadChunk(ctx context.Context, ino Ino, idx uint32) ([]Slice, error)
	NewSliceID(ctx context.Context) (uint64, error)
	WriteSliceAttr(ctx context.Context, ino Ino, idx uint32, s Slice, changes []AttrChange, unsynced bool) (Version, *Attr, error)
	Fallocate(ctx context.Context, ino Ino, mode uint32, off, length uint64) error
	CopyFileRange(ctx context.Context, src Ino, srcOff uint64, dst Ino, dstOff uint64, length uint64) (uint64, *Attr, error)

	// Locks, held by (mount, owner) pairs across mounts.
	Flock(ctx context.Context, ino Ino, owner uint64, typ uint32, block bool) (*Attr, error)
	GetLk(ctx context.Context, ino Ino, owner uint64, lk PosixLock) (PosixLock, error)
	SetLk(ctx context.Context, ino Ino, owner uint64, lk PosixLock, block bool) (*Attr, error)
	ReleaseLocks(ctx context.Context, ino Ino, owner uint64) error

	// Extended attributes. XattrSupported tells, without the engine,
	// whether the volume keeps a name at all, and NoXattrs whether
	// attributes read from it say the node has none.
	XattrSupported(name string) bool
	NoXattrs(a *Attr) bool
	GetXattr(ctx context.Context, ino Ino, name string) ([]byte, error)
	ListXattr(ctx context.Context, ino Ino) ([]string, error)
	SetXattr(ctx context.Context, ino Ino, name string, value []byte, flags uint32) error
	RemoveXattr(ctx context.Context, ino Ino, name string) error
}

// Creator is the optional capability of an Ops that makes a regular
// file and counts a handle of it open in one call, as Mknod then Created
// would (a client of the metadata server: one round trip, and no window
// in which the server knows the file but not the handle).
type Creator interface {
	Create(ctx context.Context, parent Ino, name []byte, nn NewNode) (*Attr, error)
}

// TmpfileCreator is the optional capability of an Ops that makes an
// unnamed regular file in a directory (open(2) with O_TMPFILE) and counts
// a handle of it open, in one call: the file has no link, is deleted at
// its last Release unless Link gave it a name first, and is deleted too
// when the session ends without releasing it (Client.Tmpfile).
// Without it O_TMPFILE fails with EOPNOTSUPP.
type TmpfileCreator interface {
	Tmpfile(ctx context.Context, parent Ino, nn NewNode) (*Attr, error)
}

// CopyCommitter is the optional capability of an Ops that commits a
// copy_file_range held back on the file it copies into together with the
// attribute changes held after it, in one transaction
// (Client.CommitCopy): it returns the file's version before and its
// attributes after. Without it a copy commits when asked.
type CopyCommitter interface {
	CommitCopy(ctx context.Context, cp HeldCopy, held []AttrChange) (Version, *Attr, error)
}

// LookerAhead is the optional capability of an Ops that may answer the
// kernel's lookups from a listing of the directory read a moment ago
// (*Client with Config.Statahead). LookupAhead returns how old its
// answer is, which the mount takes off the kernel's cache times.
// ForgetAhead drops the listing of a directory ino and every listed name
// leading to ino, where the next lookups must reach the engine (the
// names next to a file just locked, the name of an inode found gone);
// a client that is also an OpenCacher forgets there what its opens read
// of ino.
type LookerAhead interface {
	LookupAhead(ctx context.Context, parent Ino, name []byte) (*Attr, time.Duration, error)
	ForgetAhead(ino Ino)
}

// OpenCacher is the optional capability of an Ops that may answer an open
// of a regular file or a directory from the attributes an earlier open
// read (*Client with Config.OpenCache), with no round trip. When
// OpenCached answers, it has counted a handle as Open does; false sends
// the caller to Open (OpenDir for OpenDirCached).
type OpenCacher interface {
	OpenCached(ctx context.Context, ino Ino, flags uint32) (*Attr, bool)
	OpenDirCached(ctx context.Context, ino Ino) (*Attr, bool)
}

var (
	_ Ops            = (*Client)(nil)
	_ TmpfileCreator = (*Client)(nil)
	_ CopyCommitter  = (*Client)(nil)
	_ LookerAhead    = (*Client)(nil)
	_ OpenCacher     = (*Client)(nil)
)
