package file

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/testserver"
)

// pieces is a reader that tells its length, as a block's bytes.Reader
// does, but hands its content out in small pieces of any alignment.
type pieces struct {
	io.Reader
	n int
}

func (p pieces) Len() int { return p.n }

// TestDirectPut stores large deferred objects of lengths that are and are
// not multiples of the direct I/O alignment, from aligned and unaligned
// memory and in pieces, and reads each back.
func TestDirectPut(t *testing.T) {
	ctx := object.DeferSync(context.Background())
	src := alignedBuffer(5<<20 + directAlign)
	for i := range src {
		src[i] = byte(rand.Uint32())
	}
	tests := []struct {
		name     string
		off, n   int
		inPieces bool
	}{
		{"full block", 0, 4 << 20, false},
		{"1 MiB", 0, 1 << 20, false},
		{"odd tail", 0, 4<<20 + 100, false},
		{"one short of a page", 0, 3<<20 + directAlign - 1, false},
		{"unaligned memory", 1, 4 << 20, false},
		{"unaligned memory and tail", 7, 2<<20 + 5, false},
		{"in pieces", 0, 4 << 20, true},
		{"in pieces with a tail", 3, 1<<20 + 1234, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			want := src[tt.off : tt.off+tt.n]
			var r io.Reader = bytes.NewReader(want)
			if tt.inPieces {
				r = pieces{iotest.HalfReader(bytes.NewReader(want)), len(want)}
			}
			if !s.wantsDirect(r) {
				t.Fatalf("a deferred Put of %d bytes does not ask for direct I/O", tt.n)
			}
			if err := s.Put(ctx, "chunks/0/0/1_0_x", r); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(s.dir, "chunks/0/0/1_0_x"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("read back %d bytes that differ from the %d put", len(got), len(want))
			}
			if err := s.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDirectPutSkipsPageCache checks that a full block's Put went to the
// disk directly: none of its pages are in the page cache afterwards, as
// they all would be after a buffered write.
func TestDirectPutSkipsPageCache(t *testing.T) {
	s := newDiskStore(t)
	data := alignedBuffer(4 << 20)
	for i := range data {
		data[i] = byte(i)
	}
	if err := s.Put(object.DeferSync(context.Background()), "blk", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if s.noDirect.Load() {
		noDirectHere(t, s)
	}
	if n := residentPages(t, filepath.Join(s.dir, "blk")); n != 0 {
		t.Fatalf("%d pages of a block written with direct I/O are in the page cache, want 0", n)
	}
	// The same Put without a deferred sync goes through the page cache,
	// which is what the check above would see had direct I/O not been
	// used.
	if err := s.Put(context.Background(), "buffered", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if n := residentPages(t, filepath.Join(s.dir, "buffered")); n == 0 {
		t.Fatal("no page of a buffered Put is in the page cache: the check cannot tell direct I/O from buffered")
	}
}

// noDirectHere skips t, loudly, because the file system of the test's
// temporary directory refuses direct I/O (its Puts go through the page
// cache), and fails it under CI=true, whose temporary directory is on a
// disk file system that takes direct I/O: there a refusal is a defect.
func noDirectHere(t *testing.T, s *Store) {
	t.Helper()
	testserver.Missing(t, "direct I/O on the file system of "+s.dir,
		"set TMPDIR to a directory on a disk file system such as ext4 or xfs")
}

// newDiskStore returns a Store in a temporary directory on a disk file
// system, or calls noDirectHere: tmpfs and ramfs take O_DIRECT, and
// unaligned direct writes, but keep every page in memory anyway, so what
// these tests check of direct I/O does not hold there.
func newDiskStore(t *testing.T) *Store {
	t.Helper()
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(s.dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC {
		noDirectHere(t, s)
	}
	return s
}

// residentPages counts the pages of the file at p in the page cache.
func residentPages(t *testing.T, p string) int {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestDirectWriteRefused checks the fallback when the file system refuses
// a direct write: the content is written through the page cache, whole,
// and the store stops asking for direct I/O.
func TestDirectWriteRefused(t *testing.T) {
	s := newDiskStore(t)
	f, direct, err := s.openInPlace(filepath.Join(s.dir, "blk"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !direct || !isDirect(f) {
		noDirectHere(t, s)
	}
	w := &directWriter{f: f, store: s}
	buf := alignedBuffer(2 * directAlign)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	// Memory off the alignment makes every file system refuse the write
	// with EINVAL, as one without direct I/O refuses any.
	want := buf[1 : 1+directAlign]
	if err := w.pwrite(want); err != nil {
		t.Fatalf("write refused for direct I/O: %v, want it written through the page cache", err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if isDirect(f) || !s.noDirect.Load() {
		t.Fatal("after a refused direct write the file is still direct, or the store still asks for it")
	}
	if s.wantsDirect(bytes.NewReader(make([]byte, 4<<20))) {
		t.Fatal("the store asks for direct I/O after the file system refused it")
	}
	got, err := os.ReadFile(f.Name())
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes (%v) that differ from the %d written", len(got), err, len(want))
	}
}

// TestDirectGet reads large objects whole, ahead of a reader and not,
// into aligned and unaligned memory, and checks the bytes; and that a
// read ahead into aligned memory left the page cache empty, while any
// other read fills it.
func TestDirectGet(t *testing.T) {
	s := newDiskStore(t)
	for _, n := range []int{4 << 20, 4<<20 + 100, 1<<20 + 1} {
		want := make([]byte, n)
		for i := range want {
			want[i] = byte(rand.Uint32())
		}
		key := fmt.Sprintf("blk%d", n)
		p := filepath.Join(s.dir, key)
		if err := s.Put(context.Background(), key, bytes.NewReader(want)); err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			ahead, aligned bool
		}{{true, true}, {true, false}, {false, true}} {
			dropCache(t, p) // as after a restart: the buffered Put left it there
			ctx := context.Background()
			if tt.ahead {
				ctx = object.ReadAhead(ctx)
			}
			buf := alignedBuffer(n + 1)
			if !tt.aligned {
				buf = buf[1:]
			}
			buf = buf[:n]
			r, err := s.Get(ctx, key, 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.ReadFull(r, buf)
			if err == nil {
				if k, _ := r.Read(make([]byte, 1)); k != 0 {
					err = io.ErrShortBuffer
				}
			}
			r.Close()
			if err != nil || !bytes.Equal(buf, want) {
				t.Fatalf("%d bytes read whole (%+v): %v, or the bytes differ", n, tt, err)
			}
			if s.noDirect.Load() {
				noDirectHere(t, s)
			}
			direct := tt.ahead && tt.aligned && n%directAlign == 0
			if k := residentPages(t, p); direct != (k == 0) {
				t.Fatalf("%d bytes read whole (%+v): %d pages in the page cache after", n, tt, k)
			}
		}
	}
}

// dropCache asks the kernel to drop the page cache of the file at p.
func dropCache(t *testing.T, p string) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}
