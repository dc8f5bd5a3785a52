package vfs

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/object"
)

// Data through a handle: read, write, setuid/setgid dropping on write,
// fallocate and copy_file_range, and the access times reads record.

// readRetries bounds how often a read whose block is gone reads the slice
// lists again. Each retry reads them from the engine; a block still
// missing from a list just read is lost, not moved.
const readRetries = 8

// Read reads up to len(p) bytes at off into p and returns the number of
// bytes read; fewer at the end of the file.
func (v *VFS) Read(ctx context.Context, fh uint64, off uint64, p []byte) (int, error) {
	pieces, release, err := v.read(ctx, fh, off, p, false)
	defer release()
	if err != nil {
		return 0, err
	}
	return chunk.Gather(p, pieces), nil
}

// ReadVec is Read that returns the bytes as pieces, in order, each either
// a part of p or memory of the block cache, which stays unchanged until
// release is called: a reply can then be written from the cached blocks
// without copying them into p first. Fewer than len(p) bytes in all at
// the end of the file. The caller must call release once, also after an
// error; the memory of cached blocks is reused only after that.
func (v *VFS) ReadVec(ctx context.Context, fh uint64, off uint64, p []byte) (pieces [][]byte, release func(), err error) {
	return v.read(ctx, fh, off, p, true)
}

func noRelease() {}

func (v *VFS) read(ctx context.Context, fh uint64, off uint64, p []byte, vec bool) ([][]byte, func(), error) {
	h, err := v.handle(fh)
	if err != nil {
		return nil, noRelease, err
	}
	if h.internal != nil {
		n, err := h.internal.read(ctx, off, p)
		if err != nil {
			return nil, noRelease, err
		}
		return [][]byte{p[:n]}, noRelease, nil
	}
	if h.file == nil {
		return nil, noRelease, syscall.EBADF
	}
	if h.flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		return nil, noRelease, syscall.EBADF
	}
	f := h.file
	f.mu.Lock()
	copying := f.mu.copy != nil
	// No byte lies past the largest file size (a file an older version
	// let grow further reads as ending there).
	length := min(max(f.mu.length, f.pendingEndLocked()), meta.MaxFileSize)
	f.mu.Unlock()
	if copying {
		// The copy's slices are not in the file's lists yet.
		if err := f.applyHeld(ctx); err != nil {
			return nil, noRelease, err
		}
	}
	if off >= length {
		return nil, noRelease, nil
	}
	n := min(uint64(len(p)), length-off)
	f.reader.Readahead(ctx, f, off, n, length)
	read := func() ([][]byte, func(), error) {
		if vec {
			return f.writer.ReadVec(ctx, f, p[:n], off)
		}
		return [][]byte{p[:n]}, noRelease, f.writer.Read(ctx, f, p[:n], off)
	}
	pieces, release, err := read()
	for retry := 0; retry < readRetries && errors.Is(err, object.ErrNotFound); retry++ {
		// A block named by a cached slice list is gone: another mount
		// compacted the chunk and deleted what it replaced. Read the
		// lists again (again if it compacted once more meanwhile).
		release()
		f.forgetSlices()
		if retry > 0 {
			time.Sleep(time.Duration(retry) * 5 * time.Millisecond) // an engine's cache may lag a moment
		}
		pieces, release, err = read()
	}
	if err != nil {
		release()
		return nil, noRelease, err
	}
	if len(pieces) > maxReadPieces {
		chunk.Gather(p, pieces)
		release()
		pieces, release = [][]byte{p[:n]}, noRelease
	}
	v.accessed(ctx, h)
	return pieces, release, nil
}

// maxReadPieces bounds the pieces of a ReadVec, far below the system's
// limit on a writev (1,024): a read of a file made of many small slices
// is gathered into its buffer instead.
const maxReadPieces = 64

// WriteLimit returns how many of n bytes a write at off may write: all of
// them when they end at or before meta.MaxFileSize, those before it when
// they cross it (a local file system cuts such a write short too), and
// EFBIG when the write starts at or past it.
func WriteLimit(off uint64, n int) (int, error) {
	if off >= meta.MaxFileSize {
		return 0, syscall.EFBIG
	}
	return int(min(uint64(n), meta.MaxFileSize-off)), nil
}

// Write writes data at off. It writes all of data or, failing, none:
// once the bytes are in the file's buffers they will be committed, so a
// cancellation of ctx (an interrupted request) counts only before. A
// write that would reach past meta.MaxFileSize fails with EFBIG (see
// WriteLimit for one cut short instead).
func (v *VFS) Write(ctx context.Context, fh uint64, off uint64, data []byte) error {
	h, err := v.handle(fh)
	if err != nil {
		return err
	}
	if h.internal != nil {
		return h.internal.write(ctx, data)
	}
	if h.file == nil || h.flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		return syscall.EBADF
	}
	if n, err := WriteLimit(off, len(data)); err != nil || n < len(data) {
		return syscall.EFBIG
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	f := h.file
	f.mu.Lock()
	// Times set after earlier writes must not cover this one's, a copy
	// held on f must not land over it, and one held from f must not see
	// it.
	flush := f.mu.heldTimes || f.mu.copy != nil || len(f.mu.copiedTo) > 0
	f.mu.Unlock()
	if flush {
		if err := f.flush(ctx); err != nil {
			return err
		}
	}
	if err := f.writer.Write(context.WithoutCancel(ctx), data, off); err != nil {
		return err
	}
	f.mu.Lock()
	f.mu.length = max(f.mu.length, off+uint64(len(data)))
	f.mu.lastWrite = time.Now()
	f.mu.Unlock()
	return nil
}

