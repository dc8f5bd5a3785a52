// Package fuse binds the kernel's FUSE protocol to package vfs through
// go-fuse's raw API: each request becomes one vfs call with the caller's
// credentials, node ids are Sluice inode numbers, and errors map to errno
// in one place (status). Nothing here knows about metadata engines or
// object storage.
package fuse

import (
	"log/slog"
	"syscall"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/vfs"
)

// fileSystem implements gofuse.RawFileSystem over a VFS.
type fileSystem struct {
	gofuse.RawFileSystem // ENOSYS for what is not implemented
	v                    *vfs.VFS
	conf                 vfs.Config // v's, which never changes
	log                  *slog.Logger
	groups               *groupCache
}

var _ gofuse.RawFileSystem = (*fileSystem)(nil)

func newFileSystem(v *vfs.VFS, log *slog.Logger) *fileSystem {
	return &fileSystem{RawFileSystem: gofuse.NewDefaultRawFileSystem(), v: v, conf: v.Config(), log: log, groups: newGroupCache()}
}

func (fs *fileSystem) String() string { return "sluice" }

// status maps an error to a FUSE status, logging unexpected failures.
func (fs *fileSystem) status(op string, err error) gofuse.Status {
	if err == nil {
		return gofuse.OK
	}
	e := meta.Errno(err)
	if e == syscall.EIO {
		fs.log.Error("operation failed", "op", op, "err", err)
	}
	return gofuse.Status(e)
}

var typeBits = map[uint8]uint32{
	store.TypeFile:     syscall.S_IFREG,
	store.TypeDir:      syscall.S_IFDIR,
	store.TypeSymlink:  syscall.S_IFLNK,
	store.TypeFIFO:     syscall.S_IFIFO,
	store.TypeBlockDev: syscall.S_IFBLK,
	store.TypeCharDev:  syscall.S_IFCHR,
	store.TypeSocket:   syscall.S_IFSOCK,
}

func typeOfMode(mode uint32) uint8 {
	for t, bits := range typeBits {
		if mode&syscall.S_IFMT == bits {
			return t
		}
	}
	return 0
}

func fillAttr(a *meta.Attr, out *gofuse.Attr) {
	out.Ino = uint64(a.Ino)
	out.Size = a.Length
	out.Blocks = (a.Length + 511) / 512
	out.Atime, out.Atimensec = uint64(a.Atime), a.Atimensec
	out.Mtime, out.Mtimensec = uint64(a.Mtime), a.Mtimensec
	out.Ctime, out.Ctimensec = uint64(a.Ctime), a.Ctimensec
	out.Mode = typeBits[a.Type] | uint32(a.Mode)
	out.Nlink = a.Nlink
	out.Uid, out.Gid = a.Uid, a.Gid
	out.Rdev = a.Rdev
	out.Blksize = 1 << 20
}

func (fs *fileSystem) fillEntry(a *meta.Attr, out *gofuse.EntryOut) {
	fs.fillAgedEntry(a, 0, out)
}

// fillAgedEntry fills an entry read age ago: the kernel may cache it for
// what is left of its cache times, so that nothing it holds is older than
// they allow.
func (fs *fileSystem) fillAgedEntry(a *meta.Attr, age time.Duration, out *gofuse.EntryOut) {
	out.NodeId = uint64(a.Ino)
	// Generation 0 for every inode: Sluice never gives an inode number
	// twice (meta.Client.newIno), so a number with the generation the
	// kernel puts in file handles names one file.
	out.Generation = 0
	fillAttr(a, &out.Attr)
	entry := fs.conf.EntryTimeout
	if a.Type == store.TypeDir {
		entry = fs.conf.DirEntryTimeout
	}
	out.SetEntryTimeout(max(entry-age, 0))
	out.SetAttrTimeout(max(fs.conf.AttrTimeout-age, 0))
}

func (fs *fileSystem) attrOut(a *meta.Attr, out *gofuse.AttrOut) {
	fillAttr(a, &out.Attr)
	out.SetTimeout(fs.conf.AttrTimeout)
}

