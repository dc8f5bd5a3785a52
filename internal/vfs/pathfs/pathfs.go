// Package pathfs is a volume seen by path, as a program sees a mount of
// it, over the VFS directly (no FUSE): what the WebDAV server serves.
// Names are slash-separated and relative to the volume's root ("/a/b"
// and "a/b" are the same file); each operation runs with the
// credentials the FS was made with, so permissions apply as they would
// to a program of that user on a mount.
//
// Every open File holds a handle of the VFS, released by Close: files
// written through it are committed on Close as a mount commits them on
// close(2), so another mount sees them whole then (close-to-open).
package pathfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/control"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/vfs"
)

// FS is a volume's tree by path.
type FS struct {
	v     *vfs.VFS
	cred  meta.Cred
	umask uint16
}

// New returns the tree of v, accessed with cred; umask masks the modes
// of what it creates. The VFS's internal files (.stats, .control, …),
// which are a mount's, are not part of it.
func New(v *vfs.VFS, cred meta.Cred, umask uint16) *FS {
	return &FS{v: v, cred: cred, umask: umask}
}

func (f *FS) ctx(ctx context.Context) context.Context { return meta.WithCred(ctx, f.cred) }

// split cleans name and returns its components (none for the root).
func split(name string) []string {
	name = strings.Trim(path.Clean("/"+name), "/")
	if name == "" {
		return nil
	}
	return strings.Split(name, "/")
}

// walk returns the attributes of name. "..", cleaned away by split, never
// leaves the root.
func (f *FS) walk(ctx context.Context, parts []string) (*meta.Attr, error) {
	a, err := f.v.GetAttr(ctx, meta.RootIno)
	if err != nil {
		return nil, err
	}
	for _, p := range parts {
		if a.Type != store.TypeDir {
			return nil, syscall.ENOTDIR
		}
		if a, err = f.lookup(ctx, a.Ino, []byte(p)); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// lookup looks name up in dir; the internal files are not there.
func (f *FS) lookup(ctx context.Context, dir meta.Ino, name []byte) (*meta.Attr, error) {
	a, err := f.v.Lookup(ctx, dir, name)
	if err == nil && vfs.IsInternal(a.Ino) {
		return nil, syscall.ENOENT
	}
	return a, err
}

// base returns the last component of name ("/" for the root).
func base(name string) string { return path.Base("/" + strings.Trim(name, "/")) }

// parent returns the directory that holds name, and name's last
// component; the root has none.
func (f *FS) parent(ctx context.Context, name string) (*meta.Attr, []byte, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, nil, syscall.EPERM // the root itself
	}
	dir, err := f.walk(ctx, parts[:len(parts)-1])
	if err != nil {
		return nil, nil, err
	}
	if dir.Type != store.TypeDir {
		return nil, nil, syscall.ENOTDIR
	}
	return dir, []byte(parts[len(parts)-1]), nil
}

func pathErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var errno syscall.Errno
	if errors.As(err, &errno) || errors.Is(err, meta.ErrNoInode) {
		if errors.Is(err, meta.ErrNoInode) {
			errno = syscall.ENOENT
		}
		return &fs.PathError{Op: op, Path: name, Err: errno}
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// Stat returns the file name.
func (f *FS) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	ctx = f.ctx(ctx)
	a, err := f.walk(ctx, split(name))
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	return info(base(name), a), nil
}

// Mkdir makes the directory name.
func (f *FS) Mkdir(ctx context.Context, name string, perm os.FileMode) error {
	ctx = f.ctx(ctx)
	dir, base, err := f.parent(ctx, name)
	if err == nil {
		_, err = f.v.Mknod(ctx, dir.Ino, base, meta.NewNode{Type: store.TypeDir, Mode: uint16(perm.Perm()), Umask: f.umask})
	}
	if errors.Is(err, syscall.EPERM) && len(split(name)) == 0 {
		err = syscall.EEXIST
	}
	return pathErr("mkdir", name, err)
}

// RemoveAll removes name and, a directory, everything in it; a name that
// does not exist is no error.
func (f *FS) RemoveAll(ctx context.Context, name string) error {
	ctx = f.ctx(ctx)
	dir, base, err := f.parent(ctx, name)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return nil
		}
		return pathErr("removeall", name, err)
	}
	a, err := f.lookup(ctx, dir.Ino, base)
	switch {
	case errors.Is(err, syscall.ENOENT):
		return nil
	case err != nil:
	case a.Type == store.TypeDir:
		err = f.removeTree(ctx, dir.Ino, base)
	default:
		err = f.v.Unlink(ctx, dir.Ino, base)
	}
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	return pathErr("removeall", name, err)
}

