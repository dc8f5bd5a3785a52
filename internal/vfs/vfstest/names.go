package vfstest

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/vfs"
)

var nameTests = []test{
	{"Rename", testRename},
	{"RenameWhiteout", testRenameWhiteout},
	{"ReplacedWhileOpen", testReplacedWhileOpen},
	{"HardLinks", testHardLinks},
	{"Symlink", testSymlink},
	{"Xattrs", testXattrs},
}

var errorTests = []test{
	{"Errno", testErrno},
	{"OpenAfterHeldChmod", testOpenAfterHeldChmod},
}

// testRename moves names within and across directories, replaces files
// and empty directories, and exchanges two names.
func testRename(t *testing.T, fs *fsys) {
	ctx := asRoot()
	d1 := fs.mkdir(meta.RootIno, "d1", 0o755)
	d2 := fs.mkdir(meta.RootIno, "d2", 0o755)
	a := fs.create(d1, "a", 0o644, []byte("a"))
	b := fs.create(d2, "b", 0o644, []byte("b"))
	sub := fs.mkdir(d1, "sub", 0o755)
	empty := fs.mkdir(d2, "empty", 0o755)
	rename := func(sp meta.Ino, sn string, dp meta.Ino, dn string, flags uint32) {
		t.Helper()
		if err := fs.v.Rename(ctx, sp, []byte(sn), dp, []byte(dn), flags); err != nil {
			t.Fatalf("rename %s to %s: %v", sn, dn, err)
		}
	}
	wantAt := func(parent meta.Ino, name string, ino meta.Ino) {
		t.Helper()
		if got := fs.lookup(parent, name).Ino; got != ino {
			t.Fatalf("%s leads to %d, want %d", name, got, ino)
		}
	}
	wantGone := func(parent meta.Ino, name string) {
		t.Helper()
		_, err := fs.v.Lookup(ctx, parent, []byte(name))
		wantErrno(t, "lookup of "+name, err, syscall.ENOENT)
	}

	rename(d1, "a", d1, "a2", 0) // same directory
	wantAt(d1, "a2", a)
	wantGone(d1, "a")
	rename(d1, "a2", d2, "a", 0) // across directories
	wantAt(d2, "a", a)
	rename(d2, "a", d2, "b", 0) // over a file
	wantAt(d2, "b", a)
	if _, err := fs.v.GetAttr(ctx, b); meta.Errno(err) != syscall.ENOENT && meta.Errno(err) != syscall.ESTALE {
		t.Errorf("replaced file still has attributes: %v", err)
	}
	rename(d1, "sub", d2, "empty", 0) // a directory over an empty one
	wantAt(d2, "empty", sub)
	if got := fs.lookup(d2, "empty").Parent; got != d2 {
		t.Errorf("moved directory has parent %d, want %d", got, d2)
	}
	_, err := fs.v.GetAttr(ctx, empty)
	if e := meta.Errno(err); e != syscall.ENOENT && e != syscall.ESTALE {
		t.Errorf("replaced directory still has attributes: %v", err)
	}
	if got := dirNames(t, fs, sub); len(got) != 0 {
		t.Errorf("moved empty directory lists %q", got)
	}

	x := fs.create(d1, "x", 0o644, []byte("x"))
	y := fs.mkdir(d2, "y", 0o755)
	rename(d1, "x", d2, "y", meta.RenameExchange)
	wantAt(d1, "x", y)
	wantAt(d2, "y", x)
	if got := fs.lookup(d1, "x").Parent; got != d1 {
		t.Errorf("exchanged directory has parent %d, want %d", got, d1)
	}
	rename(d1, "x", d1, "x", 0) // onto itself: nothing happens
	wantAt(d1, "x", y)
}

