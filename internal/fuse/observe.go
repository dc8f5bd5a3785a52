package fuse

import (
	"strconv"
	"sync"
	"syscall"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/sluicefs/sluice/internal/telemetry"
	"github.com/sluicefs/sluice/internal/vfs"
)

// observed reports every request of the file system it wraps: its
// latency to the mount's metrics, and, while anybody reads .accesslog, a
// line to the access log:
//
//	2026.11.26 15:04:05.123456 [uid:0,gid:0,pid:4231] lookup (1,src): OK (1234) <0.000081>
//
// that is the time the request ended, the caller, the operation with its
// arguments (inodes, names, handles, offsets and sizes), the result
// (OK or the errno's name, and what the reply carries: the inode of an
// entry, bytes read or written) and the latency in seconds. Requests on
// .accesslog itself are not logged. Formatting happens only while the
// log has a reader.
type observed struct {
	gofuse.RawFileSystem
	metrics *telemetry.Mount // nil: no metrics
	log     *vfs.AccessLog
}

// observe wraps fs; with neither metrics nor a log there is nothing to do.
func observe(fs gofuse.RawFileSystem, m *telemetry.Mount, log *vfs.AccessLog) gofuse.RawFileSystem {
	return &observed{RawFileSystem: fs, metrics: m, log: log}
}

// done reports one request. args formats the arguments and result; it is
// called only for the access log.
func (o *observed) done(method string, h *gofuse.InHeader, start time.Time, st gofuse.Status, args func(b []byte) []byte) {
	d := time.Since(start)
	if o.metrics != nil {
		o.metrics.FuseOp(method, d, st != gofuse.OK && st != gofuse.ENOENT)
	}
	if !o.log.Active() || h != nil && h.NodeId == uint64(vfs.AccessLogIno) {
		return
	}
	bp := lineBufs.Get().(*[]byte)
	defer lineBufs.Put(bp)
	b := time.Now().AppendFormat((*bp)[:0], "2006.01.02 15:04:05.000000")
	if h != nil {
		b = append(b, " [uid:"...)
		b = strconv.AppendUint(b, uint64(h.Uid), 10)
		b = append(b, ",gid:"...)
		b = strconv.AppendUint(b, uint64(h.Gid), 10)
		b = append(b, ",pid:"...)
		b = strconv.AppendUint(b, uint64(h.Pid), 10)
		b = append(b, ']')
	}
	b = append(b, ' ')
	b = append(b, method...)
	b = append(b, " ("...)
	b = args(b)
	b = append(b, " <"...)
	b = strconv.AppendFloat(b, d.Seconds(), 'f', 6, 64)
	b = append(b, ">\n"...)
	o.log.Log(b) // copies the line
	*bp = b
}

// lineBufs recycles the buffers access log lines are formatted in.
var lineBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// result appends "): " and the status's name.
func result(b []byte, st gofuse.Status) []byte {
	b = append(b, "): "...)
	if st == gofuse.OK {
		return append(b, "OK"...)
	}
	if name := unix.ErrnoName(syscall.Errno(st)); name != "" {
		return append(b, name...)
	}
	return strconv.AppendInt(b, int64(st), 10)
}

func u(b []byte, v uint64) []byte { return strconv.AppendUint(b, v, 10) }

func comma(b []byte) []byte { return append(b, ',') }

func quote(b []byte, s string) []byte { return strconv.AppendQuote(b, s) }

// entry appends the inode an entry reply carries.
func entry(b []byte, st gofuse.Status, out *gofuse.EntryOut) []byte {
	b = result(b, st)
	if st == gofuse.OK {
		b = append(b, " ("...)
		b = u(b, out.NodeId)
		b = append(b, ')')
	}
	return b
}

func (o *observed) Lookup(cancel <-chan struct{}, h *gofuse.InHeader, name string, out *gofuse.EntryOut) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Lookup(cancel, h, name, out)
	o.done("lookup", h, start, st, func(b []byte) []byte {
		return entry(quote(comma(u(b, h.NodeId)), name), st, out)
	})
	return st
}

