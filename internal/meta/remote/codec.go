package remote

import (
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/metaserver/wire"
)

// Methods of OpCall, in the order of vfs.Meta. A number, once given,
// keeps its meaning: a new method gets a new number.
const (
	mLookup = iota + 1
	mGetAttr
	mSetAttr
	mApplyAttrChanges
	mAccess
	mTouchAtime
	mStatFS
	mMknod
	mLink
	mUnlink
	mRmdir
	mRename
	mReadLink
	mOpen
	mRelease
	mOpenDir
	mReadDir
	mReadChunk
	mWriteSliceAttr
	mFallocate
	mCopyFileRange
	mFlock
	mGetLk
	mSetLk
	mReleaseLocks
	mGetXattr
	mListXattr
	mSetXattr
	mRemoveXattr
	mCreate
	mCreated
	mTmpfile
	methods // one past the last
)

var methodNames = [methods]string{
	mLookup: "lookup", mGetAttr: "getattr", mSetAttr: "setattr", mApplyAttrChanges: "apply_attr_changes",
	mAccess: "access", mTouchAtime: "touch_atime", mStatFS: "statfs", mMknod: "mknod", mLink: "link",
	mUnlink: "unlink", mRmdir: "rmdir", mRename: "rename", mReadLink: "readlink", mOpen: "open",
	mRelease: "release", mOpenDir: "opendir", mReadDir: "readdir", mReadChunk: "read_chunk",
	mWriteSliceAttr: "write_slice", mFallocate: "fallocate", mCopyFileRange: "copy_file_range",
	mFlock: "flock", mGetLk: "getlk", mSetLk: "setlk", mReleaseLocks: "release_locks",
	mGetXattr: "getxattr", mListXattr: "listxattr", mSetXattr: "setxattr", mRemoveXattr: "removexattr",
	mCreate: "create", mCreated: "created", mTmpfile: "tmpfile",
}

// Idempotent reports whether method m only reads, so that running it
// again is harmless: the server need not remember its reply.
func Idempotent(m uint64) bool {
	switch m {
	case mLookup, mGetAttr, mAccess, mStatFS, mReadLink, mOpenDir, mReadDir, mReadChunk,
		mGetLk, mGetXattr, mListXattr:
		return true
	}
	return false
}

// Commits reports whether method m may commit a transaction (and so wait
// for the log's sync) or wait for a lock: the server runs such a call on
// a goroutine of its own, and the others where it reads the request.
func Commits(m uint64) bool {
	return !Idempotent(m) && m != mOpen && m != mCreated
}

// MethodName names method m of an OpCall for metrics, "unknown" when
// there is none.
func MethodName(m uint64) string {
	if m == 0 || m >= methods {
		return "unknown"
	}
	return methodNames[m]
}

func putAttr(b *wire.Buf, a *meta.Attr) {
	if a == nil {
		b.Byte(0)
		return
	}
	b.Byte(1)
	b.Uvarint(uint64(a.Ino))
	b.Byte(a.Type)
	b.Byte(a.Flags)
	b.Uvarint(uint64(a.Mode))
	b.Uvarint(uint64(a.Uid))
	b.Uvarint(uint64(a.Gid))
	b.Varint(a.Atime)
	b.Varint(a.Mtime)
	b.Varint(a.Ctime)
	b.Uvarint(uint64(a.Atimensec))
	b.Uvarint(uint64(a.Mtimensec))
	b.Uvarint(uint64(a.Ctimensec))
	b.Uvarint(uint64(a.Nlink))
	b.Uvarint(a.Length)
	b.Uvarint(uint64(a.Rdev))
	b.Uvarint(uint64(a.Parent))
}