// testRenameWhiteout: RENAME_WHITEOUT moves the name and leaves at the
// source a whiteout, the character device 0:0 with mode 0, made by the
// caller (with the group of a setgid directory); with NOREPLACE onto an
// existing name it fails with EEXIST and changes nothing, and with
// EXCHANGE it is EINVAL.
func testRenameWhiteout(t *testing.T, fs *fsys) {
	const whiteout = meta.RenameWhiteout
	ctx := asRoot()
	d := fs.mkdir(meta.RootIno, "d", 0o2777) // setgid, writable by user A
	if _, err := fs.v.SetAttr(ctx, d, meta.SetGid, &meta.Attr{Gid: 50}); err != nil {
		t.Fatalf("chgrp: %v", err)
	}
	o := fs.mkdir(meta.RootIno, "o", 0o777)
	moved := fs.create(d, "a", 0o644, []byte("moved"))
	kept := fs.create(o, "kept", 0o644, []byte("kept"))
	sub := fs.mkdir(d, "sub", 0o777)
	fs.create(d, "c", 0o644, []byte("c"))
	cases := []struct {
		what        string
		ctx         context.Context
		sp          meta.Ino
		sn          string
		dp          meta.Ino
		dn          string
		flags       uint32
		want        syscall.Errno
		ino         meta.Ino // what dn leads to after a success
		uid, gid    uint32   // the whiteout's owner
		parentNlink uint32   // d's links after
	}{
		{"file to another directory", ctx, d, "a", o, "b", whiteout, 0, moved, 0, 50, 3},
		{"NOREPLACE onto an existing name", ctx, o, "b", o, "kept", whiteout | meta.RenameNoReplace, syscall.EEXIST, 0, 0, 0, 3},
		{"with EXCHANGE", ctx, o, "b", o, "kept", whiteout | meta.RenameExchange, syscall.EINVAL, 0, 0, 0, 3},
		{"NOREPLACE onto a free name, as user A", asUser(uidA), o, "b", d, "b2", whiteout | meta.RenameNoReplace, 0, moved, uidA, uidA, 3},
		{"a directory out of its parent, as user A", asUser(uidA), d, "sub", o, "sub", whiteout, 0, sub, uidA, 50, 2},
		{"over an existing file", ctx, d, "b2", d, "c", whiteout, 0, moved, 0, 50, 2},
	}
	for _, tc := range cases {
		err := fs.v.Rename(tc.ctx, tc.sp, []byte(tc.sn), tc.dp, []byte(tc.dn), tc.flags)
		wantErrno(t, tc.what, err, tc.want)
		if n := fs.lookup(meta.RootIno, "d").Nlink; n != tc.parentNlink {
			t.Errorf("%s: d has %d links, want %d", tc.what, n, tc.parentNlink)
		}
		if tc.want != 0 {
			if got := fs.lookup(o, "b").Ino; got != moved {
				t.Errorf("%s: the source leads to %d, want %d", tc.what, got, moved)
			}
			if got := fs.lookup(o, "kept").Ino; got != kept {
				t.Errorf("%s: the target leads to %d, want %d", tc.what, got, kept)
			}
			continue
		}
		if got := fs.lookup(tc.dp, tc.dn).Ino; got != tc.ino {
			t.Errorf("%s: the target leads to %d, want %d", tc.what, got, tc.ino)
		}
		w := fs.lookup(tc.sp, tc.sn)
		if w.Type != store.TypeCharDev || w.Rdev != 0 || w.Mode != 0 || w.Nlink != 1 || w.Uid != tc.uid || w.Gid != tc.gid {
			t.Errorf("%s: the source is type %d rdev %d mode %o nlink %d owner %d:%d, want a 0:0 character device, mode 0, owned by %d:%d",
				tc.what, w.Type, w.Rdev, w.Mode, w.Nlink, w.Uid, w.Gid, tc.uid, tc.gid)
		}
	}
	if got := string(fs.content(moved)); got != "moved" {
		t.Errorf("the moved file reads %q", got)
	}
	// A whiteout is an ordinary node: it goes with unlink.
	if err := fs.v.Unlink(ctx, d, []byte("a")); err != nil {
		t.Errorf("unlink a whiteout: %v", err)
	}
}