func (o *observed) GetAttr(cancel <-chan struct{}, in *gofuse.GetAttrIn, out *gofuse.AttrOut) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.GetAttr(cancel, in, out)
	o.done("getattr", &in.InHeader, start, st, func(b []byte) []byte {
		b = result(u(b, in.NodeId), st)
		if st == gofuse.OK {
			b = append(b, " (size "...)
			b = append(u(b, out.Size), ')')
		}
		return b
	})
	return st
}

func (o *observed) SetAttr(cancel <-chan struct{}, in *gofuse.SetAttrIn, out *gofuse.AttrOut) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.SetAttr(cancel, in, out)
	o.done("setattr", &in.InHeader, start, st, func(b []byte) []byte {
		b = append(comma(u(b, in.NodeId)), "valid=0x"...)
		b = strconv.AppendUint(b, uint64(in.Valid), 16)
		if in.Valid&gofuse.FATTR_MODE != 0 {
			b = append(b, ",mode=0"...)
			b = strconv.AppendUint(b, uint64(in.Mode&0o7777), 8)
		}
		if in.Valid&gofuse.FATTR_UID != 0 {
			b = u(append(b, ",uid="...), uint64(in.Uid))
		}
		if in.Valid&gofuse.FATTR_GID != 0 {
			b = u(append(b, ",gid="...), uint64(in.Gid))
		}
		if in.Valid&gofuse.FATTR_SIZE != 0 {
			b = u(append(b, ",size="...), in.Size)
		}
		return result(b, st)
	})
	return st
}

func (o *observed) Mknod(cancel <-chan struct{}, in *gofuse.MknodIn, name string, out *gofuse.EntryOut) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Mknod(cancel, in, name, out)
	o.done("mknod", &in.InHeader, start, st, func(b []byte) []byte {
		b = append(quote(comma(u(b, in.NodeId)), name), ",0"...)
		return entry(strconv.AppendUint(b, uint64(in.Mode), 8), st, out)
	})
	return st
}

func (o *observed) Mkdir(cancel <-chan struct{}, in *gofuse.MkdirIn, name string, out *gofuse.EntryOut) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Mkdir(cancel, in, name, out)
	o.done("mkdir", &in.InHeader, start, st, func(b []byte) []byte {
		b = append(quote(comma(u(b, in.NodeId)), name), ",0"...)
		return entry(strconv.AppendUint(b, uint64(in.Mode&0o7777), 8), st, out)
	})
	return st
}

func (o *observed) Unlink(cancel <-chan struct{}, h *gofuse.InHeader, name string) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Unlink(cancel, h, name)
	o.done("unlink", h, start, st, func(b []byte) []byte { return result(quote(comma(u(b, h.NodeId)), name), st) })
	return st
}

func (o *observed) Rmdir(cancel <-chan struct{}, h *gofuse.InHeader, name string) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Rmdir(cancel, h, name)
	o.done("rmdir", h, start, st, func(b []byte) []byte { return result(quote(comma(u(b, h.NodeId)), name), st) })
	return st
}

func (o *observed) Rename(cancel <-chan struct{}, in *gofuse.RenameIn, oldName, newName string) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Rename(cancel, in, oldName, newName)
	o.done("rename", &in.InHeader, start, st, func(b []byte) []byte {
		b = quote(comma(u(comma(quote(comma(u(b, in.NodeId)), oldName)), in.Newdir)), newName)
		return result(b, st)
	})
	return st
}

func (o *observed) Link(cancel <-chan struct{}, in *gofuse.LinkIn, name string, out *gofuse.EntryOut) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Link(cancel, in, name, out)
	o.done("link", &in.InHeader, start, st, func(b []byte) []byte {
		return entry(quote(comma(u(comma(u(b, in.Oldnodeid)), in.NodeId)), name), st, out)
	})
	return st
}