// removeTree removes the directory name in dir and its tree, as `sluice
// rmr` does, and returns the first failure (an entry another client
// removed meanwhile is none).
func (f *FS) removeTree(ctx context.Context, dir meta.Ino, name []byte) error {
	var fails control.Failures
	err := f.v.RemoveTree(ctx, dir, name, 8, &fails, func() {})
	if err != nil {
		return err
	}
	n, list := fails.List()
	for _, fl := range list {
		if fl.Errno != 0 && fl.Errno != syscall.ENOENT {
			return fl.Errno
		}
	}
	if n > int64(len(list)) || len(list) > 0 && list[0].Errno == 0 {
		return fmt.Errorf("removing %s: %d failures, the first: %s: %s", name, n, list[0].Path, list[0].Err) //lint:nowrap control.Failure.Err is the message, a string
	}
	return nil
}

// Rename moves oldName to newName, replacing what newName names as
// rename(2) does.
func (f *FS) Rename(ctx context.Context, oldName, newName string) error {
	ctx = f.ctx(ctx)
	sd, sn, err := f.parent(ctx, oldName)
	if err != nil {
		return pathErr("rename", oldName, err)
	}
	dd, dn, err := f.parent(ctx, newName)
	if err != nil {
		return pathErr("rename", newName, err)
	}
	return pathErr("rename", oldName, f.v.Rename(ctx, sd.Ino, sn, dd.Ino, dn, 0))
}

// OpenFile opens name as os.OpenFile does: flag is O_RDONLY, O_WRONLY or
// O_RDWR with O_CREATE, O_EXCL, O_TRUNC and O_APPEND; perm is the mode of
// a file it creates. A directory opens for reading its entries.
func (f *FS) OpenFile(ctx context.Context, name string, flag int, perm os.FileMode) (*File, error) {
	ctx = f.ctx(ctx)
	parts := split(name)
	var a *meta.Attr
	var err error
	if flag&os.O_CREATE != 0 && len(parts) > 0 {
		dir, base, perr := f.parent(ctx, name)
		if perr != nil {
			return nil, pathErr("open", name, perr)
		}
		a, err = f.v.Lookup(ctx, dir.Ino, base)
		if err == nil && vfs.IsInternal(a.Ino) {
			return nil, pathErr("open", name, syscall.EPERM) // a mount's, not the tree's
		}
		switch {
		case errors.Is(err, syscall.ENOENT):
			var fh uint64
			a, fh, err = f.v.Create(ctx, dir.Ino, base, uint16(perm.Perm()), f.umask, uint32(flag)|syscall.O_EXCL)
			if err != nil {
				return nil, pathErr("open", name, err)
			}
			return &File{fs: f, name: name, attr: a, fh: fh, flag: flag}, nil
		case err == nil && flag&os.O_EXCL != 0:
			return nil, pathErr("open", name, syscall.EEXIST)
		}
	} else {
		a, err = f.walk(ctx, parts)
	}
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	if a.Type == store.TypeDir {
		if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
			return nil, pathErr("open", name, syscall.EISDIR)
		}
		fh, err := f.v.OpenDir(ctx, a.Ino)
		if err != nil {
			return nil, pathErr("open", name, err)
		}
		return &File{fs: f, name: name, attr: a, fh: fh, dir: true}, nil
	}
	if a.Type != store.TypeFile {
		// A symlink, a device, a FIFO, a socket: no content to serve.
		return nil, pathErr("open", name, syscall.EINVAL)
	}
	a, fh, err := f.v.Open(ctx, a.Ino, uint32(flag&^(os.O_CREATE|os.O_EXCL)))
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	return &File{fs: f, name: name, attr: a, fh: fh, flag: flag}, nil
}