// testHardLinks: a second name shares the inode and its data, and the
// inode lives until its last name goes.
func testHardLinks(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, []byte("shared"))
	d := fs.mkdir(meta.RootIno, "d", 0o755)
	a, err := fs.v.Link(ctx, ino, d, []byte("g"))
	if err != nil {
		t.Fatalf("link: %v", err)
	}
	if a.Ino != ino || a.Nlink != 2 {
		t.Fatalf("link gives inode %d nlink %d, want %d and 2", a.Ino, a.Nlink, ino)
	}
	fh := fs.open(fs.lookup(d, "g").Ino, syscall.O_WRONLY)
	fs.write(fh, 0, []byte("SH"))
	fs.close(fh)
	if err := fs.v.Unlink(ctx, meta.RootIno, []byte("f")); err != nil {
		t.Fatalf("unlink: %v", err)
	}
	if got := string(fs.content(fs.lookup(d, "g").Ino)); got != "SHared" {
		t.Fatalf("the other name reads %q", got)
	}
	if n := fs.lookup(d, "g").Nlink; n != 1 {
		t.Fatalf("nlink %d after one unlink", n)
	}
}

// testSymlink: a symlink keeps its target verbatim.
func testSymlink(t *testing.T, fs *fsys) {
	ctx := asRoot()
	target := "../some/where\x01 with bytes"
	a, err := fs.v.Mknod(ctx, meta.RootIno, []byte("l"), meta.NewNode{Type: store.TypeSymlink, Mode: 0o777, Target: []byte(target)})
	if err != nil {
		t.Fatalf("symlink: %v", err)
	}
	got, err := fs.v.ReadLink(ctx, a.Ino)
	if err != nil || string(got) != target {
		t.Fatalf("readlink: %q, %v; want %q", got, err, target)
	}
	if a.Length != uint64(len(target)) {
		t.Errorf("symlink length %d, want %d", a.Length, len(target))
	}
	ino := fs.create(meta.RootIno, "f", 0o644, nil)
	_, err = fs.v.ReadLink(ctx, ino)
	wantErrno(t, "readlink of a file", err, syscall.EINVAL)
}

// testXattrs sets, lists, replaces and removes extended attributes.
func testXattrs(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, nil)
	const create, replace = 1, 2 // XATTR_CREATE, XATTR_REPLACE
	steps := []struct {
		what  string
		err   error
		errno syscall.Errno
	}{
		{"set", fs.v.SetXattr(ctx, ino, "user.a", []byte("1"), 0), 0},
		{"create existing", fs.v.SetXattr(ctx, ino, "user.a", []byte("2"), create), syscall.EEXIST},
		{"replace missing", fs.v.SetXattr(ctx, ino, "user.b", []byte("2"), replace), syscall.ENODATA},
		{"replace", fs.v.SetXattr(ctx, ino, "user.a", []byte("3"), replace), 0},
		{"set another", fs.v.SetXattr(ctx, ino, "user.b", nil, 0), 0},
	}
	for _, s := range steps {
		wantErrno(t, s.what, s.err, s.errno)
	}
	if v, err := fs.v.GetXattr(ctx, ino, "user.a"); err != nil || string(v) != "3" {
		t.Errorf("get user.a: %q, %v", v, err)
	}
	names, err := fs.v.ListXattr(ctx, ino)
	if err != nil || len(names) != 2 {
		t.Errorf("list: %q, %v; want user.a and user.b", names, err)
	}
	wantErrno(t, "remove", fs.v.RemoveXattr(ctx, ino, "user.a"), 0)
	_, err = fs.v.GetXattr(ctx, ino, "user.a")
	wantErrno(t, "get removed", err, syscall.ENODATA)
	wantErrno(t, "remove removed", fs.v.RemoveXattr(ctx, ino, "user.a"), syscall.ENODATA)
	wantErrno(t, "attribute of an internal file", fs.v.SetXattr(ctx, vfs.ControlIno, "user.a", nil, 0), syscall.EPERM)
}

