package vfstest

import (
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

var tmpfileTests = []test{
	{"WriteReadLink", testTmpfileLink},
	{"ClosedUnlinked", testTmpfileClosed},
	{"Owner", testTmpfileOwner},
	{"LinkRefused", testTmpfileLinkRefused},
}

// tmpfile opens an unnamed file in dir as root (O_TMPFILE|O_RDWR) and
// returns its inode and handle.
func (fs *fsys) tmpfile(dir meta.Ino) (meta.Ino, uint64) {
	fs.t.Helper()
	a, fh, err := fs.v.Tmpfile(asRoot(), dir, 0o644, 0, syscall.O_RDWR)
	if err != nil {
		fs.t.Fatalf("tmpfile in %d: %v", dir, err)
	}
	if a.Type != store.TypeFile || a.Nlink != 0 {
		fs.t.Fatalf("tmpfile is type %d with nlink %d, want a regular file without links", a.Type, a.Nlink)
	}
	return a.Ino, fh
}

// nlink returns ino's link count, as fstat reports it.
func (fs *fsys) nlink(ino meta.Ino) uint32 {
	fs.t.Helper()
	a, err := fs.v.GetAttr(asRoot(), ino)
	if err != nil {
		fs.t.Fatalf("getattr %d: %v", ino, err)
	}
	return a.Nlink
}

// testTmpfileLink writes and reads an unnamed file, which has no link,
// then names it with Link: it has one, keeps its content, and outlives
// its handle.
func testTmpfileLink(t *testing.T, fs *fsys) {
	ctx := asRoot()
	d := fs.mkdir(meta.RootIno, "d", 0o755)
	ino, fh := fs.tmpfile(d)
	data := pattern(3*BlockSize+100, 7)
	fs.write(fh, 0, data)
	if got := fs.readAll(fh); string(got) != string(data) {
		t.Fatalf("tmpfile reads %d bytes, differing at %d", len(got), firstDiff(got, data))
	}
	if n := fs.nlink(ino); n != 0 {
		t.Errorf("tmpfile has nlink %d before the link", n)
	}
	if err := fs.v.Fsync(ctx, fh); err != nil {
		t.Fatalf("fsync a tmpfile: %v", err)
	}
	if got := dirNames(t, fs, d); len(got) != 0 {
		t.Errorf("the directory of a tmpfile lists %q", got)
	}
	a, err := fs.v.Link(ctx, ino, d, []byte("named"))
	if err != nil {
		t.Fatalf("link a tmpfile: %v", err)
	}
	if a.Nlink != 1 || fs.nlink(ino) != 1 {
		t.Errorf("linked tmpfile has nlink %d (getattr %d), want 1", a.Nlink, fs.nlink(ino))
	}
	fs.write(fh, uint64(len(data)), []byte("tail"))
	fs.close(fh)
	if got := fs.lookup(d, "named"); got.Ino != ino || got.Nlink != 1 || got.Parent != d {
		t.Errorf("the name leads to %d with nlink %d, parent %d; want %d, 1, %d", got.Ino, got.Nlink, got.Parent, ino, d)
	}
	if got, want := fs.content(ino), append(data, "tail"...); string(got) != string(want) {
		t.Fatalf("the named file reads %d bytes, want %d", len(got), len(want))
	}
	// Once named, it is an ordinary file: a second link, and an unlink
	// of both names while open, deletes it at its last close.
	if _, err := fs.v.Link(ctx, ino, meta.RootIno, []byte("second")); err != nil {
		t.Fatalf("second link: %v", err)
	}
	fh = fs.open(ino, syscall.O_RDONLY)
	for _, n := range []struct {
		dir  meta.Ino
		name string
	}{{d, "named"}, {meta.RootIno, "second"}} {
		if err := fs.v.Unlink(ctx, n.dir, []byte(n.name)); err != nil {
			t.Fatalf("unlink %s: %v", n.name, err)
		}
	}
	fs.close(fh)
	wantGone(t, fs, ino)
}

// wantGone fails t unless ino is deleted.
func wantGone(t *testing.T, fs *fsys, ino meta.Ino) {
	t.Helper()
	_, err := fs.v.GetAttr(asRoot(), ino)
	if e := meta.Errno(err); e != syscall.ENOENT && e != syscall.ESTALE {
		t.Errorf("getattr of %d: %v, want ENOENT or ESTALE", ino, err)
	}
}

// testTmpfileClosed: an unnamed file closed without a link is deleted,
// and the inode and space it used are free again; a link after the
// close fails.
func testTmpfileClosed(t *testing.T, fs *fsys) {
	ctx := asRoot()
	before, err := fs.v.StatFS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ino, fh := fs.tmpfile(meta.RootIno)
	fs.write(fh, 0, pattern(2*BlockSize, 3))
	if err := fs.v.Flush(ctx, fh, 0); err != nil {
		t.Fatalf("flush: %v", err)
	}
	during, err := fs.v.StatFS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if during.UsedInodes != before.UsedInodes+1 || during.AvailSpace >= before.AvailSpace {
		t.Errorf("with a tmpfile open: %d inodes and %d bytes free, before %d and %d; want one inode more and less space",
			during.UsedInodes, during.AvailSpace, before.UsedInodes, before.AvailSpace)
	}
	fs.close(fh)
	wantGone(t, fs, ino)
	after, err := fs.v.StatFS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.UsedInodes != before.UsedInodes || after.AvailSpace != before.AvailSpace {
		t.Errorf("after the close: %d inodes and %d bytes free, before %d and %d", after.UsedInodes, after.AvailSpace,
			before.UsedInodes, before.AvailSpace)
	}
	_, err = fs.v.Link(ctx, ino, meta.RootIno, []byte("late"))
	if e := meta.Errno(err); e != syscall.ENOENT && e != syscall.ESTALE {
		t.Errorf("link after the close: %v, want ENOENT", err)
	}
}

// testTmpfileOwner: an unnamed file gets its mode, owner and group as a
// create would: umask applied, the caller's uid, a setgid directory's
// group; it needs write access to the directory.
func testTmpfileOwner(t *testing.T, fs *fsys) {
	ctx := asRoot()
	d := fs.mkdir(meta.RootIno, "d", 0o2777)
	if _, err := fs.v.SetAttr(ctx, d, meta.SetGid, &meta.Attr{Gid: 50}); err != nil {
		t.Fatalf("chgrp: %v", err)
	}
	ro := fs.mkdir(meta.RootIno, "ro", 0o755)
	cases := []struct {
		what        string
		dir         meta.Ino
		mode, umask uint16
		want        syscall.Errno
		wantMode    uint16
		gid         uint32
	}{
		{"in a setgid directory", d, 0o666, 0o022, 0, 0o644, 50},
		{"setgid bit of a group the caller is not in", d, 0o2770, 0, 0, 0o770, 50},
		{"in a directory the caller may not write", ro, 0o600, 0, syscall.EACCES, 0, 0},
		{"in a file", fs.create(meta.RootIno, "f", 0o777, nil), 0o600, 0, syscall.ENOTDIR, 0, 0},
	}
	for _, tc := range cases {
		a, fh, err := fs.v.Tmpfile(asUser(uidA), tc.dir, tc.mode, tc.umask, syscall.O_RDWR)
		wantErrno(t, tc.what, err, tc.want)
		if err != nil {
			continue
		}
		if a.Mode != tc.wantMode || a.Uid != uidA || a.Gid != tc.gid || a.Nlink != 0 {
			t.Errorf("%s: mode %o owner %d:%d nlink %d, want %o %d:%d 0", tc.what, a.Mode, a.Uid, a.Gid, a.Nlink,
				tc.wantMode, uidA, tc.gid)
		}
		if err := fs.v.Release(asUser(uidA), fh, 0); err != nil {
			t.Errorf("%s: release: %v", tc.what, err)
		}
	}
}

// testTmpfileLinkRefused: a file whose last name went while open is not
// brought back by Link, though it is open and kept like an unnamed file.
func testTmpfileLinkRefused(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, []byte("x"))
	fh := fs.open(ino, syscall.O_RDWR)
	if err := fs.v.Unlink(ctx, meta.RootIno, []byte("f")); err != nil {
		t.Fatalf("unlink: %v", err)
	}
	_, err := fs.v.Link(ctx, ino, meta.RootIno, []byte("back"))
	wantErrno(t, "link of an unlinked open file", err, syscall.ENOENT)
	fs.close(fh)
	wantGone(t, fs, ino)
}