// File is an open file or directory.
type File struct {
	fs   *FS
	name string
	attr *meta.Attr
	fh   uint64
	flag int
	off  int64
	dir  bool
	// dirOff is where Readdir goes on in the listing.
	dirOff uint64
	closed bool
}

var _ io.ReadWriteSeeker = (*File)(nil)

func (h *File) ctx() context.Context { return h.fs.ctx(context.Background()) }

// Read reads from the file's offset.
func (h *File) Read(p []byte) (int, error) {
	n, err := h.ReadAt(p, h.off)
	h.off += int64(n)
	return n, err
}

// ReadAt reads len(p) bytes at off; fewer at the end of the file, with
// io.EOF.
func (h *File) ReadAt(p []byte, off int64) (int, error) {
	if h.dir {
		return 0, pathErr("read", h.name, syscall.EISDIR)
	}
	if off < 0 {
		return 0, pathErr("read", h.name, syscall.EINVAL)
	}
	total := 0
	for total < len(p) {
		n, err := h.fs.v.Read(h.ctx(), h.fh, uint64(off)+uint64(total), p[total:])
		total += n
		if err != nil {
			return total, pathErr("read", h.name, err)
		}
		if n == 0 {
			return total, io.EOF
		}
	}
	return total, nil
}

// Write writes at the file's offset (the end with O_APPEND).
func (h *File) Write(p []byte) (int, error) {
	if h.dir {
		return 0, pathErr("write", h.name, syscall.EISDIR)
	}
	if h.flag&os.O_APPEND != 0 {
		st, err := h.Stat()
		if err != nil {
			return 0, err
		}
		h.off = st.Size()
	}
	if err := h.fs.v.Write(h.ctx(), h.fh, uint64(h.off), p); err != nil {
		return 0, pathErr("write", h.name, err)
	}
	h.off += int64(len(p))
	return len(p), nil
}

// Seek sets the offset of the next Read or Write.
func (h *File) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += h.off
	case io.SeekEnd:
		st, err := h.Stat()
		if err != nil {
			return 0, err
		}
		offset += st.Size()
	default:
		return 0, pathErr("seek", h.name, syscall.EINVAL)
	}
	if offset < 0 {
		return 0, pathErr("seek", h.name, syscall.EINVAL)
	}
	h.off = offset
	return offset, nil
}

// Stat returns the file's attributes now.
func (h *File) Stat() (fs.FileInfo, error) {
	a, err := h.fs.v.GetAttr(h.ctx(), h.attr.Ino)
	if err != nil {
		return nil, pathErr("stat", h.name, err)
	}
	return info(base(h.name), a), nil
}

// Readdir returns up to count entries of a directory that follow those
// returned before (all of them when count <= 0), as os.File.Readdir.
func (h *File) Readdir(count int) ([]fs.FileInfo, error) {
	if !h.dir {
		return nil, pathErr("readdir", h.name, syscall.ENOTDIR)
	}
	var out []fs.FileInfo
	err := h.fs.v.ReadDir(h.ctx(), h.fh, h.dirOff, true, func(e vfs.DirEntry) bool {
		h.dirOff = e.Off
		name := string(e.Name)
		if name == "." || name == ".." || e.Attr == nil || vfs.IsInternal(e.Ino) {
			return true
		}
		out = append(out, info(name, e.Attr))
		return count <= 0 || len(out) < count
	})
	if err != nil {
		return out, pathErr("readdir", h.name, err)
	}
	if count > 0 && len(out) == 0 {
		return nil, io.EOF
	}
	return out, nil
}

// Sync makes what was written durable, as fsync(2).
func (h *File) Sync() error {
	if h.dir {
		return nil
	}
	return pathErr("sync", h.name, h.fs.v.Fsync(h.ctx(), h.fh))
}

