package metatest

import (
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
)

// testFallocate checks the fallocate modes on the slice lists they leave.
func testFallocate(t *testing.T, ns newStoreFunc) {
	c := setup(t, ns, meta.Config{})
	f := mkfile(t, c, meta.RootIno, "f")
	s := newSlice(t, c, 0, 10000)
	write(t, c, f.Ino, 0, s)

	wantErr(t, "allocate", c.Fallocate(root, f.Ino, 0, 0, 20000), 0)
	if a := getattr(t, c, f.Ino); a.Length != 20000 {
		t.Errorf("length after allocate: %d, want 20000", a.Length)
	}
	wantErr(t, "keep size", c.Fallocate(root, f.Ino, meta.FallocKeepSize, 0, 50000), 0)
	if a := getattr(t, c, f.Ino); a.Length != 20000 {
		t.Errorf("KEEP_SIZE changed the length to %d", a.Length)
	}
	wantErr(t, "punch hole", c.Fallocate(root, f.Ino, meta.FallocPunchHole|meta.FallocKeepSize, 100, 200), 0)
	wantChunk(t, c, f.Ino, 0, s, meta.Slice{Pos: 100, Len: 200})
	wantErr(t, "punch past the end", c.Fallocate(root, f.Ino, meta.FallocPunchHole|meta.FallocKeepSize, 19000, 5000), 0)
	wantChunk(t, c, f.Ino, 0, s, meta.Slice{Pos: 100, Len: 200}, meta.Slice{Pos: 19000, Len: 1000})
	wantErr(t, "zero range growing", c.Fallocate(root, f.Ino, meta.FallocZeroRange, 19500, 1000), 0)
	if a := getattr(t, c, f.Ino); a.Length != 20500 {
		t.Errorf("length after ZERO_RANGE: %d, want 20500", a.Length)
	}
	// A range across the chunk boundary gets one hole per chunk.
	wantErr(t, "zero range over chunks", c.Fallocate(root, f.Ino, meta.FallocZeroRange, meta.ChunkSize-10, 20), 0)
	wantChunk(t, c, f.Ino, 1, meta.Slice{Pos: 0, Len: 10})

	wantErr(t, "punch without keep size", c.Fallocate(root, f.Ino, meta.FallocPunchHole, 0, 1), syscall.EINVAL)
	wantErr(t, "collapse range", c.Fallocate(root, f.Ino, 0x08, 0, 4096), syscall.EOPNOTSUPP)
	wantErr(t, "zero length", c.Fallocate(root, f.Ino, 0, 0, 0), syscall.EINVAL)
	d := mkdir(t, c, meta.RootIno, "d")
	wantErr(t, "directory", c.Fallocate(root, d.Ino, 0, 0, 1), syscall.EISDIR)
}

// testCopyFileRange checks that copy_file_range shares slices with
// reference counts, and that shared data is deleted only when the last
// file naming it goes.
func testCopyFileRange(t *testing.T, ns newStoreFunc) {
	rec := &deleteRecorder{ids: map[uint64]uint32{}}
	c := setup(t, ns, meta.Config{DeleteSlice: rec.delete})
	src := mkfile(t, c, meta.RootIno, "src")
	s1 := newSlice(t, c, 0, 8000)
	s2 := newSlice(t, c, 2000, 1000) // covers part of s1
	write(t, c, src.Ino, 0, s1)
	write(t, c, src.Ino, 0, s2)
	dst := mkfile(t, c, meta.RootIno, "dst")

	n, got, err := c.CopyFileRange(root, src.Ino, 1000, dst.Ino, 500, 3000)
	wantErr(t, "copy", err, 0)
	if n != 3000 {
		t.Fatalf("copied %d bytes, want 3000", n)
	}
	// The attributes returned are dst's as stored after the copy.
	if a := getattr(t, c, dst.Ino); got == nil || *got != *a {
		t.Errorf("copy returned attributes %+v, want dst's stored %+v", got, a)
	}
	// dst [500,3500) = src [1000,4000) = s1[1000,2000) s2[0,1000) s1[3000,4000)
	wantChunk(t, c, dst.Ino, 0,
		meta.Slice{Pos: 500, Id: s1.Id, Size: 8000, Off: 1000, Len: 1000},
		meta.Slice{Pos: 1500, Id: s2.Id, Size: 1000, Off: 0, Len: 1000},
		meta.Slice{Pos: 2500, Id: s1.Id, Size: 8000, Off: 3000, Len: 1000})
	if a := getattr(t, c, dst.Ino); a.Length != 3500 {
		t.Errorf("dst length %d, want 3500", a.Length)
	}
	// Copy past the source's end copies what there is.
	if n, a, err := c.CopyFileRange(root, src.Ino, 7000, dst.Ino, 10000, 5000); err != nil || n != 1000 || a.Length != 11000 {
		t.Errorf("copy at the end: %d, %v; want 1000 bytes and a length of 11000 (attributes %+v)", n, err, a)
	}
	if n, a, err := c.CopyFileRange(root, src.Ino, 9000, dst.Ino, 0, 10); err != nil || n != 0 || a.Length != 11000 {
		t.Errorf("copy past the end: %d, %v; want 0 and dst unchanged (attributes %+v)", n, err, a)
	}
	_, _, err = c.CopyFileRange(root, src.Ino, 0, src.Ino, 100, 1000)
	wantErr(t, "overlapping copy in one file", err, syscall.EINVAL)

	flush := func() {
		t.Helper()
		if err := c.FlushDeletions(root); err != nil {
			t.Fatal(err)
		}
	}
	wantErr(t, "unlink src", c.Unlink(root, meta.RootIno, []byte("src")), 0)
	flush()
	if rec.has(s1.Id) || rec.has(s2.Id) {
		t.Fatalf("slices still named by dst were deleted: %v", rec.deleted())
	}
	wantErr(t, "unlink dst", c.Unlink(root, meta.RootIno, []byte("dst")), 0)
	flush()
	if !rec.has(s1.Id) || !rec.has(s2.Id) {
		t.Fatalf("slices named by no file were not deleted: %v", rec.deleted())
	}
}
