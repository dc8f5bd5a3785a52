package vfs

import (
	"context"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
)

// Meta is the metadata service a VFS runs on: exactly the operations vfs
// and the access paths above it use. *meta.Client (one mount's view of a
// volume through a metadata engine) implements it; a client of the
// in-memory metadata server, which sends whole operations, is the other
// implementation it is kept small for.
//
// The contract is package meta's: every method takes the caller's
// credentials in ctx (meta.WithCred), checks POSIX permissions itself,
// and returns errors that wrap a syscall.Errno for POSIX failures
// (meta.ErrNoInode for an inode that no longer exists); anything else is
// an I/O failure. A cancelled ctx ends a blocking call (a lock wait) with
// EINTR.
type Meta interface {
	// Names and attributes.
	Lookup(ctx context.Context, parent meta.Ino, name []byte) (*meta.Attr, error)
	GetAttr(ctx context.Context, ino meta.Ino) (*meta.Attr, error)
	SetAttr(ctx context.Context, ino meta.Ino, mask uint32, in *meta.Attr) (*meta.Attr, error)
	// PreviewAttr tells what SetAttr would make of a file whose
	// attributes are a, when a alone decides it; the change may then be
	// held back and applied by WriteSliceAttr.
	PreviewAttr(ctx context.Context, a *meta.Attr, mask uint32, in *meta.Attr) (*meta.Attr, bool)
	ApplyAttrChanges(ctx context.Context, ino meta.Ino, changes []meta.AttrChange) (*meta.Attr, error)
	Access(ctx context.Context, ino meta.Ino, mask uint32) error
	// TouchAtime records a read of ino as the mount's atime mode says;
	// RecordsAtime tells whether the mode records any (not noatime).
	TouchAtime(ctx context.Context, ino meta.Ino, a *meta.Attr) error
	RecordsAtime() bool
	StatFS(ctx context.Context) (meta.StatFS, error)

	// Changes of the namespace.
	Mknod(ctx context.Context, parent meta.Ino, name []byte, nn meta.NewNode) (*meta.Attr, error)
	Link(ctx context.Context, ino, newParent meta.Ino, name []byte) (*meta.Attr, error)
	Unlink(ctx context.Context, parent meta.Ino, name []byte) error
	Rmdir(ctx context.Context, parent meta.Ino, name []byte) error
	Rename(ctx context.Context, srcParent meta.Ino, srcName []byte, dstParent meta.Ino, dstName []byte, flags uint32) error
	ReadLink(ctx context.Context, ino meta.Ino) ([]byte, error)

	// Open files and directories. Open and OpenDir check access for the
	// open flags; Release ends what Open began (an unlinked file's data
	// lives until its last release). Created tells the client that the
	// file it just made is open, as Open would have.
	Open(ctx context.Context, ino meta.Ino, flags uint32) (*meta.Attr, error)
	Created(ino meta.Ino)
	Release(ctx context.Context, ino meta.Ino) error
	OpenDir(ctx context.Context, ino meta.Ino) (*meta.Attr, error)
	// ReadDir returns up to limit entries of directory ino whose names
	// sort after after (nil: from the start), with attributes when plus.
	ReadDir(ctx context.Context, ino meta.Ino, after []byte, limit int, plus bool) ([]meta.Entry, error)

	// File data: slice lists of chunks.
	ReadChunk(ctx context.Context, ino meta.Ino, idx uint32) ([]meta.Slice, error)
	NewSliceID(ctx context.Context) (uint64, error)
	WriteSliceAttr(ctx context.Context, ino meta.Ino, idx uint32, s meta.Slice, changes []meta.AttrChange, unsynced bool) (meta.Version, *meta.Attr, error)
	Fallocate(ctx context.Context, ino meta.Ino, mode uint32, off, length uint64) error
	CopyFileRange(ctx context.Context, src meta.Ino, srcOff uint64, dst meta.Ino, dstOff uint64, length uint64) (uint64, *meta.Attr, error)

	// Locks, held by (mount, owner) pairs across mounts.
	Flock(ctx context.Context, ino meta.Ino, owner uint64, typ uint32, block bool) (*meta.Attr, error)
	GetLk(ctx context.Context, ino meta.Ino, owner uint64, lk meta.PosixLock) (meta.PosixLock, error)
	SetLk(ctx context.Context, ino meta.Ino, owner uint64, lk meta.PosixLock, block bool) (*meta.Attr, error)
	ReleaseLocks(ctx context.Context, ino meta.Ino, owner uint64) error

	// Extended attributes. XattrSupported tells, without the engine,
	// whether the volume keeps a name at all, and NoXattrs whether
	// attributes read from it say the node has none.
	XattrSupported(name string) bool
	NoXattrs(a *meta.Attr) bool
	GetXattr(ctx context.Context, ino meta.Ino, name string) ([]byte, error)
	ListXattr(ctx context.Context, ino meta.Ino) ([]string, error)
	SetXattr(ctx context.Context, ino meta.Ino, name string, value []byte, flags uint32) error
	RemoveXattr(ctx context.Context, ino meta.Ino, name string) error
}

