package wire

import (
	"context"

	"github.com/sluicefs/sluice/internal/meta"
)

// The operation table: every operation of meta.Ops (and of its
// capabilities) that a mount sends to the metadata server, in one entry
// each. A number, once given, keeps its meaning: a new operation takes
// the next one. TestTable fails when an operation of meta.Ops has
// neither an entry here nor a place in Local.
//
// Adding an operation to the protocol: an entry here (number, name,
// class, codecs, Serve, and Dirs or Applied where they apply), a stub in
// internal/meta/remote that calls it, and a case in the round-trip test.

// Local lists the operations of meta.Ops the mount's own session answers
// without the server: they need no engine (PreviewAttr, RecordsAtime,
// XattrSupported, NoXattrs), or hand out ids from batches the session
// reserved (NewSliceID).
var Local = []string{"PreviewAttr", "RecordsAtime", "XattrSupported", "NoXattrs", "NewSliceID"}

// Names and attributes.
var (
	Lookup = &Op[T2[meta.Ino, []byte], *meta.Attr]{Method: 1, Name: "lookup", Class: ClassRead, AnyMember: true,
		Args: tuple2(ino, byteStr), Result: attr,
		Serve: func(ctx context.Context, t Target, a T2[meta.Ino, []byte]) (*meta.Attr, error) {
			return t.Lookup(ctx, a.A, a.B)
		}}
	GetAttr = &Op[meta.Ino, *meta.Attr]{Method: 2, Name: "getattr", Class: ClassRead, AnyMember: true,
		Args: ino, Result: attr,
		Serve: func(ctx context.Context, t Target, i meta.Ino) (*meta.Attr, error) { return t.GetAttr(ctx, i) }}
	SetAttr = &Op[T3[meta.Ino, uint32, *meta.Attr], *meta.Attr]{Method: 3, Name: "setattr", Class: ClassWrite,
		Args: tuple3(ino, u32, attrValue), Result: attr,
		Serve: func(ctx context.Context, t Target, a T3[meta.Ino, uint32, *meta.Attr]) (*meta.Attr, error) {
			return t.SetAttr(ctx, a.A, a.B, a.C)
		}}
	ApplyAttrChanges = &Op[T2[meta.Ino, []meta.AttrChange], *meta.Attr]{Method: 4, Name: "apply_attr_changes", Class: ClassWrite,
		Args: tuple2(ino, changes), Result: attr,
		Serve: func(ctx context.Context, t Target, a T2[meta.Ino, []meta.AttrChange]) (*meta.Attr, error) {
			return t.ApplyAttrChanges(ctx, a.A, a.B)
		}}
	Access = &Op[T2[meta.Ino, uint32], None]{Method: 5, Name: "access", Class: ClassRead, AnyMember: true,
		Args: tuple2(ino, u32), Result: none,
		Serve: func(ctx context.Context, t Target, a T2[meta.Ino, uint32]) (None, error) {
			return None{}, t.Access(ctx, a.A, a.B)
		}}
	TouchAtime = &Op[T2[meta.Ino, *meta.Attr], None]{Method: 6, Name: "touch_atime", Class: ClassWrite,
		Args: tuple2(ino, attr), Result: none,
		Serve: func(ctx context.Context, t Target, a T2[meta.Ino, *meta.Attr]) (None, error) {
			return None{}, t.TouchAtime(ctx, a.A, a.B)
		}}
	StatFS = &Op[None, meta.StatFS]{Method: 7, Name: "statfs", Class: ClassRead,
		Args: none, Result: statFS,
		Serve: func(ctx context.Context, t Target, _ None) (meta.StatFS, error) { return t.StatFS(ctx) }}
)

