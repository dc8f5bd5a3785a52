package vfstest

import (
	"bytes"
	"fmt"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/vfs"
)

// fileOp is one step applied to a file and to its model.
type fileOp struct {
	off      uint64
	data     []byte
	truncate bool // set the length to off instead of writing
	flush    bool // commit before the next step
}

func writeAt(off uint64, data []byte) fileOp { return fileOp{off: off, data: data} }
func truncateTo(n uint64) fileOp             { return fileOp{off: n, truncate: true} }
func flushed(op fileOp) fileOp               { op.flush = true; return op }

// applyModel applies op to the model content.
func applyModel(model []byte, op fileOp) []byte {
	if op.truncate {
		if op.off <= uint64(len(model)) {
			return model[:op.off]
		}
		return append(model, make([]byte, op.off-uint64(len(model)))...)
	}
	if end := op.off + uint64(len(op.data)); end > uint64(len(model)) {
		model = append(model, make([]byte, end-uint64(len(model)))...)
	}
	copy(model[op.off:], op.data)
	return model
}

var fileTests = []test{
	{"ReadWrite", testReadWrite},
	{"ReadAtAndPastEnd", testReadAtEnd},
	{"CreateOpensExisting", testCreateOpensExisting},
	{"OpenTruncates", testOpenTruncates},
	{"AttrsShowBufferedWrites", testAttrsShowBufferedWrites},
	{"CopyFileRange", testCopyFileRange},
	{"LargestFile", testLargestFile},
	{"PunchHole", testPunchHole},
}