// tree is the namespace testErrno works in.
type tree struct {
	dir     meta.Ino // /d holding file x and directory sub
	sub     meta.Ino // /d/sub holding file y
	empty   meta.Ino // /e, empty
	file    meta.Ino // /f
	private meta.Ino // /private, 0700 root, holding p
	ro      meta.Ino // /ro, 0755 root, holding r (0666)
	secret  meta.Ino // /secret, 0600 root
	pub     meta.Ino // /pub, 0644 root
	sticky  meta.Ino // /sticky, 01777, holding bfile of user B
}

func makeTree(fs *fsys) tree {
	var tr tree
	tr.dir = fs.mkdir(meta.RootIno, "d", 0o755)
	fs.create(tr.dir, "x", 0o644, []byte("x"))
	tr.sub = fs.mkdir(tr.dir, "sub", 0o755)
	fs.create(tr.sub, "y", 0o644, nil)
	tr.empty = fs.mkdir(meta.RootIno, "e", 0o755)
	tr.file = fs.create(meta.RootIno, "f", 0o644, []byte("data"))
	tr.private = fs.mkdir(meta.RootIno, "private", 0o700)
	fs.create(tr.private, "p", 0o644, nil)
	tr.ro = fs.mkdir(meta.RootIno, "ro", 0o755)
	fs.create(tr.ro, "r", 0o666, nil)
	tr.secret = fs.create(meta.RootIno, "secret", 0o600, []byte("s"))
	tr.pub = fs.create(meta.RootIno, "pub", 0o644, []byte("p"))
	tr.sticky = fs.mkdir(meta.RootIno, "sticky", 0o1777)
	_, fh, err := fs.v.Create(asUser(uidB), tr.sticky, []byte("bfile"), 0o666, 0, syscall.O_RDWR|syscall.O_CREAT)
	if err != nil {
		fs.t.Fatalf("create as user B: %v", err)
	}
	fs.close(fh)
	return tr
}

