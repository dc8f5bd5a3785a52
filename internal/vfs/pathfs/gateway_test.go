package pathfs_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
)

// TestMkdirAllRemoveReadDir checks the calls the S3 gateway makes of
// paths: directories made as needed, entries listed in order, and
// entries removed one by one.
func TestMkdirAllRemoveReadDir(t *testing.T) {
	ctx := context.Background()
	f := newFS(t, meta.Cred{})
	if err := f.MkdirAll(ctx, "/a/b/c", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := f.MkdirAll(ctx, "a/b", 0o755); err != nil {
		t.Fatalf("MkdirAll of what exists: %v", err)
	}
	for _, n := range []string{"/a/z", "/a/m", "/a/b0"} {
		write(t, f, n, n, os.O_WRONLY|os.O_CREATE)
	}
	if err := f.MkdirAll(ctx, "/a/z/x", 0o755); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("MkdirAll under a file: %v", err)
	}
	list, err := f.ReadDir(ctx, "/a")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name())
	}
	if want := "b b0 m z"; strings.Join(names, " ") != want {
		t.Fatalf("ReadDir: %q, want %q", strings.Join(names, " "), want)
	}
	if _, err := f.ReadDir(ctx, "/a/z"); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("ReadDir of a file: %v", err)
	}
	for _, c := range []struct {
		name string
		err  error
	}{
		{"/a/b", syscall.ENOTEMPTY},
		{"/a/nope", fs.ErrNotExist},
		{"/a/z", nil},
		{"/a/b/c", nil},
		{"/a/b", nil},
	} {
		if err := f.Remove(ctx, c.name); !errors.Is(err, c.err) && !(c.err == nil && err == nil) {
			t.Errorf("Remove(%s): %v, want %v", c.name, err, c.err)
		}
	}
	if _, err := f.Stat(ctx, "/a/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after Remove: %v", err)
	}
}

// TestCopyFrom checks that CopyFrom assembles a file of ranges of others,
// as the gateway's CompleteMultipartUpload does.
func TestCopyFrom(t *testing.T) {
	ctx := context.Background()
	f := newFS(t, meta.Cred{})
	parts := [][]byte{bytes.Repeat([]byte("a"), 300<<10), bytes.Repeat([]byte("b"), 70<<10+3), []byte("tail")}
	for i, p := range parts {
		write(t, f, "/p"+string(rune('0'+i)), string(p), os.O_WRONLY|os.O_CREATE)
	}
	dst, err := f.OpenFile(ctx, "/whole", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var off int64
	for i, p := range parts {
		src, err := f.OpenFile(ctx, "/p"+string(rune('0'+i)), os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		n, err := dst.CopyFrom(src, 0, off, int64(len(p))+10) // past the end: fewer
		if err != nil || n != int64(len(p)) {
			t.Fatalf("CopyFrom part %d: %d, %v", i, n, err)
		}
		off += n
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := f.OpenFile(ctx, "/whole", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	got, err := io.ReadAll(h)
	if err != nil {
		t.Fatal(err)
	}
	if want := bytes.Join(parts, nil); !bytes.Equal(got, want) {
		t.Fatalf("assembled %d bytes, want %d equal ones", len(got), len(want))
	}
}

// TestPathXattrs checks extended attributes by path.
func TestPathXattrs(t *testing.T) {
	ctx := context.Background()
	f := newFS(t, meta.Cred{})
	write(t, f, "/f", "x", os.O_WRONLY|os.O_CREATE)
	if err := f.SetXattr(ctx, "/f", "user.k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v, err := f.GetXattr(ctx, "f", "user.k"); err != nil || string(v) != "v" {
		t.Fatalf("GetXattr: %q, %v", v, err)
	}
	if names, err := f.Xattrs(ctx, "/f"); err != nil || !slices.Contains(names, "user.k") {
		t.Fatalf("Xattrs: %q, %v", names, err)
	}
	if _, err := f.GetXattr(ctx, "/f", "user.none"); !errors.Is(err, syscall.ENODATA) {
		t.Fatalf("GetXattr of a missing one: %v", err)
	}
	if err := f.SetXattr(ctx, "/nope", "user.k", nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SetXattr of a missing file: %v", err)
	}
}

// TestFlush checks that Flush commits a file's writes, which another
// client then sees, and that Close changes nothing after it.
func TestFlush(t *testing.T) {
	ctx := context.Background()
	f := newFS(t, meta.Cred{})
	h, err := f.OpenFile(ctx, "/f", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Write([]byte("flushed")); err != nil {
		t.Fatal(err)
	}
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	before, err := h.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, f, "/f"); got != "flushed" {
		t.Fatalf("read after Flush: %q", got)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := f.Stat(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("Close after Flush changed the file: size %d→%d, mtime %v→%v", before.Size(), after.Size(), before.ModTime(), after.ModTime())
	}
}