// Flush commits what was written, as Close does (close(2) on a mount),
// but keeps the file open: other clients see the writes, and the file's
// size and mtime stay as they are now until it is written again. Unlike
// Sync, it does not wait for the blocks to be durable in storage.
func (h *File) Flush() error {
	if h.dir {
		return nil
	}
	return pathErr("flush", h.name, h.fs.v.Flush(h.ctx(), h.fh, 0))
}

// Close commits what was written (as close(2) on a mount) and releases
// the handle.
func (h *File) Close() error {
	if h.closed {
		return pathErr("close", h.name, fs.ErrClosed)
	}
	h.closed = true
	ctx := h.ctx()
	if h.dir {
		h.fs.v.ReleaseDir(h.fh)
		return nil
	}
	err := h.fs.v.Flush(ctx, h.fh, 0)
	if rerr := h.fs.v.Release(ctx, h.fh, 0); err == nil {
		err = rerr
	}
	return pathErr("close", h.name, err)
}

// fileInfo is a file's attributes as fs.FileInfo.
type fileInfo struct {
	name string
	a    *meta.Attr
}

func info(name string, a *meta.Attr) fs.FileInfo { return fileInfo{name: name, a: a} }

func (i fileInfo) Name() string { return i.name }
func (i fileInfo) Size() int64  { return int64(i.a.Length) }
func (i fileInfo) ModTime() time.Time {
	return time.Unix(i.a.Mtime, int64(i.a.Mtimensec))
}
func (i fileInfo) IsDir() bool { return i.a.Type == store.TypeDir }
func (i fileInfo) Sys() any    { return i.a }

// Mode returns the permission bits and the type.
func (i fileInfo) Mode() fs.FileMode {
	m := fs.FileMode(i.a.Mode & 0o777)
	if i.a.Mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if i.a.Mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if i.a.Mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	switch i.a.Type {
	case store.TypeDir:
		m |= fs.ModeDir
	case store.TypeSymlink:
		m |= fs.ModeSymlink
	case store.TypeFIFO:
		m |= fs.ModeNamedPipe
	case store.TypeSocket:
		m |= fs.ModeSocket
	case store.TypeBlockDev:
		m |= fs.ModeDevice
	case store.TypeCharDev:
		m |= fs.ModeDevice | fs.ModeCharDevice
	}
	return m
}

// Xattrs returns the names of the file's extended attributes.
func (h *File) Xattrs() ([]string, error) {
	names, err := h.fs.v.ListXattr(h.ctx(), h.attr.Ino)
	return names, pathErr("listxattr", h.name, err)
}

// GetXattr returns the value of the extended attribute name.
func (h *File) GetXattr(name string) ([]byte, error) {
	v, err := h.fs.v.GetXattr(h.ctx(), h.attr.Ino, name)
	return v, pathErr("getxattr", h.name, err)
}

// SetXattr sets the extended attribute name to value.
func (h *File) SetXattr(name string, value []byte) error {
	return pathErr("setxattr", h.name, h.fs.v.SetXattr(h.ctx(), h.attr.Ino, name, value, 0))
}

// RemoveXattr removes the extended attribute name; a missing one is no
// error.
func (h *File) RemoveXattr(name string) error {
	err := h.fs.v.RemoveXattr(h.ctx(), h.attr.Ino, name)
	if errors.Is(err, syscall.ENODATA) {
		err = nil
	}
	return pathErr("removexattr", h.name, err)
}

// MkdirAll makes the directory name and the directories above it that
// are missing, as os.MkdirAll; perm is the mode of those it makes. A
// directory made meanwhile by another client is no error.
func (f *FS) MkdirAll(ctx context.Context, name string, perm os.FileMode) error {
	cctx := f.ctx(ctx)
	parts := split(name)
	a, err := f.v.GetAttr(cctx, meta.RootIno)
	if err != nil {
		return pathErr("mkdir", name, err)
	}
	for i, p := range parts {
		if a.Type != store.TypeDir {
			return pathErr("mkdir", "/"+path.Join(parts[:i]...), syscall.ENOTDIR)
		}
		next, err := f.lookup(cctx, a.Ino, []byte(p))
		if errors.Is(err, syscall.ENOENT) {
			next, err = f.v.Mknod(cctx, a.Ino, []byte(p), meta.NewNode{Type: store.TypeDir, Mode: uint16(perm.Perm()), Umask: f.umask})
			if errors.Is(err, syscall.EEXIST) {
				next, err = f.lookup(cctx, a.Ino, []byte(p))
			}
		}
		if err != nil {
			return pathErr("mkdir", "/"+path.Join(parts[:i+1]...), err)
		}
		a = next
	}
	if a.Type != store.TypeDir {
		return pathErr("mkdir", name, syscall.ENOTDIR)
	}
	return nil
}