// Changes of the namespace. Those that make or remove a name carry the
// attributes of the directories they changed back (Dirs) and are
// answered from the records when sent again after a restart (Applied).
var (
	Mknod = &Op[T3[meta.Ino, []byte, meta.NewNode], *meta.Attr]{Method: 8, Name: "mknod", Class: ClassRecorded,
		Args: tuple3(ino, byteStr, newNode), Result: attr,
		Serve: func(ctx context.Context, t Target, a T3[meta.Ino, []byte, meta.NewNode]) (*meta.Attr, error) {
			return t.Mknod(ctx, a.A, a.B, a.C)
		},
		Dirs: func(a T3[meta.Ino, []byte, meta.NewNode]) []meta.Ino { return []meta.Ino{a.A} },
		Applied: func(ctx context.Context, t Target, a T3[meta.Ino, []byte, meta.NewNode]) (*meta.Attr, error) {
			return t.Lookup(ctx, a.A, a.B)
		}}
	Link = &Op[T3[meta.Ino, meta.Ino, []byte], *meta.Attr]{Method: 9, Name: "link", Class: ClassRecorded,
		Args: tuple3(ino, ino, byteStr), Result: attr,
		Serve: func(ctx context.Context, t Target, a T3[meta.Ino, meta.Ino, []byte]) (*meta.Attr, error) {
			return t.Link(ctx, a.A, a.B, a.C)
		},
		Dirs: func(a T3[meta.Ino, meta.Ino, []byte]) []meta.Ino { return []meta.Ino{a.B} },
		Applied: func(ctx context.Context, t Target, a T3[meta.Ino, meta.Ino, []byte]) (*meta.Attr, error) {
			return t.Lookup(ctx, a.B, a.C)
		}}
	Unlink = &Op[T2[meta.Ino, []byte], None]{Method: 10, Name: "unlink", Class: ClassRecorded,
		Args: tuple2(ino, byteStr), Result: none,
		Serve: func(ctx context.Context, t Target, a T2[meta.Ino, []byte]) (None, error) {
			return None{}, t.Unlink(ctx, a.A, a.B)
		},
		Dirs:    func(a T2[meta.Ino, []byte]) []meta.Ino { return []meta.Ino{a.A} },
		Applied: answerNone[T2[meta.Ino, []byte]]}
	Rmdir = &Op[T2[meta.Ino, []byte], None]{Method: 11, Name: "rmdir", Class: ClassRecorded,
		Args: tuple2(ino, byteStr), Result: none,
		Serve: func(ctx context.Context, t Target, a T2[meta.Ino, []byte]) (None, error) {
			return None{}, t.Rmdir(ctx, a.A, a.B)
		},
		Dirs:    func(a T2[meta.Ino, []byte]) []meta.Ino { return []meta.Ino{a.A} },
		Applied: answerNone[T2[meta.Ino, []byte]]}
	Rename = &Op[T5[meta.Ino, []byte, meta.Ino, []byte, uint32], None]{Method: 12, Name: "rename", Class: ClassRecorded,
		Args: tuple5(ino, byteStr, ino, byteStr, u32), Result: none,
		Serve: func(ctx context.Context, t Target, a T5[meta.Ino, []byte, meta.Ino, []byte, uint32]) (None, error) {
			return None{}, t.Rename(ctx, a.A, a.B, a.C, a.D, a.E)
		},
		Dirs:    func(a T5[meta.Ino, []byte, meta.Ino, []byte, uint32]) []meta.Ino { return []meta.Ino{a.A, a.C} },
		Applied: answerNone[T5[meta.Ino, []byte, meta.Ino, []byte, uint32]]}
	ReadLink = &Op[meta.Ino, []byte]{Method: 13, Name: "readlink", Class: ClassRead, AnyMember: true,
		Args: ino, Result: byteStr,
		Serve: func(ctx context.Context, t Target, i meta.Ino) ([]byte, error) { return t.ReadLink(ctx, i) }}
)

// Open files and directories. The server counts the session's open
// handles (meta.Attach), which keep an unlinked file's data.
var (
	Open = &Op[T2[meta.Ino, uint32], *meta.Attr]{Method: 14, Name: "open", Class: ClassHandles,
		Args: tuple2(ino, u32), Result: attr,
		Serve: func(ctx context.Context, t Target, a T2[meta.Ino, uint32]) (*meta.Attr, error) {
			return t.Open(ctx, a.A, a.B)
		}}
	Release = &Op[meta.Ino, None]{Method: 15, Name: "release", Class: ClassWrite,
		Args: ino, Result: none,
		Serve: func(ctx context.Context, t Target, i meta.Ino) (None, error) { return None{}, t.Release(ctx, i) }}
	OpenDir = &Op[meta.Ino, *meta.Attr]{Method: 16, Name: "opendir", Class: ClassRead, AnyMember: true,
		Args: ino, Result: attr,
		Serve: func(ctx context.Context, t Target, i meta.Ino) (*meta.Attr, error) { return t.OpenDir(ctx, i) }}
	ReadDir = &Op[T4[meta.Ino, []byte, int, bool], []meta.Entry]{Method: 17, Name: "readdir", Class: ClassRead, AnyMember: true,
		Args: tuple4(ino, optBytes, integer, boolean), Result: entries,
		Serve: func(ctx context.Context, t Target, a T4[meta.Ino, []byte, int, bool]) ([]meta.Entry, error) {
			return t.ReadDir(ctx, a.A, a.B, a.C, a.D)
		}}
	// Create is Mknod of a regular file and Created of it in one call.
	Create = &Op[T3[meta.Ino, []byte, meta.NewNode], *meta.Attr]{Method: 30, Name: "create", Class: ClassRecorded,
		Args: tuple3(ino, byteStr, newNode), Result: attr,
		Serve: func(ctx context.Context, t Target, a T3[meta.Ino, []byte, meta.NewNode]) (*meta.Attr, error) {
			at, err := t.Mknod(ctx, a.A, a.B, a.C)
			if err == nil {
				t.Created(at.Ino)
			}
			return at, err
		},
		Dirs: func(a T3[meta.Ino, []byte, meta.NewNode]) []meta.Ino { return []meta.Ino{a.A} },
		// The file is counted open again, as the first run counted it.
		Applied: func(ctx context.Context, t Target, a T3[meta.Ino, []byte, meta.NewNode]) (*meta.Attr, error) {
			at, err := t.Lookup(ctx, a.A, a.B)
			if err == nil {
				t.Created(at.Ino)
			}
			return at, err
		}}
	Created = &Op[meta.Ino, None]{Method: 31, Name: "created", Class: ClassHandles,
		Args: ino, Result: none,
		Serve: func(ctx context.Context, t Target, i meta.Ino) (None, error) { t.Created(i); return None{}, nil }}
	// Tmpfile sent again after a restart that lost its reply runs again
	// and makes another file; the first, held by no handle, goes when
	// the session ends.
	Tmpfile = &Op[T2[meta.Ino, meta.NewNode], *meta.Attr]{Method: 32, Name: "tmpfile", Class: ClassWrite,
		Args: tuple2(ino, newNode), Result: attr,
		Serve: func(ctx context.Context, t Target, a T2[meta.Ino, meta.NewNode]) (*meta.Attr, error) {
			return t.Tmpfile(ctx, a.A, a.B)
		}}
)

