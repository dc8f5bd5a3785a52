package fuse

import (
	"syscall"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/vfs"
)

func (fs *fileSystem) Create(cancel <-chan struct{}, in *gofuse.CreateIn, name string, out *gofuse.CreateOut) gofuse.Status {
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	a, fh, err := fs.v.Create(ctx, meta.Ino(in.NodeId), []byte(name),
		uint16(in.Mode&0o7777), uint16(in.Umask), in.Flags)
	if err == nil {
		// An existing file the create opened may be truncated.
		err = fs.killOnTrunc(ctx, fh, in.Flags, in.OpenFlags)
	}
	if err != nil {
		return fs.status("create", err)
	}
	fs.fillEntry(a, &out.EntryOut)
	out.Fh = fh
	if fs.v.DirectIO(fh) {
		out.OpenFlags |= gofuse.FOPEN_DIRECT_IO
	}
	return gofuse.OK
}

// Tmpfile answers open(2) with O_TMPFILE: an unnamed file in the
// directory, opened. The kernel makes linkat(2) of it possible unless
// the open had O_EXCL.
func (fs *fileSystem) Tmpfile(cancel <-chan struct{}, in *gofuse.CreateIn, out *gofuse.CreateOut) gofuse.Status {
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	a, fh, err := fs.v.Tmpfile(ctx, meta.Ino(in.NodeId), uint16(in.Mode&0o7777), uint16(in.Umask), in.Flags)
	if err != nil {
		return fs.status("tmpfile", err)
	}
	fs.fillEntry(a, &out.EntryOut)
	out.Fh = fh
	if fs.v.DirectIO(fh) {
		out.OpenFlags |= gofuse.FOPEN_DIRECT_IO
	}
	return gofuse.OK
}

func (fs *fileSystem) Open(cancel <-chan struct{}, in *gofuse.OpenIn, out *gofuse.OpenOut) gofuse.Status {
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	_, fh, err := fs.v.Open(ctx, meta.Ino(in.NodeId), in.Flags)
	if err == nil {
		err = fs.killOnTrunc(ctx, fh, in.Flags, in.Mode) // OpenIn.Mode holds the open flags
	}
	if err != nil {
		return fs.status("open", err)
	}
	out.Fh = fh
	switch {
	case fs.v.DirectIO(fh):
		out.OpenFlags |= gofuse.FOPEN_DIRECT_IO
	case fs.v.KeepCache(fh):
		out.OpenFlags |= gofuse.FOPEN_KEEP_CACHE
	}
	return gofuse.OK
}

// killOnTrunc drops setuid and setgid from the file just opened as fh
// when the kernel asks (killpriv, see Write): an O_TRUNC open by a
// process without CAP_FSETID. On failure it closes fh.
func (fs *fileSystem) killOnTrunc(ctx *request, fh uint64, flags, openFlags uint32) error {
	if flags&syscall.O_TRUNC == 0 || openFlags&gofuse.OPEN_KILL_SUIDGID == 0 {
		return nil
	}
	err := fs.v.KillSetID(ctx, fh)
	if err != nil {
		fs.v.Release(ctx, fh, 0)
	}
	return err
}

func (fs *fileSystem) Read(cancel <-chan struct{}, in *gofuse.ReadIn, buf []byte) (gofuse.ReadResult, gofuse.Status) {
	// go-fuse hands in a buffer for the reply; reading into it saves an
	// allocation per request.
	if cap(buf) < int(in.Size) {
		buf = make([]byte, in.Size)
	}
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	pieces, release, err := fs.v.ReadVec(ctx, in.Fh, in.Offset, buf[:in.Size])
	if err != nil {
		release()
		return nil, fs.status("read", err)
	}
	// A vector result is written to /dev/fuse with writev, straight from
	// the cached blocks the pieces may be; the plain data result would
	// first be copied into a splice pipe. go-fuse calls Done once the
	// reply is written, and the blocks' memory may be reused after that.
	return &readReply{pieces: pieces, release: release}, gofuse.OK
}

