package file

import (
	"errors"
	"io"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Large objects bypass the page cache with direct I/O (O_DIRECT): a
// block of directAt bytes or more whose sync is deferred is written from
// the writer's buffer straight to the disk, and one read whole ahead of a
// sequential reader (object.ReadAhead) into aligned memory is read
// straight from it. The copy through the page cache costs more CPU than
// anything else in storing or fetching a block (on a virtual machine
// whose free memory goes back to the host, each fresh page-cache page is
// also a fault in the host), and the page cache of the block files held
// every byte a second time beside the mount's own caches. A written
// block still waits in the disk's own cache and its extents in the
// journal until the next Sync, as a buffered Put does.
//
// Direct I/O needs the memory, the file offset and the length aligned to
// the file system's logical block size: directAlign covers every Linux
// file system. Content that does not arrive aligned goes through an
// aligned staging buffer; the last piece of an object whose length is
// not a multiple of directAlign goes through the page cache. A file
// system without direct I/O (some network file systems) refuses it with
// EINVAL, at the open or at the first write or read: the Store then uses
// the page cache from there on.

// directAlign is the alignment direct I/O needs of memory, offset and
// length on every Linux file system (logical blocks are 512 or 4096
// bytes).
const directAlign = 4096

// directStaging is the size of the aligned buffer that collects content
// arriving in unaligned pieces.
const directStaging = 1 << 20

// staging holds aligned buffers of directStaging bytes.
var staging = sync.Pool{New: func() any { b := alignedBuffer(directStaging); return &b }}

// alignedBuffer returns n bytes whose first is aligned to directAlign.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+directAlign)
	skip := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % directAlign); r != 0 {
		skip = directAlign - r
	}
	return b[skip : skip+n : skip+n]
}

// isAligned reports whether p starts on a directAlign boundary.
func isAligned(p []byte) bool {
	return len(p) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(p)))%directAlign == 0
}

// directWriter writes, from offset 0, a file opened with O_DIRECT. An
// aligned piece goes to the disk as it is; any other is staged. Finish
// writes what is left and must be called after the last Write.
type directWriter struct {
	f     *os.File
	off   int64
	buf   *[]byte // staging buffer, taken on first need
	n     int     // bytes staged in *buf
	store *Store  // told when the file system refuses direct I/O
}

func (w *directWriter) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		if w.n == 0 && len(p) >= directAlign && isAligned(p) {
			m := len(p) &^ (directAlign - 1)
			if err := w.pwrite(p[:m]); err != nil {
				return total - len(p), err
			}
			p = p[m:]
			continue
		}
		if w.buf == nil {
			w.buf = staging.Get().(*[]byte)
		}
		c := copy((*w.buf)[w.n:], p)
		w.n += c
		p = p[c:]
		if w.n == len(*w.buf) {
			if err := w.pwrite(*w.buf); err != nil {
				return total - len(p), err
			}
			w.n = 0
		}
	}
	return total, nil
}

// Finish writes the staged content: its aligned part directly, the rest
// through the page cache, and gives the staging buffer back.
func (w *directWriter) Finish() error {
	if w.buf == nil {
		return nil
	}
	defer func() { staging.Put(w.buf); w.buf = nil }()
	b := (*w.buf)[:w.n]
	if m := len(b) &^ (directAlign - 1); m > 0 {
		if err := w.pwrite(b[:m]); err != nil {
			return err
		}
		b = b[m:]
	}
	if len(b) == 0 {
		return nil
	}
	if err := setDirect(w.f, false); err != nil {
		return err
	}
	return w.pwrite(b)
}

// pwrite writes all of p at w.off. A direct write the file system
// refuses is written through the page cache instead, and the Store
// stops asking for direct I/O.
func (w *directWriter) pwrite(p []byte) error {
	for len(p) > 0 {
		n, err := unix.Pwrite(int(w.f.Fd()), p, w.off)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EINVAL) && isDirect(w.f) {
			w.store.noDirect.Store(true)
			if err := setDirect(w.f, false); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return &os.PathError{Op: "write", Path: w.f.Name(), Err: err}
		}
		if n == 0 {
			return &os.PathError{Op: "write", Path: w.f.Name(), Err: unix.EIO}
		}
		w.off += int64(n)
		p = p[n:]
	}
	return nil
}

// isDirect reports whether f is open for direct I/O.
func isDirect(f *os.File) bool {
	fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	return err == nil && fl&unix.O_DIRECT != 0
}

// setDirect turns direct I/O on f on or off.
func setDirect(f *os.File, on bool) error {
	fd := f.Fd()
	fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
	if err == nil && (fl&unix.O_DIRECT != 0) != on {
		_, err = unix.FcntlInt(fd, unix.F_SETFL, fl^unix.O_DIRECT)
	}
	if err != nil {
		return &os.PathError{Op: "fcntl O_DIRECT", Path: f.Name(), Err: err}
	}
	return nil
}

// wholeFile is a large object opened for a read ahead (object.ReadAhead).
// A Read that asks for all of it into aligned memory (a block fetched
// into the chunk store's buffers) reads it with direct I/O, from the disk
// into that memory: no copy out of the page cache, and no second cached
// copy of bytes the mount caches itself. Any other Read reads the file as
// usual.
type wholeFile struct {
	*os.File
	size  int64
	store *Store
	done  bool // the direct read had it all
}

func (w *wholeFile) Read(p []byte) (int, error) {
	if w.done {
		return 0, io.EOF
	}
	if int64(len(p)) < w.size || !isAligned(p) {
		return w.File.Read(p)
	}
	if off, _ := w.File.Seek(0, io.SeekCurrent); off != 0 {
		return w.File.Read(p)
	}
	n, err := w.readDirect(p[:w.size])
	if err != nil {
		return 0, err
	}
	if n < int(w.size) {
		// The file is shorter than it was at the open; the next Read
		// goes on from there as usual.
		if _, err := w.File.Seek(int64(n), io.SeekStart); err != nil {
			return 0, err
		}
		return n, nil
	}
	w.done = true
	return n, nil
}

// readDirect fills p from offset 0: its aligned part with direct I/O
// (through the page cache if the file system refuses it), the rest
// through the page cache.
func (w *wholeFile) readDirect(p []byte) (int, error) {
	fd := int(w.Fd())
	n := 0
	if m := len(p) &^ (directAlign - 1); m > 0 {
		err := setDirect(w.File, true)
		if err == nil {
			n, err = preadFull(fd, p[:m], 0)
			if rerr := setDirect(w.File, false); rerr != nil {
				return 0, rerr
			}
		}
		switch {
		case errors.Is(err, unix.EINVAL): // no direct I/O here: all through the page cache
			w.store.noDirect.Store(true)
			n = 0
		case err != nil:
			return 0, &os.PathError{Op: "read", Path: w.Name(), Err: err}
		case n < m:
			return n, nil
		}
	}
	k, err := preadFull(fd, p[n:], int64(n))
	if err != nil {
		return 0, &os.PathError{Op: "read", Path: w.Name(), Err: err}
	}
	return n + k, nil
}

// preadFull reads into p at off until p is full or the file ends.
func preadFull(fd int, p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		k, err := unix.Pread(fd, p[n:], off+int64(n))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return n, err
		}
		if k == 0 {
			break
		}
		n += k
	}
	return n, nil
}