// File data.
var (
	ReadChunk = &Op[T2[meta.Ino, uint32], []meta.Slice]{Method: 18, Name: "read_chunk", Class: ClassRead, AnyMember: true,
		Args: tuple2(ino, u32), Result: sliceList,
		Serve: func(ctx context.Context, t Target, a T2[meta.Ino, uint32]) ([]meta.Slice, error) {
			return t.ReadChunk(ctx, a.A, a.B)
		}}
	WriteSliceAttr = &Op[T5[meta.Ino, uint32, meta.Slice, []meta.AttrChange, bool], T2[meta.Version, *meta.Attr]]{
		Method: 19, Name: "write_slice", Class: ClassRecorded,
		Args: tuple5(ino, u32, slice, changes, boolean), Result: tuple2(version, attr),
		Serve: func(ctx context.Context, t Target, a T5[meta.Ino, uint32, meta.Slice, []meta.AttrChange, bool]) (T2[meta.Version, *meta.Attr], error) {
			v, at, err := t.WriteSliceAttr(ctx, a.A, a.B, a.C, a.D, a.E)
			return T2[meta.Version, *meta.Attr]{v, at}, err
		},
		// The version before the write is gone: the zero version differs
		// from what the mount saw, so the mount drops what it cached of
		// the file, as after another mount's change.
		Applied: func(ctx context.Context, t Target, a T5[meta.Ino, uint32, meta.Slice, []meta.AttrChange, bool]) (T2[meta.Version, *meta.Attr], error) {
			at, err := t.GetAttr(ctx, a.A)
			return T2[meta.Version, *meta.Attr]{meta.Version{}, at}, err
		}}
	Fallocate = &Op[T4[meta.Ino, uint32, uint64, uint64], None]{Method: 20, Name: "fallocate", Class: ClassWrite,
		Args: tuple4(ino, u32, u64, u64), Result: none,
		Serve: func(ctx context.Context, t Target, a T4[meta.Ino, uint32, uint64, uint64]) (None, error) {
			return None{}, t.Fallocate(ctx, a.A, a.B, a.C, a.D)
		}}
	CopyFileRange = &Op[T5[meta.Ino, uint64, meta.Ino, uint64, uint64], T2[uint64, *meta.Attr]]{Method: 21, Name: "copy_file_range", Class: ClassWrite,
		Args: tuple5(ino, u64, ino, u64, u64), Result: tuple2(u64, attr),
		Serve: func(ctx context.Context, t Target, a T5[meta.Ino, uint64, meta.Ino, uint64, uint64]) (T2[uint64, *meta.Attr], error) {
			n, at, err := t.CopyFileRange(ctx, a.A, a.B, a.C, a.D, a.E)
			return T2[uint64, *meta.Attr]{n, at}, err
		}}
)