var (
	_ Meta           = (*meta.Client)(nil)
	_ CopyCommitter  = (*meta.Client)(nil)
	_ TmpfileCreator = (*meta.Client)(nil)
)

// Creator is the optional capability of a Meta that makes a regular
// file and counts a handle of it open in one call, as Mknod then Created
// would (a client of the metadata server: one round trip, and no window
// in which the server knows the file but not the handle).
type Creator interface {
	Create(ctx context.Context, parent meta.Ino, name []byte, nn meta.NewNode) (*meta.Attr, error)
}

// TmpfileCreator is the optional capability of a Meta that makes an
// unnamed regular file in a directory (open(2) with O_TMPFILE) and counts
// a handle of it open, in one call: the file has no link, is deleted at
// its last Release unless Link gave it a name first, and is deleted too
// when the session ends without releasing it (meta.Client.Tmpfile).
// Without it O_TMPFILE fails with EOPNOTSUPP.
type TmpfileCreator interface {
	Tmpfile(ctx context.Context, parent meta.Ino, nn meta.NewNode) (*meta.Attr, error)
}

// CopyCommitter is the optional capability of a Meta that commits a
// copy_file_range held back on the file it copies into together with the
// attribute changes held after it, in one transaction
// (meta.Client.CommitCopy): it returns the file's version before and its
// attributes after. Without it a copy commits when asked.
type CopyCommitter interface {
	CommitCopy(ctx context.Context, cp meta.HeldCopy, held []meta.AttrChange) (meta.Version, *meta.Attr, error)
}

// LookerAhead is the optional capability of a Meta that may answer the
// kernel's lookups from a listing of the directory read a moment ago
// (*meta.Client with Config.Statahead). LookupAhead returns how old its
// answer is, which the mount takes off the kernel's cache times.
// ForgetAhead drops the listing of a directory ino and every listed name
// leading to ino, where the next lookups must reach the engine (the
// names next to a file just locked, the name of an inode found gone);
// a client that is also an OpenCacher forgets there what its opens read
// of ino.
type LookerAhead interface {
	LookupAhead(ctx context.Context, parent meta.Ino, name []byte) (*meta.Attr, time.Duration, error)
	ForgetAhead(ino meta.Ino)
}

// OpenCacher is the optional capability of a Meta that may answer an open
// of a regular file or a directory from the attributes an earlier open
// read (*meta.Client with Config.OpenCache), with no round trip. When
// OpenCached answers, it has counted a handle as Open does; false sends
// the caller to Open (OpenDir for OpenDirCached).
type OpenCacher interface {
	OpenCached(ctx context.Context, ino meta.Ino, flags uint32) (*meta.Attr, bool)
	OpenDirCached(ctx context.Context, ino meta.Ino) (*meta.Attr, bool)
}