func (o *observed) Symlink(cancel <-chan struct{}, h *gofuse.InHeader, target, name string, out *gofuse.EntryOut) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Symlink(cancel, h, target, name, out)
	o.done("symlink", h, start, st, func(b []byte) []byte {
		return entry(quote(comma(quote(comma(u(b, h.NodeId)), name)), target), st, out)
	})
	return st
}

func (o *observed) Readlink(cancel <-chan struct{}, h *gofuse.InHeader) ([]byte, gofuse.Status) {
	start := time.Now()
	target, st := o.RawFileSystem.Readlink(cancel, h)
	o.done("readlink", h, start, st, func(b []byte) []byte {
		b = result(u(b, h.NodeId), st)
		if st == gofuse.OK {
			b = append(quote(append(b, " ("...), string(target)), ')')
		}
		return b
	})
	return target, st
}

func (o *observed) Access(cancel <-chan struct{}, in *gofuse.AccessIn) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Access(cancel, in)
	o.done("access", &in.InHeader, start, st, func(b []byte) []byte {
		return result(strconv.AppendUint(append(comma(u(b, in.NodeId)), "0"...), uint64(in.Mask), 8), st)
	})
	return st
}

func (o *observed) StatFs(cancel <-chan struct{}, h *gofuse.InHeader, out *gofuse.StatfsOut) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.StatFs(cancel, h, out)
	o.done("statfs", h, start, st, func(b []byte) []byte { return result(u(b, h.NodeId), st) })
	return st
}

func (o *observed) Create(cancel <-chan struct{}, in *gofuse.CreateIn, name string, out *gofuse.CreateOut) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Create(cancel, in, name, out)
	o.done("create", &in.InHeader, start, st, func(b []byte) []byte {
		b = append(quote(comma(u(b, in.NodeId)), name), ",0"...)
		b = strconv.AppendUint(b, uint64(in.Mode&0o7777), 8)
		b = result(b, st)
		if st == gofuse.OK {
			b = append(u(append(u(append(b, " ("...), out.NodeId), ",fh "...), out.Fh), ')')
		}
		return b
	})
	return st
}

func (o *observed) Tmpfile(cancel <-chan struct{}, in *gofuse.CreateIn, out *gofuse.CreateOut) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Tmpfile(cancel, in, out)
	o.done("tmpfile", &in.InHeader, start, st, func(b []byte) []byte {
		b = append(comma(u(b, in.NodeId)), "0"...)
		b = strconv.AppendUint(b, uint64(in.Mode&0o7777), 8)
		b = result(b, st)
		if st == gofuse.OK {
			b = append(u(append(u(append(b, " ("...), out.NodeId), ",fh "...), out.Fh), ')')
		}
		return b
	})
	return st
}

func (o *observed) Open(cancel <-chan struct{}, in *gofuse.OpenIn, out *gofuse.OpenOut) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Open(cancel, in, out)
	o.done("open", &in.InHeader, start, st, func(b []byte) []byte {
		b = append(comma(u(b, in.NodeId)), "0x"...)
		b = result(strconv.AppendUint(b, uint64(in.Flags), 16), st)
		if st == gofuse.OK {
			b = append(u(append(b, " (fh "...), out.Fh), ')')
		}
		return b
	})
	return st
}

func (o *observed) Read(cancel <-chan struct{}, in *gofuse.ReadIn, buf []byte) (gofuse.ReadResult, gofuse.Status) {
	start := time.Now()
	res, st := o.RawFileSystem.Read(cancel, in, buf)
	if st == gofuse.OK && res != nil && o.metrics != nil {
		o.metrics.FuseRead(res.Size())
	}
	o.done("read", &in.InHeader, start, st, func(b []byte) []byte {
		b = u(comma(u(comma(u(comma(u(b, in.NodeId)), in.Fh)), in.Offset)), uint64(in.Size))
		b = result(b, st)
		if st == gofuse.OK && res != nil {
			b = append(u(append(b, " ("...), uint64(res.Size())), ')')
		}
		return b
	})
	return res, st
}