func (fs *fileSystem) Write(cancel <-chan struct{}, in *gofuse.WriteIn, data []byte) (uint32, gofuse.Status) {
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	if in.WriteFlags&gofuse.WRITE_KILL_SUIDGID != 0 {
		if err := fs.v.KillSetID(ctx, in.Fh); err != nil {
			return 0, fs.status("write", err)
		}
	}
	// A write that crosses the largest file size writes what fits, and
	// the kernel returns the short count (a next write there gets EFBIG).
	n, err := vfs.WriteLimit(in.Offset, len(data))
	if err != nil {
		return 0, fs.status("write", err)
	}
	if err := fs.v.Write(ctx, in.Fh, in.Offset, data[:n]); err != nil {
		return 0, fs.status("write", err)
	}
	return uint32(n), gofuse.OK
}

func (fs *fileSystem) Flush(cancel <-chan struct{}, in *gofuse.FlushIn) gofuse.Status {
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	return fs.status("flush", fs.v.Flush(ctx, in.Fh, in.LockOwner))
}

func (fs *fileSystem) Fsync(cancel <-chan struct{}, in *gofuse.FsyncIn) gofuse.Status {
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	return fs.status("fsync", fs.v.Fsync(ctx, in.Fh))
}

func (fs *fileSystem) Release(cancel <-chan struct{}, in *gofuse.ReleaseIn) {
	var flockOwner uint64
	if in.ReleaseFlags&gofuse.FUSE_RELEASE_FLOCK_UNLOCK != 0 {
		flockOwner = in.LockOwner
	}
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	if err := fs.v.Release(ctx, in.Fh, flockOwner); err != nil {
		fs.status("release", err)
	}
}

// Fallocate applies fallocate(2); see meta.Fallocate for the modes. An
// fallocate changes the file as a write does, so a caller without
// CAP_FSETID first drops its setuid and setgid bits (the kernel drops its
// file capabilities itself, with a REMOVEXATTR), which the kernel leaves
// to Sluice but, unlike for a write, does not flag.
func (fs *fileSystem) Fallocate(cancel <-chan struct{}, in *gofuse.FallocateIn) gofuse.Status {
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	if fs.v.HasSetID(in.Fh) && !keepsSetID(in.Pid, in.Uid) {
		if err := fs.v.KillSetID(ctx, in.Fh); err != nil {
			return fs.status("fallocate", err)
		}
	}
	return fs.status("fallocate", fs.v.Fallocate(ctx, in.Fh, in.Mode, in.Offset, in.Length))
}

// CopyFileRange shares stored slices between the two files instead of
// copying bytes.
func (fs *fileSystem) CopyFileRange(cancel <-chan struct{}, in *gofuse.CopyFileRangeIn) (uint32, gofuse.Status) {
	if in.Flags != 0 {
		return 0, gofuse.EINVAL
	}
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	n, err := fs.v.CopyFileRange(ctx, in.FhIn, in.OffIn, in.FhOut, in.OffOut, min(in.Len, 1<<30))
	if err != nil {
		return 0, fs.status("copy_file_range", err)
	}
	return uint32(n), gofuse.OK
}

func (fs *fileSystem) OpenDir(cancel <-chan struct{}, in *gofuse.OpenIn, out *gofuse.OpenOut) gofuse.Status {
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	fh, err := fs.v.OpenDir(ctx, meta.Ino(in.NodeId))
	if err != nil {
		return fs.status("opendir", err)
	}
	out.Fh = fh
	if fs.v.CacheDir() {
		out.OpenFlags |= gofuse.FOPEN_CACHE_DIR
		if fs.v.KeepCache(fh) {
			out.OpenFlags |= gofuse.FOPEN_KEEP_CACHE
		}
	}
	return gofuse.OK
}