// Locks.
var (
	Flock = &Op[T4[meta.Ino, uint64, uint32, bool], *meta.Attr]{Method: 22, Name: "flock", Class: ClassWrite,
		Args: tuple4(ino, u64, u32, boolean), Result: attr,
		Serve: func(ctx context.Context, t Target, a T4[meta.Ino, uint64, uint32, bool]) (*meta.Attr, error) {
			return t.Flock(ctx, a.A, a.B, a.C, a.D)
		}}
	GetLk = &Op[T3[meta.Ino, uint64, meta.PosixLock], meta.PosixLock]{Method: 23, Name: "getlk", Class: ClassRead,
		Args: tuple3(ino, u64, lock), Result: lock,
		Serve: func(ctx context.Context, t Target, a T3[meta.Ino, uint64, meta.PosixLock]) (meta.PosixLock, error) {
			return t.GetLk(ctx, a.A, a.B, a.C)
		}}
	SetLk = &Op[T4[meta.Ino, uint64, meta.PosixLock, bool], *meta.Attr]{Method: 24, Name: "setlk", Class: ClassWrite,
		Args: tuple4(ino, u64, lock, boolean), Result: attr,
		Serve: func(ctx context.Context, t Target, a T4[meta.Ino, uint64, meta.PosixLock, bool]) (*meta.Attr, error) {
			return t.SetLk(ctx, a.A, a.B, a.C, a.D)
		}}
	ReleaseLocks = &Op[T2[meta.Ino, uint64], None]{Method: 25, Name: "release_locks", Class: ClassWrite,
		Args: tuple2(ino, u64), Result: none,
		Serve: func(ctx context.Context, t Target, a T2[meta.Ino, uint64]) (None, error) {
			return None{}, t.ReleaseLocks(ctx, a.A, a.B)
		}}
)

// Extended attributes.
var (
	GetXattr = &Op[T2[meta.Ino, string], []byte]{Method: 26, Name: "getxattr", Class: ClassRead, AnyMember: true,
		Args: tuple2(ino, str), Result: byteStr,
		Serve: func(ctx context.Context, t Target, a T2[meta.Ino, string]) ([]byte, error) {
			return t.GetXattr(ctx, a.A, a.B)
		}}
	ListXattr = &Op[meta.Ino, []string]{Method: 27, Name: "listxattr", Class: ClassRead, AnyMember: true,
		Args: ino, Result: strs,
		Serve: func(ctx context.Context, t Target, i meta.Ino) ([]string, error) { return t.ListXattr(ctx, i) }}
	SetXattr = &Op[T4[meta.Ino, string, []byte, uint32], None]{Method: 28, Name: "setxattr", Class: ClassRecorded,
		Args: tuple4(ino, str, byteStr, u32), Result: none,
		Serve: func(ctx context.Context, t Target, a T4[meta.Ino, string, []byte, uint32]) (None, error) {
			return None{}, t.SetXattr(ctx, a.A, a.B, a.C, a.D)
		},
		Applied: answerNone[T4[meta.Ino, string, []byte, uint32]]}
	RemoveXattr = &Op[T2[meta.Ino, string], None]{Method: 29, Name: "removexattr", Class: ClassRecorded,
		Args: tuple2(ino, str), Result: none,
		Serve: func(ctx context.Context, t Target, a T2[meta.Ino, string]) (None, error) {
			return None{}, t.RemoveXattr(ctx, a.A, a.B)
		},
		Applied: answerNone[T2[meta.Ino, string]]}
)

// answerNone is the Applied of an operation whose reply is empty: its
// effect is in the records, and there is nothing to tell.
func answerNone[A any](context.Context, Target, A) (None, error) { return None{}, nil }

// table lists every operation by the name of the meta.Ops method it
// carries, for Decode and the tests.
var table = map[string]entry{
	"Lookup":           Lookup,
	"GetAttr":          GetAttr,
	"SetAttr":          SetAttr,
	"ApplyAttrChanges": ApplyAttrChanges,
	"Access":           Access,
	"TouchAtime":       TouchAtime,
	"StatFS":           StatFS,
	"Mknod":            Mknod,
	"Link":             Link,
	"Unlink":           Unlink,
	"Rmdir":            Rmdir,
	"Rename":           Rename,
	"ReadLink":         ReadLink,
	"Open":             Open,
	"Release":          Release,
	"OpenDir":          OpenDir,
	"ReadDir":          ReadDir,
	"Create":           Create,
	"Created":          Created,
	"Tmpfile":          Tmpfile,
	"ReadChunk":        ReadChunk,
	"WriteSliceAttr":   WriteSliceAttr,
	"Fallocate":        Fallocate,
	"CopyFileRange":    CopyFileRange,
	"Flock":            Flock,
	"GetLk":            GetLk,
	"SetLk":            SetLk,
	"ReleaseLocks":     ReleaseLocks,
	"GetXattr":         GetXattr,
	"ListXattr":        ListXattr,
	"SetXattr":         SetXattr,
	"RemoveXattr":      RemoveXattr,
}