func (o *observed) Write(cancel <-chan struct{}, in *gofuse.WriteIn, data []byte) (uint32, gofuse.Status) {
	start := time.Now()
	n, st := o.RawFileSystem.Write(cancel, in, data)
	if st == gofuse.OK && o.metrics != nil {
		o.metrics.FuseWritten(int(n))
	}
	o.done("write", &in.InHeader, start, st, func(b []byte) []byte {
		b = u(comma(u(comma(u(comma(u(b, in.NodeId)), in.Fh)), in.Offset)), uint64(len(data)))
		b = result(b, st)
		if st == gofuse.OK {
			b = append(u(append(b, " ("...), uint64(n)), ')')
		}
		return b
	})
	return n, st
}

func (o *observed) Flush(cancel <-chan struct{}, in *gofuse.FlushIn) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Flush(cancel, in)
	o.done("flush", &in.InHeader, start, st, func(b []byte) []byte { return result(u(comma(u(b, in.NodeId)), in.Fh), st) })
	return st
}

func (o *observed) Fsync(cancel <-chan struct{}, in *gofuse.FsyncIn) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Fsync(cancel, in)
	o.done("fsync", &in.InHeader, start, st, func(b []byte) []byte { return result(u(comma(u(b, in.NodeId)), in.Fh), st) })
	return st
}

func (o *observed) Release(cancel <-chan struct{}, in *gofuse.ReleaseIn) {
	start := time.Now()
	o.RawFileSystem.Release(cancel, in)
	o.done("release", &in.InHeader, start, gofuse.OK, func(b []byte) []byte { return result(u(comma(u(b, in.NodeId)), in.Fh), gofuse.OK) })
}

func (o *observed) Fallocate(cancel <-chan struct{}, in *gofuse.FallocateIn) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.Fallocate(cancel, in)
	o.done("fallocate", &in.InHeader, start, st, func(b []byte) []byte {
		b = u(comma(u(comma(u(comma(u(comma(u(b, in.NodeId)), in.Fh)), uint64(in.Mode))), in.Offset)), in.Length)
		return result(b, st)
	})
	return st
}

func (o *observed) CopyFileRange(cancel <-chan struct{}, in *gofuse.CopyFileRangeIn) (uint32, gofuse.Status) {
	start := time.Now()
	n, st := o.RawFileSystem.CopyFileRange(cancel, in)
	o.done("copy_file_range", &in.InHeader, start, st, func(b []byte) []byte {
		b = u(comma(u(comma(u(comma(u(comma(u(b, in.NodeId)), in.OffIn)), in.NodeIdOut)), in.OffOut)), in.Len)
		b = result(b, st)
		if st == gofuse.OK {
			b = append(u(append(b, " ("...), uint64(n)), ')')
		}
		return b
	})
	return n, st
}

func (o *observed) OpenDir(cancel <-chan struct{}, in *gofuse.OpenIn, out *gofuse.OpenOut) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.OpenDir(cancel, in, out)
	o.done("opendir", &in.InHeader, start, st, func(b []byte) []byte {
		b = result(u(b, in.NodeId), st)
		if st == gofuse.OK {
			b = append(u(append(b, " (fh "...), out.Fh), ')')
		}
		return b
	})
	return st
}

func (o *observed) ReadDir(cancel <-chan struct{}, in *gofuse.ReadIn, out *gofuse.DirEntryList) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.ReadDir(cancel, in, out)
	o.done("readdir", &in.InHeader, start, st, func(b []byte) []byte {
		return result(u(comma(u(comma(u(b, in.NodeId)), in.Fh)), in.Offset), st)
	})
	return st
}

func (o *observed) ReadDirPlus(cancel <-chan struct{}, in *gofuse.ReadIn, out *gofuse.DirEntryList) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.ReadDirPlus(cancel, in, out)
	o.done("readdirplus", &in.InHeader, start, st, func(b []byte) []byte {
		return result(u(comma(u(comma(u(b, in.NodeId)), in.Fh)), in.Offset), st)
	})
	return st
}

