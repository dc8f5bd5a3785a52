package fuse

import (
	"syscall"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/sluicefs/sluice/internal/meta"
)

func (fs *fileSystem) GetLk(cancel <-chan struct{}, in *gofuse.LkIn, out *gofuse.LkOut) gofuse.Status {
	lk := meta.PosixLock{Start: in.Lk.Start, End: in.Lk.End, Type: in.Lk.Typ, Pid: in.Lk.Pid}
	ctx := fs.ctx(cancel, &in.InHeader)
	defer ctx.end()
	got, err := fs.v.GetLk(ctx, in.Fh, in.Owner, lk)
	if err != nil {
		return fs.status("getlk", err)
	}
	out.Lk = gofuse.FileLock{Start: got.Start, End: got.End, Typ: got.Type, Pid: got.Pid}
	return gofuse.OK
}

func (fs *fileSystem) SetLk(cancel <-chan struct{}, in *gofuse.LkIn) gofuse.Status {
	return fs.setLk(cancel, in, false)
}

func (fs *fileSystem) SetLkw(cancel <-chan struct{}, in *gofuse.LkIn) gofuse.Status {
	return fs.setLk(cancel, in, true)
}

// setLk applies flock(2) or fcntl(2) locks; a blocking request ends with
// EINTR when the kernel interrupts it (a signal to the waiting process),
// through the request's context. POSIX and OFD record locks come alike,
// told apart only by their owner (see "Record lock owners" in package
// vfs); the pid is the caller's thread group id, and 0 for an unlock.
func (fs *fileSystem) setLk(cancel <-chan struct{}, in *gofuse.LkIn, block bool) gofuse.Status {
	ctx := fs.ctx(cancel, &in.InHeader)
	if block {
		// POSIX: any signal ends a lock wait, with EINTR.
		ctx = fs.waitCtx(cancel, &in.InHeader)
	}
	defer ctx.end()
	if in.LkFlags&gofuse.FUSE_LK_FLOCK != 0 {
		switch in.Lk.Typ {
		case syscall.F_RDLCK, syscall.F_WRLCK, syscall.F_UNLCK:
		default:
			return gofuse.EINVAL
		}
		return fs.status("flock", fs.v.Flock(ctx, in.Fh, in.Owner, in.Lk.Typ, block))
	}
	lk := meta.PosixLock{Start: in.Lk.Start, End: in.Lk.End, Type: in.Lk.Typ, Pid: in.Lk.Pid}
	return fs.status("setlk", fs.v.SetLk(ctx, in.Fh, in.Owner, lk, block))
}