// testErrno checks the errno of failing operations, each against the same
// tree, as root and as unprivileged users.
func testErrno(t *testing.T, fs *fsys) {
	tr := makeTree(fs)
	root, userA := asRoot(), asUser(uidA)
	file := func(typ uint8) meta.NewNode { return meta.NewNode{Type: typ, Mode: 0o755} }
	lookup := func(ctx context.Context, parent meta.Ino, name string) error {
		_, err := fs.v.Lookup(ctx, parent, []byte(name))
		return err
	}
	mknod := func(ctx context.Context, parent meta.Ino, name string, typ uint8) error {
		_, err := fs.v.Mknod(ctx, parent, []byte(name), file(typ))
		return err
	}
	create := func(ctx context.Context, parent meta.Ino, name string, flags uint32) error {
		_, fh, err := fs.v.Create(ctx, parent, []byte(name), 0o644, 0, flags|syscall.O_CREAT)
		if err == nil {
			fs.v.Release(ctx, fh, 0)
		}
		return err
	}
	open := func(ctx context.Context, ino meta.Ino, flags uint32) error {
		fh, err := fs.openAs(ctx, ino, flags)
		if err == nil {
			fs.v.Release(ctx, fh, 0)
		}
		return err
	}
	rename := func(ctx context.Context, sp meta.Ino, sn string, dp meta.Ino, dn string, flags uint32) error {
		return fs.v.Rename(ctx, sp, []byte(sn), dp, []byte(dn), flags)
	}
	link := func(ctx context.Context, ino, parent meta.Ino, name string) error {
		_, err := fs.v.Link(ctx, ino, parent, []byte(name))
		return err
	}
	opendir := func(ctx context.Context, ino meta.Ino) error {
		fh, err := fs.v.OpenDir(ctx, ino)
		if err == nil {
			fs.v.ReleaseDir(fh)
		}
		return err
	}
	long := strings.Repeat("n", 256)
	cases := []struct {
		what string
		err  func() error
		want syscall.Errno
	}{
		{"lookup of a missing name", func() error { return lookup(root, meta.RootIno, "missing") }, syscall.ENOENT},
		{"lookup in a file", func() error { return lookup(root, tr.file, "x") }, syscall.ENOTDIR},
		{"lookup of a name too long", func() error { return lookup(root, meta.RootIno, long) }, syscall.ENAMETOOLONG},
		{"create of a name too long", func() error { return create(root, meta.RootIno, long, syscall.O_RDWR) }, syscall.ENAMETOOLONG},
		{"mkdir of a name too long", func() error { return mknod(root, meta.RootIno, long, store.TypeDir) }, syscall.ENAMETOOLONG},
		{"rename to a name too long", func() error { return rename(root, meta.RootIno, "f", meta.RootIno, long, 0) }, syscall.ENAMETOOLONG},
		{"link to a name too long", func() error { return link(root, tr.file, meta.RootIno, long) }, syscall.ENAMETOOLONG},
		{"unlink of a missing name", func() error { return fs.v.Unlink(root, meta.RootIno, []byte("missing")) }, syscall.ENOENT},
		{"rmdir of a missing name", func() error { return fs.v.Rmdir(root, meta.RootIno, []byte("missing")) }, syscall.ENOENT},
		{"rename of a missing name", func() error { return rename(root, meta.RootIno, "missing", meta.RootIno, "z", 0) }, syscall.ENOENT},
		{"mknod in a missing directory", func() error { return mknod(root, 1<<40, "z", store.TypeFile) }, syscall.ENOENT},

		{"mkdir over a directory", func() error { return mknod(root, meta.RootIno, "d", store.TypeDir) }, syscall.EEXIST},
		{"mkdir over a file", func() error { return mknod(root, meta.RootIno, "f", store.TypeDir) }, syscall.EEXIST},
		{"mknod over a file", func() error { return mknod(root, meta.RootIno, "f", store.TypeFIFO) }, syscall.EEXIST},
		{"create O_EXCL over a file", func() error { return create(root, meta.RootIno, "f", syscall.O_RDWR|syscall.O_EXCL) }, syscall.EEXIST},
		{"link over a name", func() error { return link(root, tr.file, tr.dir, "x") }, syscall.EEXIST},
		{"rename NOREPLACE over a name", func() error { return rename(root, meta.RootIno, "f", tr.dir, "x", meta.RenameNoReplace) }, syscall.EEXIST},
		{"rename EXCHANGE with a missing name", func() error { return rename(root, meta.RootIno, "f", tr.dir, "zz", meta.RenameExchange) }, syscall.ENOENT},

		{"mkdir in a file", func() error { return mknod(root, tr.file, "z", store.TypeDir) }, syscall.ENOTDIR},
		{"opendir of a file", func() error { return opendir(root, tr.file) }, syscall.ENOTDIR},
		{"rmdir of a file", func() error { return fs.v.Rmdir(root, meta.RootIno, []byte("f")) }, syscall.ENOTDIR},
		{"rename a directory over a file", func() error { return rename(root, meta.RootIno, "e", meta.RootIno, "f", 0) }, syscall.ENOTDIR},

		{"open a directory for writing", func() error { return open(root, tr.dir, syscall.O_RDWR) }, syscall.EISDIR},
		{"unlink a directory", func() error { return fs.v.Unlink(root, meta.RootIno, []byte("e")) }, syscall.EISDIR},
		{"rename a file over a directory", func() error { return rename(root, meta.RootIno, "f", meta.RootIno, "e", 0) }, syscall.EISDIR},
		{"link a directory", func() error { return link(root, tr.dir, meta.RootIno, "dlink") }, syscall.EPERM},

		{"rmdir a directory with entries", func() error { return fs.v.Rmdir(root, meta.RootIno, []byte("d")) }, syscall.ENOTEMPTY},
		{"rename over a directory with entries", func() error { return rename(root, meta.RootIno, "e", meta.RootIno, "d", 0) }, syscall.ENOTEMPTY},
		{"rename a directory into itself", func() error { return rename(root, meta.RootIno, "d", tr.sub, "d", 0) }, syscall.EINVAL},

		{"lookup in a 0700 directory as another user", func() error { return lookup(userA, tr.private, "p") }, syscall.EACCES},
		{"opendir of a 0700 directory as another user", func() error { return opendir(userA, tr.private) }, syscall.EACCES},
		{"create in a 0755 directory as another user", func() error { return create(userA, tr.ro, "z", syscall.O_RDWR) }, syscall.EACCES},
		{"mkdir in a 0755 directory as another user", func() error { return mknod(userA, tr.ro, "z", store.TypeDir) }, syscall.EACCES},
		{"unlink in a 0755 directory as another user", func() error { return fs.v.Unlink(userA, tr.ro, []byte("r")) }, syscall.EACCES},
		{"rename out of a 0755 directory as another user", func() error { return rename(userA, tr.ro, "r", meta.RootIno, "z", 0) }, syscall.EACCES},
		{"open a 0600 file for reading as another user", func() error { return open(userA, tr.secret, syscall.O_RDONLY) }, syscall.EACCES},
		{"open a 0644 file for writing as another user", func() error { return open(userA, tr.pub, syscall.O_WRONLY) }, syscall.EACCES},
		{"open a 0644 file with O_TRUNC as another user", func() error { return open(userA, tr.pub, syscall.O_RDONLY|syscall.O_TRUNC) }, syscall.EACCES},
		{"access W of a 0644 file as another user", func() error { return fs.v.Access(userA, tr.pub, 2) }, syscall.EACCES},
		{"unlink another user's file in a sticky directory", func() error { return fs.v.Unlink(userA, tr.sticky, []byte("bfile")) }, syscall.EPERM},
		{"chmod another user's file", func() error {
			_, err := fs.v.SetAttr(userA, tr.pub, meta.SetMode, &meta.Attr{Mode: 0o777})
			return err
		}, syscall.EPERM},
		{"set a user xattr on another user's file", func() error { return fs.v.SetXattr(userA, tr.pub, "user.x", []byte("1"), 0) }, syscall.EACCES},
	}
	for _, tc := range cases {
		wantErrno(t, tc.what, tc.err(), tc.want)
	}
	// The failures changed nothing.
	for _, name := range []string{"d", "e", "f", "private", "ro", "secret", "pub", "sticky"} {
		fs.lookup(meta.RootIno, name)
	}
	if got := string(fs.content(tr.pub)); got != "p" {
		t.Errorf("pub reads %q after the failures", got)
	}
}