func (o *observed) ReleaseDir(in *gofuse.ReleaseIn) {
	start := time.Now()
	o.RawFileSystem.ReleaseDir(in)
	o.done("releasedir", &in.InHeader, start, gofuse.OK, func(b []byte) []byte { return result(u(comma(u(b, in.NodeId)), in.Fh), gofuse.OK) })
}

func (o *observed) FsyncDir(cancel <-chan struct{}, in *gofuse.FsyncIn) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.FsyncDir(cancel, in)
	o.done("fsyncdir", &in.InHeader, start, st, func(b []byte) []byte { return result(u(comma(u(b, in.NodeId)), in.Fh), st) })
	return st
}

func (o *observed) GetXAttr(cancel <-chan struct{}, h *gofuse.InHeader, name string, dest []byte) (uint32, gofuse.Status) {
	start := time.Now()
	n, st := o.RawFileSystem.GetXAttr(cancel, h, name, dest)
	o.done("getxattr", h, start, st, func(b []byte) []byte { return result(quote(comma(u(b, h.NodeId)), name), st) })
	return n, st
}

func (o *observed) ListXAttr(cancel <-chan struct{}, h *gofuse.InHeader, dest []byte) (uint32, gofuse.Status) {
	start := time.Now()
	n, st := o.RawFileSystem.ListXAttr(cancel, h, dest)
	o.done("listxattr", h, start, st, func(b []byte) []byte { return result(u(b, h.NodeId), st) })
	return n, st
}

func (o *observed) SetXAttr(cancel <-chan struct{}, in *gofuse.SetXAttrIn, name string, data []byte) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.SetXAttr(cancel, in, name, data)
	o.done("setxattr", &in.InHeader, start, st, func(b []byte) []byte {
		return result(u(comma(quote(comma(u(b, in.NodeId)), name)), uint64(len(data))), st)
	})
	return st
}

func (o *observed) RemoveXAttr(cancel <-chan struct{}, h *gofuse.InHeader, name string) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.RemoveXAttr(cancel, h, name)
	o.done("removexattr", h, start, st, func(b []byte) []byte { return result(quote(comma(u(b, h.NodeId)), name), st) })
	return st
}

func (o *observed) GetLk(cancel <-chan struct{}, in *gofuse.LkIn, out *gofuse.LkOut) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.GetLk(cancel, in, out)
	o.done("getlk", &in.InHeader, start, st, func(b []byte) []byte { return lk(b, in, st) })
	return st
}

func (o *observed) SetLk(cancel <-chan struct{}, in *gofuse.LkIn) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.SetLk(cancel, in)
	method := "setlk"
	if in.LkFlags&gofuse.FUSE_LK_FLOCK != 0 {
		method = "flock"
	}
	o.done(method, &in.InHeader, start, st, func(b []byte) []byte { return lk(b, in, st) })
	return st
}

func (o *observed) SetLkw(cancel <-chan struct{}, in *gofuse.LkIn) gofuse.Status {
	start := time.Now()
	st := o.RawFileSystem.SetLkw(cancel, in)
	method := "setlkw"
	if in.LkFlags&gofuse.FUSE_LK_FLOCK != 0 {
		method = "flockw"
	}
	o.done(method, &in.InHeader, start, st, func(b []byte) []byte { return lk(b, in, st) })
	return st
}

// lk appends the arguments of a lock request: inode, handle, owner, type
// and range.
func lk(b []byte, in *gofuse.LkIn, st gofuse.Status) []byte {
	b = u(comma(u(comma(u(b, in.NodeId)), in.Fh)), in.Owner)
	b = u(append(b, ",type="...), uint64(in.Lk.Typ))
	b = u(comma(u(comma(b), in.Lk.Start)), in.Lk.End)
	return result(b, st)
}
