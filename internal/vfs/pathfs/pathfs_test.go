package pathfs_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/vfs"
	"github.com/sluicefs/sluice/internal/vfs/pathfs"
	"github.com/sluicefs/sluice/internal/volume"
	"github.com/sluicefs/sluice/internal/volume/volumetest"
)

func newVFS(t *testing.T) *vfs.VFS {
	t.Helper()
	ctx := context.Background()
	tv := volumetest.New(t, nil)
	v, err := volume.Open(ctx, tv.MetaURL, volume.Options{Level: volume.FileSystem})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close(ctx) })
	return v.VFS()
}

func newFS(t *testing.T, cred meta.Cred) *pathfs.FS { return pathfs.New(newVFS(t), cred, 0o022) }

func write(t *testing.T, f *pathfs.FS, name string, data string, flag int) {
	t.Helper()
	h, err := f.OpenFile(context.Background(), name, flag, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(h, data); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, f *pathfs.FS, name string) string {
	t.Helper()
	h, err := f.OpenFile(context.Background(), name, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	b, err := io.ReadAll(h)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFiles(t *testing.T) {
	ctx := context.Background()
	f := newFS(t, meta.Cred{})
	if err := f.Mkdir(ctx, "/a", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := f.Mkdir(ctx, "a/b/", 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, f, "/a/b/f", "hello", os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	write(t, f, "/a/b/f", " world", os.O_WRONLY|os.O_APPEND)
	if got := read(t, f, "a/b/f"); got != "hello world" {
		t.Fatalf("read %q", got)
	}
	write(t, f, "/a/b/f", "bye", os.O_WRONLY|os.O_TRUNC)
	if got := read(t, f, "/a/b/f"); got != "bye" {
		t.Fatalf("after O_TRUNC: %q", got)
	}
	st, err := f.Stat(ctx, "/a/b/f")
	if err != nil || st.Size() != 3 || st.Name() != "f" || st.IsDir() || st.Mode() != 0o644 {
		t.Fatalf("stat: %v %v", st, err)
	}
	// ".." never leaves the root.
	if st, err := f.Stat(ctx, "/../../a/../a/b"); err != nil || !st.IsDir() || st.Name() != "b" {
		t.Fatalf("stat with ..: %v %v", st, err)
	}
	// Seek and ReadAt.
	h, err := f.OpenFile(ctx, "/a/b/f", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Seek(1, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Write([]byte("Y")); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 5)
	if n, err := h.ReadAt(p, 0); n != 3 || err != io.EOF || string(p[:n]) != "bYe" {
		t.Fatalf("ReadAt: %d %v %q", n, err, p[:n])
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
	// Errors as os reports them.
	for _, c := range []struct {
		name string
		err  error
		fn   func() error
	}{
		{"missing", fs.ErrNotExist, func() error { _, err := f.Stat(ctx, "/nope"); return err }},
		{"under a file", syscall.ENOTDIR, func() error { _, err := f.Stat(ctx, "/a/b/f/x"); return err }},
		{"exclusive", fs.ErrExist, func() error {
			_, err := f.OpenFile(ctx, "/a/b/f", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			return err
		}},
		{"mkdir again", fs.ErrExist, func() error { return f.Mkdir(ctx, "/a", 0o755) }},
		{"mkdir root", fs.ErrExist, func() error { return f.Mkdir(ctx, "/", 0o755) }},
		{"write a directory", syscall.EISDIR, func() error { _, err := f.OpenFile(ctx, "/a", os.O_WRONLY, 0); return err }},
		{"create in a missing directory", fs.ErrNotExist, func() error {
			_, err := f.OpenFile(ctx, "/x/y", os.O_WRONLY|os.O_CREATE, 0o644)
			return err
		}},
	} {
		if err := c.fn(); !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		}
	}
}

func TestDirectories(t *testing.T) {
	ctx := context.Background()
	f := newFS(t, meta.Cred{})
	for _, d := range []string{"/d", "/d/sub", "/d/sub/deeper"} {
		if err := f.Mkdir(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"/d/1", "/d/2", "/d/3", "/d/sub/x", "/d/sub/deeper/y"} {
		write(t, f, n, n, os.O_WRONLY|os.O_CREATE)
	}
	h, err := f.OpenFile(ctx, "/d", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for {
		fis, err := h.Readdir(2)
		for _, fi := range fis {
			names = append(names, fi.Name())
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	h.Close()
	slices.Sort(names)
	if want := []string{"1", "2", "3", "sub"}; !slices.Equal(names, want) {
		t.Fatalf("listing %v, want %v", names, want)
	}
	if err := f.Rename(ctx, "/d/sub", "/moved"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, f, "/moved/deeper/y"); got != "/d/sub/deeper/y" {
		t.Fatalf("after rename: %q", got)
	}
	if err := f.RemoveAll(ctx, "/d"); err != nil {
		t.Fatal(err)
	}
	if err := f.RemoveAll(ctx, "/d"); err != nil {
		t.Fatalf("removing what is gone: %v", err)
	}
	if err := f.RemoveAll(ctx, "/moved/deeper/y"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat(ctx, "/d/1"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("removed tree: %v", err)
	}
}

// TestPermissions checks that the FS's credentials are those checked,
// and its umask applied.
func TestPermissions(t *testing.T) {
	ctx := context.Background()
	v := newVFS(t)
	root := pathfs.New(v, meta.Cred{}, 0)
	user := pathfs.New(v, meta.Cred{Uid: 1000, Gid: 1000}, 0o077)
	if err := root.Mkdir(ctx, "/private", 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, root, "/private/secret", "x", os.O_WRONLY|os.O_CREATE)
	if _, err := user.OpenFile(ctx, "/private/secret", os.O_RDONLY, 0); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("another user opens a file in a private directory: %v", err)
	}
	if err := root.Mkdir(ctx, "/public", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := user.Mkdir(ctx, "/public/mine", 0o777); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("another user makes a directory in root's 755 one: %v", err)
	}
	if err := root.Mkdir(ctx, "/shared", 0o777); err != nil {
		t.Fatal(err)
	}
	write(t, user, "/shared/f", "x", os.O_WRONLY|os.O_CREATE)
	st, err := user.Stat(ctx, "/shared/f")
	if err != nil {
		t.Fatal(err)
	}
	if a := st.Sys().(*meta.Attr); a.Uid != 1000 || st.Mode() != 0o600 {
		t.Fatalf("made by uid %d with mode %v, want 1000 and -rw------- (umask 077)", a.Uid, st.Mode())
	}
}

// TestInternalFiles checks that a mount's internal files are not part of
// the tree.
func TestInternalFiles(t *testing.T) {
	ctx := context.Background()
	f := newFS(t, meta.Cred{})
	for _, name := range []string{"/.stats", "/.control", "/.config", "/.accesslog"} {
		if _, err := f.Stat(ctx, name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("stat %s: %v", name, err)
		}
		if _, err := f.OpenFile(ctx, name, os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
			t.Errorf("open %s for writing succeeded", name)
		}
	}
	h, err := f.OpenFile(ctx, "/", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	fis, err := h.Readdir(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, fi := range fis {
		t.Errorf("the root lists %s", fi.Name())
	}
}
