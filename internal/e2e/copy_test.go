package e2e

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// countObjects counts the files under a local-directory bucket.
func countObjects(t *testing.T, bucket string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(bucket, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p != bucket {
			return nil // removed while walked: a deletion emptied it
		}
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCopyFileRangeSharesData copies with copy_file_range(2) and checks
// the bytes and that object storage gained no objects.
func TestCopyFileRangeSharesData(t *testing.T) {
	v := newVolume(t, "--block-size", "1M")
	v.mount(t)
	data := newRand(9).bytes(5<<20 + 123)
	write(t, v.path("src"), data)
	before := countObjects(t, v.bucket)

	src, err := os.Open(v.path("src"))
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(v.path("dst"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	offIn, offOut := int64(1000), int64(0)
	total := 0
	for total < len(data)-1000 {
		n, err := unix.CopyFileRange(int(src.Fd()), &offIn, int(dst.Fd()), &offOut, len(data), 0)
		if err != nil {
			t.Fatalf("copy_file_range: %v", err)
		}
		if n == 0 {
			break
		}
		total += n
	}
	// The copy is held back until close (vfs.CopyFileRange): the mount
	// shows it already, in stat and in reads.
	if fi, err := dst.Stat(); err != nil || fi.Size() != int64(total) {
		t.Errorf("fstat before close: %v, %v; want size %d", fi.Size(), err, total)
	}
	head := make([]byte, 4096)
	if n, err := dst.ReadAt(head, 0); n != len(head) || !bytes.Equal(head, data[1000:1000+len(head)]) {
		t.Errorf("read before close: %d bytes (%v), differing from the source range", n, err)
	}
	dst.Close()
	src.Close()
	if total != len(data)-1000 {
		t.Fatalf("copied %d bytes, want %d", total, len(data)-1000)
	}
	got, err := os.ReadFile(v.path("dst"))
	if err != nil || !bytes.Equal(got, data[1000:]) {
		t.Fatalf("copy differs from the source range (%v)", err)
	}
	if after := countObjects(t, v.bucket); after != before {
		t.Errorf("copy_file_range stored %d new objects; it must share the source's", after-before)
	}
	// The copy outlives its source.
	os.Remove(v.path("src"))
	v.umount(t)
	v.mount(t)
	got, err = os.ReadFile(v.path("dst"))
	if err != nil || !bytes.Equal(got, data[1000:]) {
		t.Fatalf("copy differs after the source was deleted and remounted (%v)", err)
	}
}

// TestFallocateModes checks fallocate(2) through the mount.
func TestFallocateModes(t *testing.T) {
	v := newVolume(t)
	v.mount(t)
	p := v.path("f")
	write(t, p, bytes.Repeat([]byte{0xAB}, 10000))
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	if err := unix.Fallocate(fd, 0, 0, 20000); err != nil {
		t.Fatalf("fallocate: %v", err)
	}
	if st, _ := f.Stat(); st.Size() != 20000 {
		t.Errorf("size after fallocate %d, want 20000", st.Size())
	}
	if err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 100, 200); err != nil {
		t.Fatalf("punch hole: %v", err)
	}
	if err := unix.Fallocate(fd, unix.FALLOC_FL_ZERO_RANGE, 9000, 2000); err != nil {
		t.Fatalf("zero range: %v", err)
	}
	want := append(bytes.Repeat([]byte{0xAB}, 10000), make([]byte, 10000)...)
	clear(want[100:300])
	clear(want[9000:11000])
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("content after punch and zero range differs (%v)", err)
	}
	wantErrno(t, "collapse range", unix.Fallocate(fd, unix.FALLOC_FL_COLLAPSE_RANGE, 0, 4096), syscall.EOPNOTSUPP)
}