// Lookup finds name in directory h.NodeId.
//
// The kernel resolves "." and ".." of a path itself and sends them only
// to decode a file handle whose inode it no longer caches (the mount has
// FUSE_EXPORT_SUPPORT; Linux's fuse_get_dentry and fuse_get_parent): "."
// on the handle's node id, of any file type, whose reply must carry that
// node id and the handle's generation (always 0, see vfs.ByHandle), and
// ".." on a directory to connect it to the tree. Both count one kernel
// reference, as any lookup does, which needs no bookkeeping here: node
// ids are inode numbers (see Forget). A deleted file's handle is ESTALE.
func (fs *fileSystem) Lookup(cancel <-chan struct{}, h *gofuse.InHeader, name string, out *gofuse.EntryOut) gofuse.Status {
	ctx := fs.ctx(cancel, h)
	defer ctx.end()
	if name == "." || name == ".." {
		return fs.lookupHandle(ctx, meta.Ino(h.NodeId), name, out)
	}
	a, age, err := fs.v.LookupAged(ctx, meta.Ino(h.NodeId), []byte(name))
	if meta.Errno(err) == syscall.ENOENT && fs.conf.NegEntryTimeout > 0 {
		// A reply without a node caches the name's absence, so repeated
		// misses (PATH and include searches) stay in the kernel; a name
		// another mount creates stays hidden that long.
		out.NodeId = 0
		out.SetEntryTimeout(fs.conf.NegEntryTimeout)
		return gofuse.OK
	}
	if err != nil {
		return fs.status("lookup", err)
	}
	fs.fillAgedEntry(a, age, out)
	return gofuse.OK
}

// lookupHandle answers the kernel's LOOKUP of "." (ino itself) or ".."
// (its parent) while it decodes a file handle (see Lookup).
func (fs *fileSystem) lookupHandle(ctx *request, ino meta.Ino, name string, out *gofuse.EntryOut) gofuse.Status {
	var a *meta.Attr
	var err error
	if name == "." {
		a, err = fs.v.ByHandle(ctx, ino)
	} else {
		a, err = fs.v.ParentOf(ctx, ino)
	}
	if err != nil {
		return fs.status("lookup", err)
	}
	fs.fillEntry(a, out)
	return gofuse.OK
}

// Forget does nothing: node ids are inode numbers and need no table.
func (fs *fileSystem) Forget(nodeid, nlookup uint64) {}

func (fs *fileSystem) GetAttr(cancel <-chan struct{}, in *gofuse.GetAttrIn, out *gofuse.AttrOut) gofuse.Status {
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	a, err := fs.v.GetAttr(ctx, meta.Ino(in.NodeId))
	if err != nil {
		return fs.status("getattr", err)
	}
	fs.attrOut(a, out)
	return gofuse.OK
}

func (fs *fileSystem) SetAttr(cancel <-chan struct{}, in *gofuse.SetAttrIn, out *gofuse.AttrOut) gofuse.Status {
	var mask uint32
	var a meta.Attr
	if in.Valid&gofuse.FATTR_MODE != 0 {
		mask |= meta.SetMode
		a.Mode = uint16(in.Mode & 0o7777)
	}
	if in.Valid&gofuse.FATTR_UID != 0 {
		mask |= meta.SetUid
		a.Uid = in.Uid
	}
	if in.Valid&gofuse.FATTR_GID != 0 {
		mask |= meta.SetGid
		a.Gid = in.Gid
	}
	if in.Valid&gofuse.FATTR_SIZE != 0 {
		mask |= meta.SetSize
		a.Length = in.Size
		if in.Valid&gofuse.FATTR_FH != 0 {
			mask |= meta.SetViaHandle
		}
		if in.Valid&gofuse.FATTR_KILL_SUIDGID != 0 {
			mask |= meta.SetKillSetID // a truncation (killpriv, see Write)
		}
	}
	switch {
	case in.Valid&gofuse.FATTR_ATIME_NOW != 0:
		mask |= meta.SetAtimeNow
	case in.Valid&gofuse.FATTR_ATIME != 0:
		mask |= meta.SetAtime
		a.Atime, a.Atimensec = int64(in.Atime), in.Atimensec
	}
	switch {
	case in.Valid&gofuse.FATTR_MTIME_NOW != 0:
		mask |= meta.SetMtimeNow
	case in.Valid&gofuse.FATTR_MTIME != 0:
		mask |= meta.SetMtime
		a.Mtime, a.Mtimensec = int64(in.Mtime), in.Mtimensec
	}
	if in.Valid&gofuse.FATTR_CTIME != 0 {
		mask |= meta.SetCtime
		a.Ctime, a.Ctimensec = int64(in.Ctime), in.Ctimensec
	}
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	res, err := fs.v.SetAttr(ctx, meta.Ino(in.NodeId), mask, &a)
	if err != nil {
		return fs.status("setattr", err)
	}
	fs.attrOut(res, out)
	return gofuse.OK
}

