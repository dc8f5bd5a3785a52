package metatest

import (
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
)

// testLargestFile checks meta.MaxFileSize at every entry that sets a
// file's extent (truncation, slice commits, fallocate, copy_file_range):
// up to it works, on the engine's last chunk index too; one byte past it,
// and offsets that a 32-bit chunk index would wrap onto the start of the
// file, fail with EFBIG and change nothing.
func testLargestFile(t *testing.T, ns newStoreFunc) {
	rec := &deleteRecorder{ids: map[uint64]uint32{}}
	c := setup(t, ns, meta.Config{DeleteSlice: rec.delete})
	const maxSize = uint64(meta.MaxFileSize)
	lastIdx := uint32(maxSize/meta.ChunkSize - 1)
	f := mkfile(t, c, meta.RootIno, "f")
	first := newSlice(t, c, 0, 4096)
	write(t, c, f.Ino, 0, first)

	// Past the largest size: a truncation, a wrapped 2^59 + 4096 (the
	// offset that landed at 4096), and offsets near 2^64.
	for _, n := range []uint64{maxSize + 1, 1<<59 + 4096, 1 << 62, 1<<64 - 1} {
		_, err := c.SetAttr(root, f.Ino, meta.SetSize, &meta.Attr{Length: n})
		wantErr(t, "truncate past the largest size", err, syscall.EFBIG)
	}
	if a := getattr(t, c, f.Ino); a.Length != 4096 {
		t.Fatalf("length after refused truncations: %d, want 4096", a.Length)
	}
	truncate(t, c, f.Ino, maxSize)
	truncate(t, c, f.Ino, 4096)
	// Chunk 0 holds first and, after shrinks, holes over the cut part;
	// nothing past the largest size may land on it.
	intact := func(what string) {
		t.Helper()
		ss, err := c.ReadChunk(root, f.Ino, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range ss {
			if i == 0 && s != first || i > 0 && s.Id != 0 {
				t.Fatalf("%s: chunk 0 is %+v, want %+v and holes", what, ss, first)
			}
		}
	}
	intact("after truncations")

	// A slice commit in the last chunk, up to its last byte, and one past.
	last := newSlice(t, c, meta.ChunkSize-4096, 4096)
	if n := write(t, c, f.Ino, lastIdx, last); n != maxSize {
		t.Fatalf("length after writing the last byte: %d, want %d", n, maxSize)
	}
	wantChunk(t, c, f.Ino, lastIdx, last)
	intact("after writing the last chunk")
	for _, idx := range []uint32{lastIdx + 1, 1<<32 - 1} {
		_, err := Write(root, c, f.Ino, idx, newSlice(t, c, 0, 1))
		wantErr(t, "a slice past the largest size", err, syscall.EFBIG)
	}
	intact("after refused slices")
	// Cutting the file back drops the last chunk and frees its slice.
	truncate(t, c, f.Ino, 4096)
	wantChunk(t, c, f.Ino, lastIdx)
	if err := c.FlushDeletions(root); err != nil {
		t.Fatal(err)
	}
	if !rec.has(last.Id) || rec.has(first.Id) {
		t.Fatalf("after truncating the last chunk away: deleted %v, want %d and not %d", rec.deleted(), last.Id, first.Id)
	}

	for _, mode := range []uint32{0, meta.FallocKeepSize, meta.FallocPunchHole | meta.FallocKeepSize, meta.FallocZeroRange} {
		wantErr(t, "fallocate across the largest size", c.Fallocate(root, f.Ino, mode, maxSize-1, 2), syscall.EFBIG)
		wantErr(t, "fallocate at a wrapping offset", c.Fallocate(root, f.Ino, mode, 1<<59, 4096), syscall.EFBIG)
		wantErr(t, "fallocate ending past 2^64", c.Fallocate(root, f.Ino, mode, 1<<64-10, 20), syscall.EFBIG)
	}
	intact("after refused fallocates")
	wantErr(t, "fallocate of the last byte", c.Fallocate(root, f.Ino, 0, maxSize-1, 1), 0)
	if a := getattr(t, c, f.Ino); a.Length != maxSize {
		t.Fatalf("length after allocating the last byte: %d, want %d", a.Length, maxSize)
	}
	truncate(t, c, f.Ino, 4096)

	dst := mkfile(t, c, meta.RootIno, "dst")
	for _, off := range []uint64{maxSize - 100, 1 << 59, 1<<64 - 10} {
		_, _, err := c.CopyFileRange(root, f.Ino, 0, dst.Ino, off, 4096)
		wantErr(t, "copy_file_range past the largest size", err, syscall.EFBIG)
	}
	n, a, err := c.CopyFileRange(root, f.Ino, 1<<59, dst.Ino, 0, 4096)
	if err != nil || n != 0 || a.Length != 0 {
		t.Fatalf("copy_file_range from a wrapping source offset: %d bytes, %v, %+v; want 0 and dst empty", n, err, a)
	}
	n, a, err = c.CopyFileRange(root, f.Ino, 0, dst.Ino, maxSize-4096, 4096)
	if err != nil || n != 4096 || a.Length != maxSize {
		t.Fatalf("copy_file_range onto the last bytes: %d bytes, %v, %+v; want 4096 and length %d", n, err, a, maxSize)
	}
	wantChunk(t, c, dst.Ino, lastIdx, meta.Slice{Pos: meta.ChunkSize - 4096, Id: first.Id, Size: 4096, Len: 4096})
	wantChunk(t, c, dst.Ino, 0)
}