// Remove removes the file name, or the directory name if it is empty,
// as os.Remove.
func (f *FS) Remove(ctx context.Context, name string) error {
	ctx = f.ctx(ctx)
	dir, base, err := f.parent(ctx, name)
	if err != nil {
		return pathErr("remove", name, err)
	}
	a, err := f.lookup(ctx, dir.Ino, base)
	if err != nil {
		return pathErr("remove", name, err)
	}
	if a.Type == store.TypeDir {
		return pathErr("remove", name, f.v.Rmdir(ctx, dir.Ino, base))
	}
	return pathErr("remove", name, f.v.Unlink(ctx, dir.Ino, base))
}

// ReadDir returns the entries of the directory name sorted by name, as
// os.ReadDir.
func (f *FS) ReadDir(ctx context.Context, name string) ([]fs.FileInfo, error) {
	h, err := f.OpenFile(ctx, name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	if !h.dir {
		return nil, pathErr("readdir", name, syscall.ENOTDIR)
	}
	list, err := h.Readdir(0)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(list, func(a, b fs.FileInfo) int { return strings.Compare(a.Name(), b.Name()) })
	return list, nil
}

// CopyFrom copies n bytes at srcOff of src to dstOff of h as
// copy_file_range(2) does on a mount: the volume shares the data of
// src with h rather than copying it where it can. It returns the
// number of bytes copied, fewer than n at the end of src. h must be
// open for writing, without O_APPEND, and src for reading.
func (h *File) CopyFrom(src *File, srcOff, dstOff, n int64) (int64, error) {
	if h.dir || src.dir {
		return 0, pathErr("copy_file_range", h.name, syscall.EISDIR)
	}
	if srcOff < 0 || dstOff < 0 || n < 0 {
		return 0, pathErr("copy_file_range", h.name, syscall.EINVAL)
	}
	var total int64
	for total < n {
		c, err := h.fs.v.CopyFileRange(h.ctx(), src.fh, uint64(srcOff+total), h.fh, uint64(dstOff+total), uint64(n-total))
		total += int64(c)
		if err != nil {
			return total, pathErr("copy_file_range", h.name, err)
		}
		if c == 0 {
			break
		}
	}
	return total, nil
}

// GetXattr returns the value of the extended attribute attr of the file
// name, without opening it.
func (f *FS) GetXattr(ctx context.Context, name, attr string) ([]byte, error) {
	ctx = f.ctx(ctx)
	a, err := f.walk(ctx, split(name))
	if err != nil {
		return nil, pathErr("getxattr", name, err)
	}
	v, err := f.v.GetXattr(ctx, a.Ino, attr)
	return v, pathErr("getxattr", name, err)
}

// SetXattr sets the extended attribute attr of the file name to value.
func (f *FS) SetXattr(ctx context.Context, name, attr string, value []byte) error {
	ctx = f.ctx(ctx)
	a, err := f.walk(ctx, split(name))
	if err != nil {
		return pathErr("setxattr", name, err)
	}
	return pathErr("setxattr", name, f.v.SetXattr(ctx, a.Ino, attr, value, 0))
}

// Xattrs returns the names of the extended attributes of the file name,
// without opening it.
func (f *FS) Xattrs(ctx context.Context, name string) ([]string, error) {
	ctx = f.ctx(ctx)
	a, err := f.walk(ctx, split(name))
	if err != nil {
		return nil, pathErr("listxattr", name, err)
	}
	names, err := f.v.ListXattr(ctx, a.Ino)
	return names, pathErr("listxattr", name, err)
}