func (fs *fileSystem) Mknod(cancel <-chan struct{}, in *gofuse.MknodIn, name string, out *gofuse.EntryOut) gofuse.Status {
	t := typeOfMode(in.Mode)
	if t == 0 || t == store.TypeDir || t == store.TypeSymlink {
		return gofuse.EINVAL
	}
	nn := meta.NewNode{Type: t, Mode: uint16(in.Mode & 0o7777), Umask: uint16(in.Umask), Rdev: in.Rdev}
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	a, err := fs.v.Mknod(ctx, meta.Ino(in.NodeId), []byte(name), nn)
	if err != nil {
		return fs.status("mknod", err)
	}
	fs.fillEntry(a, out)
	return gofuse.OK
}

func (fs *fileSystem) Mkdir(cancel <-chan struct{}, in *gofuse.MkdirIn, name string, out *gofuse.EntryOut) gofuse.Status {
	nn := meta.NewNode{Type: store.TypeDir, Mode: uint16(in.Mode & 0o7777), Umask: uint16(in.Umask)}
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	a, err := fs.v.Mknod(ctx, meta.Ino(in.NodeId), []byte(name), nn)
	if err != nil {
		return fs.status("mkdir", err)
	}
	fs.fillEntry(a, out)
	return gofuse.OK
}

func (fs *fileSystem) Unlink(cancel <-chan struct{}, h *gofuse.InHeader, name string) gofuse.Status {
	ctx := fs.ctx(cancel, h)
	defer ctx.end()
	return fs.status("unlink", fs.v.Unlink(ctx, meta.Ino(h.NodeId), []byte(name)))
}

func (fs *fileSystem) Rmdir(cancel <-chan struct{}, h *gofuse.InHeader, name string) gofuse.Status {
	ctx := fs.ctx(cancel, h)
	defer ctx.end()
	return fs.status("rmdir", fs.v.Rmdir(ctx, meta.Ino(h.NodeId), []byte(name)))
}

// opRename2 is the FUSE opcode of renameat2 with flags.
const opRename2 = 45

func (fs *fileSystem) Rename(cancel <-chan struct{}, in *gofuse.RenameIn, oldName, newName string) gofuse.Status {
	// Plain RENAME carries no flags field: go-fuse's RenameIn.Flags then
	// overlaps the names, so only RENAME2 may set flags.
	var flags uint32
	if in.Opcode == opRename2 {
		flags = in.Flags
	}
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	err := fs.v.Rename(ctx, meta.Ino(in.NodeId), []byte(oldName), meta.Ino(in.Newdir), []byte(newName), flags)
	return fs.status("rename", err)
}

func (fs *fileSystem) Link(cancel <-chan struct{}, in *gofuse.LinkIn, name string, out *gofuse.EntryOut) gofuse.Status {
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	a, err := fs.v.Link(ctx, meta.Ino(in.Oldnodeid), meta.Ino(in.NodeId), []byte(name))
	if err != nil {
		return fs.status("link", err)
	}
	fs.fillEntry(a, out)
	return gofuse.OK
}

func (fs *fileSystem) Symlink(cancel <-chan struct{}, h *gofuse.InHeader, target, name string, out *gofuse.EntryOut) gofuse.Status {
	nn := meta.NewNode{Type: store.TypeSymlink, Mode: 0o777, Target: []byte(target)}
	ctx := fs.ctx(cancel, h)
	defer ctx.end()
	a, err := fs.v.Mknod(ctx, meta.Ino(h.NodeId), []byte(name), nn)
	if err != nil {
		return fs.status("symlink", err)
	}
	fs.fillEntry(a, out)
	return gofuse.OK
}

func (fs *fileSystem) Readlink(cancel <-chan struct{}, h *gofuse.InHeader) ([]byte, gofuse.Status) {
	ctx := fs.ctx(cancel, h)
	defer ctx.end()
	target, err := fs.v.ReadLink(ctx, meta.Ino(h.NodeId))
	return target, fs.status("readlink", err)
}

func (fs *fileSystem) Access(cancel <-chan struct{}, in *gofuse.AccessIn) gofuse.Status {
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	return fs.status("access", fs.v.Access(ctx, meta.Ino(in.NodeId), in.Mask&7))
}

func (fs *fileSystem) StatFs(cancel <-chan struct{}, h *gofuse.InHeader, out *gofuse.StatfsOut) gofuse.Status {
	ctx := fs.ctx(cancel, h)
	defer ctx.end()
	st, err := fs.v.StatFS(ctx)
	if err != nil {
		return fs.status("statfs", err)
	}
	const bsize = 4096
	out.Bsize, out.Frsize, out.NameLen = bsize, bsize, 255
	out.Blocks = st.TotalSpace / bsize
	out.Bfree = st.AvailSpace / bsize
	out.Bavail = out.Bfree
	out.Files = st.UsedInodes + st.AvailInodes
	out.Ffree = st.AvailInodes
	return gofuse.OK
}