// dirNames lists directory ino (without . and ..).
func dirNames(t *testing.T, fs *fsys, ino meta.Ino) []string {
	t.Helper()
	fh, err := fs.v.OpenDir(asRoot(), ino)
	if err != nil {
		t.Fatalf("opendir %d: %v", ino, err)
	}
	defer fs.v.ReleaseDir(fh)
	var names []string
	err = fs.v.ReadDir(asRoot(), fh, 0, false, func(e vfs.DirEntry) bool {
		if n := string(e.Name); n != "." && n != ".." {
			names = append(names, n)
		}
		return true
	})
	if err != nil {
		t.Fatalf("readdir %d: %v", ino, err)
	}
	return names
}

// testReplacedWhileOpen: a file or an empty directory that a rename
// replaces while a handle holds it open keeps answering GetAttr, with no
// link left, as fstat(2) of its descriptor does on a local file system
// (generic/035 of the Linux file-system tests): not ESTALE, and not the
// link count it had.
func testReplacedWhileOpen(t *testing.T, fs *fsys) {
	ctx := asRoot()
	src := fs.mkdir(meta.RootIno, "src", 0o755)
	dst := fs.mkdir(meta.RootIno, "dst", 0o755)
	dh, err := fs.v.OpenDir(ctx, dst)
	if err != nil {
		t.Fatalf("opendir: %v", err)
	}
	defer fs.v.ReleaseDir(dh)
	f1 := fs.create(meta.RootIno, "f1", 0o644, []byte("one"))
	f2 := fs.create(meta.RootIno, "f2", 0o644, []byte("two"))
	fh := fs.open(f2, syscall.O_RDONLY)
	defer fs.close(fh)
	for _, r := range [][2]string{{"src", "dst"}, {"f1", "f2"}} {
		if err := fs.v.Rename(ctx, meta.RootIno, []byte(r[0]), meta.RootIno, []byte(r[1]), 0); err != nil {
			t.Fatalf("rename %s over %s: %v", r[0], r[1], err)
		}
	}
	for _, c := range []struct {
		name string
		ino  meta.Ino
		typ  uint8
	}{{"the replaced directory", dst, store.TypeDir}, {"the replaced file", f2, store.TypeFile}} {
		a, err := fs.v.GetAttr(ctx, c.ino)
		if err != nil {
			t.Errorf("getattr of %s, still open: %v", c.name, err)
			continue
		}
		if a.Nlink != 0 || a.Type != c.typ || a.Ino != c.ino {
			t.Errorf("getattr of %s, still open: inode %d type %d with %d links, want inode %d type %d with none",
				c.name, a.Ino, a.Type, a.Nlink, c.ino, c.typ)
		}
	}
	if got := fs.lookup(meta.RootIno, "dst").Ino; got != src {
		t.Errorf("dst names inode %d after the rename, want %d", got, src)
	}
	if got := fs.lookup(meta.RootIno, "f2").Ino; got != f1 {
		t.Errorf("f2 names inode %d after the rename, want %d", got, f1)
	}
	if got := fs.read(fh, 0, 10); string(got) != "two" {
		t.Errorf("the replaced file reads %q through its handle, want %q", got, "two")
	}
}