// testReadWrite writes, overwrites and truncates files in patterns that
// cross block and chunk boundaries and leave holes, and checks the
// content against a model: through the writing handle before any commit
// (read-your-writes), through a second handle of the same mount, and
// after closing and opening again.
func testReadWrite(t *testing.T, fs *fsys) {
	const bs = BlockSize
	cases := []struct {
		name string
		ops  []fileOp
	}{
		{"small", []fileOp{writeAt(0, []byte("hello"))}},
		{"blocks", []fileOp{writeAt(0, pattern(3*bs+17, 1))}},
		{"sequential pieces", []fileOp{writeAt(0, pattern(1000, 2)), writeAt(1000, pattern(bs, 3)), writeAt(1000+bs, pattern(5, 4))}},
		{"hole then data", []fileOp{writeAt(5*bs+3, []byte("tail"))}},
		{"overwrite middle", []fileOp{writeAt(0, pattern(2*bs, 5)), writeAt(bs-10, pattern(20, 6))}},
		{"overwrite committed", []fileOp{flushed(writeAt(0, pattern(2*bs, 7))), writeAt(100, pattern(bs, 8))}},
		{"backwards", []fileOp{writeAt(2*bs, pattern(bs, 9)), writeAt(bs, pattern(bs, 10)), writeAt(0, pattern(bs, 11))}},
		{"across a chunk boundary", []fileOp{writeAt(meta.ChunkSize-7, pattern(20, 12))}},
		{"shrink", []fileOp{flushed(writeAt(0, pattern(3*bs, 13))), truncateTo(bs + 5)}},
		{"shrink then grow", []fileOp{flushed(writeAt(0, pattern(2*bs, 14))), truncateTo(10), writeAt(bs, []byte("x"))}},
		{"extend", []fileOp{writeAt(0, []byte("abc")), truncateTo(bs + 1)}},
		{"write after truncate to zero", []fileOp{flushed(writeAt(0, pattern(bs, 15))), truncateTo(0), writeAt(3, []byte("new"))}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := &fsys{t: t, v: fs.v}
			ctx := asRoot()
			a, fh, err := fs.v.Create(ctx, meta.RootIno, []byte(fmt.Sprint("f", i)), 0o644, 0, syscall.O_RDWR|syscall.O_CREAT)
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			var model []byte
			for _, op := range tc.ops {
				if op.truncate {
					if _, err := fs.v.SetAttr(ctx, a.Ino, meta.SetSize|meta.SetViaHandle, &meta.Attr{Length: op.off}); err != nil {
						t.Fatalf("truncate to %d: %v", op.off, err)
					}
				} else {
					fs.write(fh, op.off, op.data)
				}
				if op.flush {
					if err := fs.v.Flush(ctx, fh, 0); err != nil {
						t.Fatalf("flush: %v", err)
					}
				}
				model = applyModel(model, op)
			}
			check := func(how string, got []byte) {
				t.Helper()
				if !bytes.Equal(got, model) {
					t.Fatalf("%s: %d bytes differ from the %d written (first difference at %d)", how, len(got), len(model), firstDiff(got, model))
				}
			}
			check("same handle before commit", fs.readAll(fh))
			other := fs.open(a.Ino, syscall.O_RDONLY)
			check("second handle before commit", fs.readAll(other))
			fs.close(other)
			fs.close(fh)
			check("after reopen", fs.content(a.Ino))
			if got := fs.lookup(meta.RootIno, fmt.Sprint("f", i)).Length; got != uint64(len(model)) {
				t.Fatalf("length %d, want %d", got, len(model))
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// testReadAtEnd: a read at or past the end returns nothing, one across it
// returns the bytes up to it.
func testReadAtEnd(t *testing.T, fs *fsys) {
	ino := fs.create(meta.RootIno, "f", 0o644, []byte("0123456789"))
	fh := fs.open(ino, syscall.O_RDONLY)
	defer fs.close(fh)
	cases := []struct {
		off  uint64
		n    int
		want string
	}{
		{0, 4, "0123"},
		{8, 10, "89"},
		{10, 5, ""},
		{1 << 40, 5, ""},
		{3, 0, ""},
	}
	for _, tc := range cases {
		if got := string(fs.read(fh, tc.off, tc.n)); got != tc.want {
			t.Errorf("read %d at %d: %q, want %q", tc.n, tc.off, got, tc.want)
		}
	}
}

// testCreateOpensExisting: a create that finds its name taken opens the
// file unless O_EXCL (the kernel believed the name missing), truncating
// with O_TRUNC; it fails for a directory.
func testCreateOpensExisting(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, []byte("old content"))
	_, _, err := fs.v.Create(ctx, meta.RootIno, []byte("f"), 0o644, 0, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL)
	wantErrno(t, "create O_EXCL over a file", err, syscall.EEXIST)

	a, fh, err := fs.v.Create(ctx, meta.RootIno, []byte("f"), 0o644, 0, syscall.O_RDWR|syscall.O_CREAT)
	if err != nil {
		t.Fatalf("create over a file: %v", err)
	}
	if a.Ino != ino {
		t.Fatalf("create over a file opened inode %d, want %d", a.Ino, ino)
	}
	if got := string(fs.readAll(fh)); got != "old content" {
		t.Fatalf("create over a file without O_TRUNC reads %q", got)
	}
	fs.close(fh)

	_, fh, err = fs.v.Create(ctx, meta.RootIno, []byte("f"), 0o644, 0, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC)
	if err != nil {
		t.Fatalf("create O_TRUNC over a file: %v", err)
	}
	fs.close(fh)
	if got := fs.content(ino); len(got) != 0 {
		t.Fatalf("create O_TRUNC over a file left %q", got)
	}

	fs.mkdir(meta.RootIno, "d", 0o755)
	_, _, err = fs.v.Create(ctx, meta.RootIno, []byte("d"), 0o644, 0, syscall.O_RDWR|syscall.O_CREAT)
	wantErrno(t, "create over a directory", err, syscall.EISDIR)
}

// testOpenTruncates: O_TRUNC empties the file, also over buffered writes
// of another handle that were committed before.
func testOpenTruncates(t *testing.T, fs *fsys) {
	ino := fs.create(meta.RootIno, "f", 0o644, pattern(3*BlockSize, 1))
	w := fs.open(ino, syscall.O_RDWR)
	fs.write(w, 0, []byte("buffered"))
	tr := fs.open(ino, syscall.O_WRONLY|syscall.O_TRUNC)
	fs.write(tr, 0, []byte("new"))
	fs.close(tr)
	if got := string(fs.readAll(w)); got != "new" {
		t.Fatalf("after O_TRUNC and a write of %q: read %q", "new", got)
	}
	fs.close(w)
	if got := string(fs.content(ino)); got != "new" {
		t.Fatalf("after close: %q, want %q", got, "new")
	}
}

// testAttrsShowBufferedWrites: GetAttr and Lookup report the length that
// buffered writes give the file before they are committed.
func testAttrsShowBufferedWrites(t *testing.T, fs *fsys) {
	ino := fs.create(meta.RootIno, "f", 0o644, nil)
	fh := fs.open(ino, syscall.O_RDWR)
	fs.write(fh, 1000, []byte("x"))
	a, err := fs.v.GetAttr(asRoot(), ino)
	if err != nil {
		t.Fatalf("getattr: %v", err)
	}
	if a.Length != 1001 {
		t.Errorf("getattr length %d with a buffered write to 1001", a.Length)
	}
	if got := fs.lookup(meta.RootIno, "f").Length; got != 1001 {
		t.Errorf("lookup length %d with a buffered write to 1001", got)
	}
	fs.close(fh)
	if got := fs.lookup(meta.RootIno, "f").Length; got != 1001 {
		t.Errorf("lookup length %d after close, want 1001", got)
	}
}

// testCopyFileRange: copy_file_range shares the data, including writes
// still buffered in the source, and later writes to either side do not
// show in the other.
func testCopyFileRange(t *testing.T, fs *fsys) {
	ctx := asRoot()
	src := fs.create(meta.RootIno, "src", 0o644, pattern(2*BlockSize, 1))
	dst := fs.create(meta.RootIno, "dst", 0o644, []byte("dst!"))
	in := fs.open(src, syscall.O_RDWR)
	out := fs.open(dst, syscall.O_RDWR)
	fs.write(in, 10, []byte("buffered"))
	n, err := fs.v.CopyFileRange(ctx, in, 5, out, 2, BlockSize)
	if err != nil {
		t.Fatalf("copy_file_range: %v", err)
	}
	if n != BlockSize {
		t.Fatalf("copied %d bytes, want %d", n, BlockSize)
	}
	srcModel := applyModel(pattern(2*BlockSize, 1), writeAt(10, []byte("buffered")))
	want := applyModel([]byte("dst!"), writeAt(2, srcModel[5:5+BlockSize]))
	fs.write(in, 5, []byte("later"))
	if got := fs.readAll(out); !bytes.Equal(got, want) {
		t.Fatalf("destination differs at %d (len %d, want %d)", firstDiff(got, want), len(got), len(want))
	}
	fs.close(in)
	fs.close(out)
	if got := fs.content(dst); !bytes.Equal(got, want) {
		t.Fatalf("destination after close differs at %d", firstDiff(got, want))
	}
	ro := fs.open(src, syscall.O_RDONLY)
	defer fs.close(ro)
	_, err = fs.v.CopyFileRange(ctx, ro, 0, ro, 0, 1)
	wantErrno(t, "copy_file_range into a read-only handle", err, syscall.EBADF)
	rw := fs.open(src, syscall.O_RDWR)
	defer fs.close(rw)
	_, err = fs.v.CopyFileRange(ctx, rw, 0, rw, 10, 100)
	wantErrno(t, "copy_file_range over its own source range", err, syscall.EINVAL)
	dw := fs.open(dst, syscall.O_WRONLY)
	defer fs.close(dw)
	if n, err := fs.v.CopyFileRange(ctx, rw, 10*BlockSize, dw, 0, 100); err != nil || n != 0 {
		t.Errorf("copy_file_range from past the end: %d bytes, %v; want 0", n, err)
	}
}

// testLargestFile: meta.MaxFileSize bounds a write, a truncation, an
// fallocate and a copy_file_range, at the bound and past it, and offsets
// that a 32-bit chunk index would wrap onto the start of the file
// (2^59 + 4096 landed at 4096) fail with EFBIG and leave the file as it
// was. A write may end exactly at the bound, and reads back.
func testLargestFile(t *testing.T, fs *fsys) {
	ctx := asRoot()
	const maxSize = uint64(meta.MaxFileSize)
	head := pattern(8192, 3)
	ino := fs.create(meta.RootIno, "f", 0o644, head)
	fh := fs.open(ino, syscall.O_RDWR)
	defer fs.close(fh)
	for _, c := range []struct {
		what string
		off  uint64
		n    int
	}{
		{"at the largest size", maxSize, 1},
		{"across the largest size", maxSize - 1, 2},
		{"at 2^59 + 4096", 1<<59 + 4096, 4096},
		{"at 2^62", 1 << 62, 4096},
		{"ending past 2^64", 1<<64 - 10, 4096},
	} {
		wantErrno(t, "a write "+c.what, fs.v.Write(ctx, fh, c.off, pattern(c.n, 9)), syscall.EFBIG)
	}
	for _, n := range []uint64{maxSize + 1, 1<<59 + 4096} {
		_, err := fs.v.SetAttr(ctx, ino, meta.SetSize|meta.SetViaHandle, &meta.Attr{Length: n})
		wantErrno(t, fmt.Sprintf("a truncation to %d", n), err, syscall.EFBIG)
	}
	wantErrno(t, "an fallocate across the largest size", fs.v.Fallocate(ctx, fh, 0, maxSize-1, 2), syscall.EFBIG)
	wantErrno(t, "an fallocate at 2^59", fs.v.Fallocate(ctx, fh, meta.FallocZeroRange, 1<<59, 4096), syscall.EFBIG)
	dst := fs.create(meta.RootIno, "dst", 0o644, nil)
	out := fs.open(dst, syscall.O_RDWR)
	defer fs.close(out)
	_, err := fs.v.CopyFileRange(ctx, fh, 0, out, maxSize-10, 100)
	wantErrno(t, "a copy_file_range across the largest size", err, syscall.EFBIG)
	if n, err := fs.v.CopyFileRange(ctx, fh, 1<<59+4096, out, 0, 4096); err != nil || n != 0 {
		t.Errorf("copy_file_range from 2^59 + 4096: %d bytes, %v; want 0", n, err)
	}
	if got := fs.readAll(fh); !bytes.Equal(got, head) {
		t.Fatalf("after refused operations the file differs at %d (len %d, want %d)", firstDiff(got, head), len(got), len(head))
	}

	// Up to the bound everything works: the last byte, written, reads back.
	fs.write(fh, maxSize-3, []byte("end"))
	if got := fs.read(fh, maxSize-3, 10); string(got) != "end" {
		t.Errorf("the last bytes read %q, want %q", got, "end")
	}
	if got := fs.read(fh, 4096, 8); !bytes.Equal(got, head[4096:4104]) {
		t.Errorf("bytes at 4096 after writing the last ones: %q, want %q", got, head[4096:4104])
	}
	if n, err := vfs.WriteLimit(maxSize-3, 10); err != nil || n != 3 {
		t.Errorf("WriteLimit across the bound: %d, %v; want 3 bytes", n, err)
	}
	if err := fs.v.Flush(ctx, fh, 0); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if a := fs.lookup(meta.RootIno, "f"); a.Length != maxSize {
		t.Errorf("length after writing the last bytes: %d, want %d", a.Length, maxSize)
	}
	ro := fs.open(ino, syscall.O_RDONLY)
	defer fs.close(ro)
	if got := fs.read(ro, 0, 8192); !bytes.Equal(got, head) {
		t.Errorf("the head changed after writing the last bytes")
	}
	if got := fs.read(ro, maxSize-3, 10); string(got) != "end" {
		t.Errorf("the last bytes read %q through another handle, want %q", got, "end")
	}
}

// testPunchHole: a hole punched over buffered and committed data reads
// as zeros and keeps the length.
func testPunchHole(t *testing.T, fs *fsys) {
	ino := fs.create(meta.RootIno, "f", 0o644, pattern(3*BlockSize, 1))
	fh := fs.open(ino, syscall.O_RDWR)
	fs.write(fh, BlockSize, []byte("buffered"))
	if err := fs.v.Fallocate(asRoot(), fh, meta.FallocPunchHole|meta.FallocKeepSize, BlockSize-4, 100); err != nil {
		t.Fatalf("punch hole: %v", err)
	}
	model := applyModel(pattern(3*BlockSize, 1), writeAt(BlockSize, []byte("buffered")))
	clear(model[BlockSize-4 : BlockSize+96])
	if got := fs.readAll(fh); !bytes.Equal(got, model) {
		t.Fatalf("after punching: differs at %d (len %d, want %d)", firstDiff(got, model), len(got), len(model))
	}
	fs.close(fh)
}