func getAttr(r *wire.Reader) *meta.Attr {
	if r.Byte() != 1 {
		return nil
	}
	a := &meta.Attr{Ino: meta.Ino(r.Uvarint()), Type: r.Byte(), Flags: r.Byte()}
	a.Mode = uint16(r.Uvarint())
	a.Uid = uint32(r.Uvarint())
	a.Gid = uint32(r.Uvarint())
	a.Atime, a.Mtime, a.Ctime = r.Varint(), r.Varint(), r.Varint()
	a.Atimensec = uint32(r.Uvarint())
	a.Mtimensec = uint32(r.Uvarint())
	a.Ctimensec = uint32(r.Uvarint())
	a.Nlink = uint32(r.Uvarint())
	a.Length = r.Uvarint()
	a.Rdev = uint32(r.Uvarint())
	a.Parent = meta.Ino(r.Uvarint())
	return a
}

// getAttrValue reads an attribute block that must be present.
func getAttrValue(r *wire.Reader) *meta.Attr {
	if a := getAttr(r); a != nil {
		return a
	}
	return &meta.Attr{}
}

func putCred(b *wire.Buf, c meta.Cred) {
	b.Uvarint(uint64(c.Uid))
	b.Uvarint(uint64(c.Gid))
	b.Uvarint(uint64(c.Pid))
	b.Uvarint(uint64(len(c.Gids)))
	for _, g := range c.Gids {
		b.Uvarint(uint64(g))
	}
}

func getCred(r *wire.Reader) meta.Cred {
	c := meta.Cred{Uid: uint32(r.Uvarint()), Gid: uint32(r.Uvarint()), Pid: uint32(r.Uvarint())}
	if n := r.Count(1); n > 0 {
		c.Gids = make([]uint32, n)
		for i := range c.Gids {
			c.Gids[i] = uint32(r.Uvarint())
		}
	}
	return c
}

func putChanges(b *wire.Buf, cs []meta.AttrChange) {
	b.Uvarint(uint64(len(cs)))
	for i := range cs {
		putCred(b, cs[i].Cred)
		b.Uvarint(uint64(cs[i].Mask))
		putAttr(b, &cs[i].In)
	}
}

func getChanges(r *wire.Reader) []meta.AttrChange {
	n := r.Count(4)
	if n == 0 {
		return nil
	}
	cs := make([]meta.AttrChange, n)
	for i := range cs {
		cs[i].Cred = getCred(r)
		cs[i].Mask = uint32(r.Uvarint())
		cs[i].In = *getAttrValue(r)
	}
	return cs
}

func putSlice(b *wire.Buf, s meta.Slice) {
	b.Uvarint(uint64(s.Pos))
	b.Uvarint(s.Id)
	b.Uvarint(uint64(s.Size))
	b.Uvarint(uint64(s.Off))
	b.Uvarint(uint64(s.Len))
}

func getSlice(r *wire.Reader) meta.Slice {
	return meta.Slice{Pos: uint32(r.Uvarint()), Id: r.Uvarint(), Size: uint32(r.Uvarint()),
		Off: uint32(r.Uvarint()), Len: uint32(r.Uvarint())}
}

func putLock(b *wire.Buf, l meta.PosixLock) {
	b.Uvarint(l.Start)
	b.Uvarint(l.End)
	b.Uvarint(uint64(l.Type))
	b.Uvarint(uint64(l.Pid))
}

func getLock(r *wire.Reader) meta.PosixLock {
	return meta.PosixLock{Start: r.Uvarint(), End: r.Uvarint(), Type: uint32(r.Uvarint()), Pid: uint32(r.Uvarint())}
}

func putNewNode(b *wire.Buf, nn meta.NewNode) {
	b.Byte(nn.Type)
	b.Uvarint(uint64(nn.Mode))
	b.Uvarint(uint64(nn.Umask))
	b.Uvarint(uint64(nn.Rdev))
	b.Bytes(nn.Target)
}

func getNewNode(r *wire.Reader) meta.NewNode {
	return meta.NewNode{Type: r.Byte(), Mode: uint16(r.Uvarint()), Umask: uint16(r.Uvarint()),
		Rdev: uint32(r.Uvarint()), Target: r.Bytes()}
}

func putBool(b *wire.Buf, v bool) {
	if v {
		b.Byte(1)
		return
	}
	b.Byte(0)
}

func getBool(r *wire.Reader) bool { return r.Byte() == 1 }