// HasSetID reports whether the handle's file has setuid or setgid bits,
// as this mount last saw it.
func (v *VFS) HasSetID(fh uint64) bool {
	h, err := v.handle(fh)
	return err == nil && h.hasSetID()
}

// hasSetID reports whether h is of a regular file with setuid or setgid
// bits, as this mount last saw it.
func (h *handle) hasSetID() bool {
	if h.file == nil {
		return false
	}
	h.file.mu.Lock()
	defer h.file.mu.Unlock()
	return h.file.mu.attr != nil && meta.HasSetID(h.file.mu.attr.Mode)
}

// KillSetID drops setuid, and setgid when the group may execute, from
// the handle's file, as a write or truncation by a process without
// CAP_FSETID must: the FUSE kernel leaves it to the file system when it
// hands that job over (FUSE_HANDLE_KILLPRIV_V2), which spares it a
// GETXATTR before every write. It costs a transaction only when the mode
// this mount last saw of the file has such bits.
func (v *VFS) KillSetID(ctx context.Context, fh uint64) error {
	h, err := v.handle(fh)
	if err != nil {
		return err
	}
	if !h.hasSetID() {
		return nil
	}
	if _, err := v.SetAttr(ctx, h.ino, meta.SetKillSetID|meta.SetViaHandle, &meta.Attr{}); err != nil {
		return err
	}
	// The kernel does not expect the mode to change under a write: make
	// it ask, so stat(2) right after the write shows the bits gone.
	v.invalidateInode(h.ino, false)
	return nil
}

// Fallocate applies fallocate(2) (meta.Fallocate modes) to the handle's
// file, after committing its buffered writes so that they land before a
// hole punched over them.
func (v *VFS) Fallocate(ctx context.Context, fh uint64, mode uint32, off, length uint64) error {
	h, err := v.writableFile(fh)
	if err != nil {
		return err
	}
	if err := h.file.flush(ctx); err != nil {
		return err
	}
	if err := v.meta.Fallocate(ctx, h.ino, mode, off, length); err != nil {
		return err
	}
	return v.refresh(ctx, h.file)
}

// CopyFileRange copies a range between two open files by sharing their
// stored slices (copy_file_range(2)); nothing is copied in object storage.
//
// When the metadata client can (CopyCommitter), a copy into another file
// is answered at once and held back, as buffered writes are: it commits
// at close, fsync or heldDelay later, in one transaction with the owner,
// mode and times that cp -a sets right after it (or before anything else
// reads, writes or changes either file through this mount). This mount
// sees the copy at once; other mounts at the commit, as they see writes.
// The bytes copied are counted from the source's length as this mount
// knows it; a failure to commit (a full quota) is reported by the close
// or fsync, as for writes.
func (v *VFS) CopyFileRange(ctx context.Context, fhIn, offIn, fhOut, offOut, length uint64) (uint64, error) {
	in, err := v.handle(fhIn)
	if err != nil {
		return 0, err
	}
	if in.file == nil || in.flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		return 0, syscall.EBADF
	}
	out, err := v.writableFile(fhOut)
	if err != nil {
		return 0, err
	}
	if out.flags&syscall.O_APPEND != 0 {
		return 0, syscall.EBADF
	}
	if err := meta.CheckCopyRange(in.ino, offIn, out.ino, offOut, length); err != nil {
		return 0, err
	}
	for _, f := range []*openFile{in.file, out.file} {
		if err := f.flush(ctx); err != nil {
			return 0, err
		}
	}
	if n, ok := v.holdCopy(ctx, in, offIn, out, offOut, length); ok {
		return n, nil
	}
	n, a, err := v.meta.CopyFileRange(ctx, in.ino, offIn, out.ino, offOut, length)
	if err != nil {
		return 0, err
	}
	v.refreshed(out.file, a)
	return n, nil
}

// writableFile returns the handle fh of a regular file open for writing.
func (v *VFS) writableFile(fh uint64) (*handle, error) {
	h, err := v.handle(fh)
	if err != nil {
		return nil, err
	}
	if h.file == nil || h.flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		return nil, syscall.EBADF
	}
	return h, nil
}

// accessed records the first read through a handle as an access, for the
// atime mode of the mount. A failure to record it does not fail the read.
func (v *VFS) accessed(ctx context.Context, h *handle) {
	if h.read.Swap(true) {
		return
	}
	v.touchAtime(ctx, h.ino, h.file, nil)
}

// touchAtime records an access to ino, open as f (nil for a directory),
// whose attributes are a (nil: the engine's). Attribute changes held back
// on f were asked for before the access (a utimes after a write, then a
// read): they land first, or they would overwrite its atime when they do.
func (v *VFS) touchAtime(ctx context.Context, ino meta.Ino, f *openFile, a *meta.Attr) {
	if !v.meta.RecordsAtime() {
		return
	}
	if f != nil && f.holds() {
		if err := f.flush(ctx); err != nil {
			f.log().Warn("apply held-back attribute changes before an access", "ino", ino, "err", err)
		}
		a = nil
	}
	if err := v.meta.TouchAtime(ctx, ino, a); err != nil {
		v.log().Debug("record an access time", "ino", ino, "err", err)
	}
}