func (fs *fileSystem) ReadDir(cancel <-chan struct{}, in *gofuse.ReadIn, out *gofuse.DirEntryList) gofuse.Status {
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	err := fs.v.ReadDir(ctx, in.Fh, in.Offset, false, func(e vfs.DirEntry) bool {
		return out.AddDirEntry(gofuse.DirEntry{Mode: typeBits[e.Type], Name: string(e.Name), Ino: uint64(e.Ino), Off: e.Off})
	})
	return fs.status("readdir", err)
}

func (fs *fileSystem) ReadDirPlus(cancel <-chan struct{}, in *gofuse.ReadIn, out *gofuse.DirEntryList) gofuse.Status {
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	err := fs.v.ReadDir(ctx, in.Fh, in.Offset, true, func(e vfs.DirEntry) bool {
		eo := out.AddDirLookupEntry(gofuse.DirEntry{Mode: typeBits[e.Type], Name: string(e.Name), Ino: uint64(e.Ino), Off: e.Off})
		if eo == nil {
			return false
		}
		if e.Attr != nil {
			fs.fillEntry(e.Attr, eo)
		}
		return true
	})
	return fs.status("readdirplus", err)
}

func (fs *fileSystem) ReleaseDir(in *gofuse.ReleaseIn) { fs.v.ReleaseDir(in.Fh) }

func (fs *fileSystem) FsyncDir(cancel <-chan struct{}, in *gofuse.FsyncIn) gofuse.Status {
	return gofuse.OK // every metadata change is committed when it returns
}

func (fs *fileSystem) GetXAttr(cancel <-chan struct{}, h *gofuse.InHeader, name string, dest []byte) (uint32, gofuse.Status) {
	ctx := fs.ctx(cancel, h)
	defer ctx.end()
	v, err := fs.v.GetXattr(ctx, meta.Ino(h.NodeId), name)
	if err != nil {
		return 0, fs.status("getxattr", err)
	}
	if len(dest) < len(v) {
		return uint32(len(v)), gofuse.ERANGE
	}
	return uint32(copy(dest, v)), gofuse.OK
}

func (fs *fileSystem) ListXAttr(cancel <-chan struct{}, h *gofuse.InHeader, dest []byte) (uint32, gofuse.Status) {
	ctx := fs.ctx(cancel, h)
	defer ctx.end()
	names, err := fs.v.ListXattr(ctx, meta.Ino(h.NodeId))
	if err != nil {
		return 0, fs.status("listxattr", err)
	}
	var list []byte
	for _, n := range names {
		list = append(append(list, n...), 0)
	}
	if len(dest) < len(list) {
		return uint32(len(list)), gofuse.ERANGE
	}
	return uint32(copy(dest, list)), gofuse.OK
}

func (fs *fileSystem) SetXAttr(cancel <-chan struct{}, in *gofuse.SetXAttrIn, name string, data []byte) gofuse.Status {
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	return fs.status("setxattr", fs.v.SetXattr(ctx, meta.Ino(in.NodeId), name, data, in.Flags))
}

func (fs *fileSystem) RemoveXAttr(cancel <-chan struct{}, h *gofuse.InHeader, name string) gofuse.Status {
	ctx := fs.ctx(cancel, h)
	defer ctx.end()
	return fs.status("removexattr", fs.v.RemoveXattr(ctx, meta.Ino(h.NodeId), name))
}

// readReply is the reply to a read: pieces written to /dev/fuse with one
// writev, and release called when go-fuse is done with them.
type readReply struct {
	pieces  [][]byte
	release func()
}

func (r *readReply) Size() int {
	n := 0
	for _, p := range r.pieces {
		n += len(p)
	}
	return n
}

func (r *readReply) Done() { r.release() }

// Bytes concatenates the pieces into buf's memory.
func (r *readReply) Bytes(buf []byte) ([]byte, gofuse.Status) {
	buf = buf[:0]
	for _, p := range r.pieces {
		buf = append(buf, p...)
	}
	return buf, gofuse.OK
}

// Slices hands go-fuse the pieces for writev.
func (r *readReply) Slices() ([][]byte, gofuse.Status) { return r.pieces, gofuse.OK }
