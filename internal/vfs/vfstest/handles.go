package vfstest

import (
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/vfs"
)

var handleTests = []test{
	{"DupFlushesThenReleases", testDupHandle},
	{"HandlesShareBufferedWrites", testHandlesShareWrites},
	{"AccessModes", testAccessModes},
	{"ReleasedHandleIsBad", testReleasedHandle},
	{"UnlinkedWhileOpen", testUnlinkedWhileOpen},
	{"RenamedOverWhileOpen", testRenamedOverWhileOpen},
}

// testDupHandle: descriptors dup'ed from one open share its handle; each
// close flushes it, and it stays usable until the release after the last.
func testDupHandle(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, nil)
	fh := fs.open(ino, syscall.O_RDWR)
	fs.write(fh, 0, []byte("one"))
	if err := fs.v.Flush(ctx, fh, 0); err != nil { // close of the first descriptor
		t.Fatalf("first flush: %v", err)
	}
	fs.write(fh, 3, []byte("two"))
	if got := string(fs.read(fh, 0, 10)); got != "onetwo" {
		t.Fatalf("after one close: %q", got)
	}
	if err := fs.v.Flush(ctx, fh, 0); err != nil {
		t.Fatalf("second flush: %v", err)
	}
	if err := fs.v.Release(ctx, fh, 0); err != nil {
		t.Fatalf("release: %v", err)
	}
	if got := string(fs.content(ino)); got != "onetwo" {
		t.Fatalf("after release: %q", got)
	}
}

// testHandlesShareWrites: two opens of one file in one mount see each
// other's writes before either commits, and releasing one leaves the
// other's buffered writes alone.
func testHandlesShareWrites(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, []byte("base"))
	a := fs.open(ino, syscall.O_RDWR)
	b := fs.open(ino, syscall.O_RDWR)
	fs.write(a, 4, []byte("-a"))
	if got := string(fs.read(b, 0, 100)); got != "base-a" {
		t.Fatalf("b reads %q after a wrote", got)
	}
	fs.write(b, 6, []byte("-b"))
	if err := fs.v.Release(ctx, a, 0); err != nil {
		t.Fatalf("release a: %v", err)
	}
	if got := string(fs.read(b, 0, 100)); got != "base-a-b" {
		t.Fatalf("b reads %q after a's release", got)
	}
	fs.write(b, 0, []byte("B"))
	fs.close(b)
	if got := string(fs.content(ino)); got != "Base-a-b" {
		t.Fatalf("after both closed: %q", got)
	}
}

// testAccessModes: a handle reads and writes only as its open flags
// allow.
func testAccessModes(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, []byte("data"))
	ro := fs.open(ino, syscall.O_RDONLY)
	wo := fs.open(ino, syscall.O_WRONLY)
	defer fs.close(ro)
	defer fs.close(wo)
	wantErrno(t, "write through O_RDONLY", fs.v.Write(ctx, ro, 0, []byte("x")), syscall.EBADF)
	_, err := fs.v.Read(ctx, wo, 0, make([]byte, 4))
	wantErrno(t, "read through O_WRONLY", err, syscall.EBADF)
	wantErrno(t, "fallocate through O_RDONLY", fs.v.Fallocate(ctx, ro, 0, 0, 10), syscall.EBADF)

	d := fs.mkdir(meta.RootIno, "d", 0o755)
	dh, err := fs.v.OpenDir(ctx, d)
	if err != nil {
		t.Fatalf("opendir: %v", err)
	}
	defer fs.v.ReleaseDir(dh)
	_, err = fs.v.Read(ctx, dh, 0, make([]byte, 4))
	wantErrno(t, "read through a directory handle", err, syscall.EBADF)
	wantErrno(t, "write through a directory handle", fs.v.Write(ctx, dh, 0, []byte("x")), syscall.EBADF)
	wantErrno(t, "readdir through a file handle", fs.v.ReadDir(ctx, ro, 0, false, func(vfs.DirEntry) bool { return true }), syscall.ENOTDIR)
}

// testReleasedHandle: every operation on a released or unknown handle
// fails with EBADF.
func testReleasedHandle(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, []byte("data"))
	fh := fs.open(ino, syscall.O_RDWR)
	fs.close(fh)
	for _, bad := range []uint64{fh, 1 << 62} {
		_, err := fs.v.Read(ctx, bad, 0, make([]byte, 4))
		wantErrno(t, "read", err, syscall.EBADF)
		wantErrno(t, "write", fs.v.Write(ctx, bad, 0, []byte("x")), syscall.EBADF)
		wantErrno(t, "flush", fs.v.Flush(ctx, bad, 0), syscall.EBADF)
		wantErrno(t, "fsync", fs.v.Fsync(ctx, bad), syscall.EBADF)
		wantErrno(t, "release", fs.v.Release(ctx, bad, 0), syscall.EBADF)
		wantErrno(t, "flock", fs.v.Flock(ctx, bad, 1, meta.LockWrite, false), syscall.EBADF)
		wantErrno(t, "fallocate", fs.v.Fallocate(ctx, bad, 0, 0, 1), syscall.EBADF)
		wantErrno(t, "readdir", fs.v.ReadDir(ctx, bad, 0, false, func(vfs.DirEntry) bool { return true }), syscall.EBADF)
	}
}

// testUnlinkedWhileOpen: a file unlinked while open stays readable and
// writable through its handle and is gone once released.
func testUnlinkedWhileOpen(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, []byte("kept"))
	fh := fs.open(ino, syscall.O_RDWR)
	if err := fs.v.Unlink(ctx, meta.RootIno, []byte("f")); err != nil {
		t.Fatalf("unlink: %v", err)
	}
	_, err := fs.v.Lookup(ctx, meta.RootIno, []byte("f"))
	wantErrno(t, "lookup of the unlinked name", err, syscall.ENOENT)
	fs.write(fh, 4, []byte("+more"))
	if err := fs.v.Fsync(ctx, fh); err != nil {
		t.Fatalf("fsync of an unlinked file: %v", err)
	}
	if got := string(fs.readAll(fh)); got != "kept+more" {
		t.Fatalf("unlinked file reads %q", got)
	}
	a, err := fs.v.GetAttr(ctx, ino)
	if err != nil {
		t.Fatalf("fstat of an unlinked open file: %v", err)
	}
	if a.Nlink != 0 {
		t.Errorf("unlinked file has nlink %d", a.Nlink)
	}
	fs.close(fh)
	_, err = fs.v.GetAttr(ctx, ino)
	if e := meta.Errno(err); e != syscall.ENOENT && e != syscall.ESTALE {
		t.Fatalf("getattr after the last release: %v, want ENOENT or ESTALE", err)
	}
}

// testRenamedOverWhileOpen: a file replaced by a rename stays readable
// through a handle opened before, while the name leads to the new file.
func testRenamedOverWhileOpen(t *testing.T, fs *fsys) {
	ctx := asRoot()
	old := fs.create(meta.RootIno, "f", 0o644, []byte("old"))
	fs.create(meta.RootIno, "tmp", 0o644, []byte("new"))
	fh := fs.open(old, syscall.O_RDONLY)
	if err := fs.v.Rename(ctx, meta.RootIno, []byte("tmp"), meta.RootIno, []byte("f"), 0); err != nil {
		t.Fatalf("rename: %v", err)
	}
	if got := string(fs.readAll(fh)); got != "old" {
		t.Fatalf("replaced file reads %q", got)
	}
	fs.close(fh)
	if got := string(fs.content(fs.lookup(meta.RootIno, "f").Ino)); got != "new" {
		t.Fatalf("the name reads %q", got)
	}
}