// testOpenAfterHeldChmod: an open checks permissions against a mode or
// owner change held back on the open file (vfs.VFS.SetAttr): a program
// made executable while its writer still holds it open runs (the open of
// execve asks for execute permission), and a file made private while
// open is refused to others at once.
func testOpenAfterHeldChmod(t *testing.T, fs *fsys) {
	const owner = 1000
	ctx := asUser(owner)
	dir := fs.mkdir(meta.RootIno, "d", 0o777)
	a, fh, err := fs.v.Create(ctx, dir, []byte("prog"), 0o644, 0, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	defer fs.close(fh)
	if err := fs.v.Write(ctx, fh, 0, []byte("#!")); err != nil {
		t.Fatalf("write: %v", err)
	}
	for _, c := range []struct {
		what  string
		mode  uint16
		ctx   context.Context
		flags uint32
		want  syscall.Errno
	}{
		{"execve by the owner after chmod 0755", 0o755, ctx, syscall.O_RDONLY | meta.FlagOpenExec, 0},
		{"a read by another user after chmod 0600", 0o600, asUser(owner + 1), syscall.O_RDONLY, syscall.EACCES},
	} {
		if _, err := fs.v.SetAttr(ctx, a.Ino, meta.SetMode, &meta.Attr{Mode: c.mode}); err != nil {
			t.Fatalf("chmod %o: %v", c.mode, err)
		}
		_, h, err := fs.v.Open(c.ctx, a.Ino, c.flags)
		wantErrno(t, c.what, err, c.want)
		if err == nil {
			fs.close(h)
		}
	}
}
