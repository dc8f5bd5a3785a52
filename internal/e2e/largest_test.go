package e2e

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sluicefs/sluice/internal/meta"
)

// largestFileCase checks meta.MaxFileSize through a mount, at every entry
// that can set a file's extent: pwrite (at the bound, across it: a short
// write, and at offsets a 32-bit chunk index would wrap onto the start of
// the file), ftruncate, fallocate in each mode, copy_file_range (source
// and destination), and lseek with SEEK_DATA and SEEK_HOLE far out. The
// file's first bytes never change.
func largestFileCase(t *testing.T, dir string) {
	const maxSize = int64(meta.MaxFileSize)
	head := bytes.Repeat([]byte("0123456789abcdef"), 1024) // 16 KiB
	p := filepath.Join(dir, "f")
	write(t, p, head)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	x := bytes.Repeat([]byte("X"), 4096)
	for _, off := range []int64{1<<59 + 4096, 1<<58 + 4096, maxSize, 1 << 62} {
		n, err := unix.Pwrite(fd, x, off)
		if !errors.Is(err, syscall.EFBIG) {
			t.Errorf("pwrite at %d: %d bytes, %v; want EFBIG", off, n, err)
		}
	}
	// A write across the bound writes what fits, as on a local file system.
	if n, err := unix.Pwrite(fd, x, maxSize-10); err != nil || n != 10 {
		t.Errorf("pwrite across the largest size: %d bytes, %v; want 10", n, err)
	}
	tail := make([]byte, 20)
	if n, err := unix.Pread(fd, tail, maxSize-10); err != nil || n != 10 || !bytes.Equal(tail[:n], x[:10]) {
		t.Errorf("pread of the last bytes: %d bytes %q, %v", n, tail[:max(n, 0)], err)
	}
	for _, n := range []int64{maxSize + 1, 1<<59 + 4096, 1 << 62} {
		wantErrno(t, "ftruncate past the largest size", unix.Ftruncate(fd, n), syscall.EFBIG)
	}
	modes := []uint32{0, unix.FALLOC_FL_KEEP_SIZE, unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, unix.FALLOC_FL_ZERO_RANGE}
	for _, mode := range modes {
		wantErrno(t, "fallocate across the largest size", unix.Fallocate(fd, mode, maxSize-1, 2), syscall.EFBIG)
		wantErrno(t, "fallocate at 2^59", unix.Fallocate(fd, mode, 1<<59, 4096), syscall.EFBIG)
	}
	dst, err := os.Create(filepath.Join(dir, "dst"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	offIn, offOut := int64(0), maxSize-10
	if _, err := unix.CopyFileRange(fd, &offIn, int(dst.Fd()), &offOut, 4096, 0); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("copy_file_range across the largest size: %v, want EFBIG", err)
	}
	offIn, offOut = 1<<59+4096, 0
	if n, err := unix.CopyFileRange(fd, &offIn, int(dst.Fd()), &offOut, 4096, 0); err != nil || n != 0 {
		t.Errorf("copy_file_range from 2^59 + 4096: %d bytes, %v; want 0", n, err)
	}
	for _, whence := range []int{unix.SEEK_DATA, unix.SEEK_HOLE} {
		if off, err := unix.Seek(fd, 1<<59+4096, whence); !errors.Is(err, syscall.ENXIO) {
			t.Errorf("lseek(%d) past the end: %d, %v; want ENXIO", whence, off, err)
		}
	}
	got := make([]byte, len(head))
	if n, err := unix.Pread(fd, got, 0); err != nil || n != len(head) || !bytes.Equal(got, head) {
		t.Fatalf("the first %d bytes changed (read %d, %v)", len(head), n, err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if st, err := os.Stat(p); err != nil || st.Size() != maxSize {
		t.Errorf("size after writing the last bytes: %v, %v; want %d", st, err, maxSize)
	}
}

// replacedWhileOpenCase: fstat(2) of descriptors of a directory and a
// file that a rename replaced answers, with no link left (generic/035 of
// the Linux file-system tests), with the trash on and off.
func replacedWhileOpenCase(t *testing.T, dir string) {
	for _, name := range []string{"src", "dst"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(dir, "f1"), []byte("one"))
	write(t, filepath.Join(dir, "f2"), []byte("two"))
	d, err := os.Open(filepath.Join(dir, "dst"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	f, err := os.Open(filepath.Join(dir, "f2"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, r := range [][2]string{{"src", "dst"}, {"f1", "f2"}} {
		if err := unix.Rename(filepath.Join(dir, r[0]), filepath.Join(dir, r[1])); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range []*os.File{d, f} {
		var st unix.Stat_t
		if err := unix.Fstat(int(h.Fd()), &st); err != nil {
			t.Errorf("fstat of the replaced %s: %v", h.Name(), err)
		} else if st.Nlink != 0 {
			t.Errorf("fstat of the replaced %s: %d links, want 0", h.Name(), st.Nlink)
		}
	}
	if got, err := io.ReadAll(f); err != nil || string(got) != "two" {
		t.Errorf("the replaced file reads %q, %v", got, err)
	}
}
