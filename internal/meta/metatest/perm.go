package metatest

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

func testPermissions(t *testing.T, ns newStoreFunc) {
	c := setup(t, ns, meta.Config{})
	locked := mk(t, root, c, meta.RootIno, "locked", store.TypeDir, 0o755)
	mk(t, root, c, locked.Ino, "f", store.TypeFile, 0o666)
	mk(t, root, c, locked.Ino, "d", store.TypeDir, 0o777)
	mine := mk(t, user1, c, meta.RootIno, "mine", store.TypeFile, 0o644)

	_, err := c.Mknod(user1, locked.Ino, []byte("x"), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	wantErr(t, "create in root-owned 0755 dir", err, syscall.EACCES)
	_, err = c.Mknod(user1, locked.Ino, []byte("x"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
	wantErr(t, "mkdir in root-owned 0755 dir", err, syscall.EACCES)
	wantErr(t, "unlink in root-owned 0755 dir", c.Unlink(user1, locked.Ino, []byte("f")), syscall.EACCES)
	wantErr(t, "rmdir in root-owned 0755 dir", c.Rmdir(user1, locked.Ino, []byte("d")), syscall.EACCES)
	_, err = c.Link(user1, mine.Ino, locked.Ino, []byte("x"))
	wantErr(t, "link into root-owned 0755 dir", err, syscall.EACCES)
	wantErr(t, "rename out of root-owned 0755 dir",
		c.Rename(user1, locked.Ino, []byte("f"), meta.RootIno, []byte("g"), 0), syscall.EACCES)
	wantErr(t, "rename into root-owned 0755 dir",
		c.Rename(user1, meta.RootIno, []byte("mine"), locked.Ino, []byte("g"), 0), syscall.EACCES)
	// Reading and searching the directory are allowed.
	if a, err := c.Lookup(user1, locked.Ino, []byte("f")); err != nil || a.Mode != 0o666 {
		t.Fatalf("lookup in 0755 dir: %+v, %v", a, err)
	}
	if _, err := c.OpenDir(user1, locked.Ino); err != nil {
		t.Fatalf("opendir 0755 dir: %v", err)
	}
	// A directory without search permission hides its entries.
	if _, err := c.SetAttr(root, locked.Ino, meta.SetMode, &meta.Attr{Mode: 0o700}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Lookup(user1, locked.Ino, []byte("f"))
	wantErr(t, "lookup in 0700 dir", err, syscall.EACCES)
	_, err = c.OpenDir(user1, locked.Ino)
	wantErr(t, "opendir 0700 dir", err, syscall.EACCES)
	// Open checks the access mode.
	_, err = c.Open(user2, mine.Ino, syscall.O_RDWR)
	wantErr(t, "open other's 0644 file rdwr", err, syscall.EACCES)
	_, err = c.Open(user2, mine.Ino, syscall.O_RDONLY|syscall.O_TRUNC)
	wantErr(t, "open other's 0644 file with O_TRUNC", err, syscall.EACCES)
	if _, err := c.Open(user2, mine.Ino, syscall.O_RDONLY); err != nil {
		t.Fatalf("open other's 0644 file read-only: %v", err)
	}
	wantErr(t, "release", c.Release(user2, mine.Ino), 0)
	_, err = c.SetAttr(user2, mine.Ino, meta.SetSize, &meta.Attr{Length: 10})
	wantErr(t, "truncate other's 0644 file", err, syscall.EACCES)
	_, err = c.SetAttr(user2, mine.Ino, meta.SetSize|meta.SetViaHandle, &meta.Attr{Length: 10})
	wantErr(t, "truncate through a handle", err, 0)

	// Moving a directory to another parent rewrites its "..", which needs
	// write access to it; renaming it in place does not.
	shared := mk(t, root, c, meta.RootIno, "shared", store.TypeDir, 0o777)
	mk(t, root, c, shared.Ino, "rd", store.TypeDir, 0o755)
	wantErr(t, "move other's 0755 dir to another parent",
		c.Rename(user1, shared.Ino, []byte("rd"), meta.RootIno, []byte("rd"), 0), syscall.EACCES)
	wantErr(t, "rename other's 0755 dir in place",
		c.Rename(user1, shared.Ino, []byte("rd"), shared.Ino, []byte("rd2"), 0), 0)
}

func testSticky(t *testing.T, ns newStoreFunc) {
	c := setup(t, ns, meta.Config{})
	tmp := mk(t, root, c, meta.RootIno, "tmp", store.TypeDir, 0o1777)
	if tmp.Mode != 0o1777 {
		t.Fatalf("tmp mode %o, want 1777", tmp.Mode)
	}
	mk(t, user1, c, tmp.Ino, "theirs", store.TypeFile, 0o666)
	mk(t, user1, c, tmp.Ino, "theirs2", store.TypeFile, 0o666)
	mk(t, user1, c, tmp.Ino, "theirdir", store.TypeDir, 0o777)
	mk(t, user2, c, tmp.Ino, "own", store.TypeFile, 0o644)
	mk(t, user2, c, tmp.Ino, "own2", store.TypeFile, 0o644)

	wantErr(t, "unlink other's file in sticky dir", c.Unlink(user2, tmp.Ino, []byte("theirs")), syscall.EPERM)
	wantErr(t, "rmdir other's dir in sticky dir", c.Rmdir(user2, tmp.Ino, []byte("theirdir")), syscall.EPERM)
	wantErr(t, "rename other's file in sticky dir",
		c.Rename(user2, tmp.Ino, []byte("theirs"), tmp.Ino, []byte("x"), 0), syscall.EPERM)
	wantErr(t, "rename over other's file in sticky dir",
		c.Rename(user2, tmp.Ino, []byte("own2"), tmp.Ino, []byte("theirs"), 0), syscall.EPERM)
	wantErr(t, "exchange with other's file in sticky dir",
		c.Rename(user2, tmp.Ino, []byte("own2"), tmp.Ino, []byte("theirs"), meta.RenameExchange), syscall.EPERM)
	lookup(t, c, tmp.Ino, "theirs")
	lookup(t, c, tmp.Ino, "own2")

	wantErr(t, "unlink own file in sticky dir", c.Unlink(user2, tmp.Ino, []byte("own")), 0)
	wantErr(t, "rename own file in sticky dir",
		c.Rename(user2, tmp.Ino, []byte("own2"), tmp.Ino, []byte("own3"), 0), 0)
	wantErr(t, "root unlinks in sticky dir", c.Unlink(root, tmp.Ino, []byte("theirs")), 0)
	// The directory's owner may remove anything in it.
	if _, err := c.SetAttr(root, tmp.Ino, meta.SetUid, &meta.Attr{Uid: 1001}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "dir owner unlinks in sticky dir", c.Unlink(user2, tmp.Ino, []byte("theirs2")), 0)
}

func testSetgid(t *testing.T, ns newStoreFunc) {
	c := setup(t, ns, meta.Config{})
	sg := mk(t, root, c, meta.RootIno, "sg", store.TypeDir, 0o2777)
	if _, err := c.SetAttr(root, sg.Ino, meta.SetGid, &meta.Attr{Gid: 50}); err != nil {
		t.Fatal(err)
	}
	if a := getattr(t, c, sg.Ino); a.Mode != 0o2777 || a.Gid != 50 {
		t.Fatalf("sg: mode %o gid %d", a.Mode, a.Gid)
	}
	f := mk(t, user1, c, sg.Ino, "f", store.TypeFile, 0o644)
	if f.Gid != 50 || f.Uid != 1000 || f.Mode != 0o644 {
		t.Fatalf("file in setgid dir: uid %d gid %d mode %o; want 1000/50/644", f.Uid, f.Gid, f.Mode)
	}
	sub := mk(t, user1, c, sg.Ino, "sub", store.TypeDir, 0o755)
	if sub.Gid != 50 || sub.Mode != 0o2755 {
		t.Fatalf("dir in setgid dir: gid %d mode %o; want 50/2755", sub.Gid, sub.Mode)
	}
	// The bit propagates further down.
	subsub := mk(t, user1, c, sub.Ino, "subsub", store.TypeDir, 0o700)
	if subsub.Gid != 50 || subsub.Mode != 0o2700 {
		t.Fatalf("dir in inherited setgid dir: gid %d mode %o; want 50/2700", subsub.Gid, subsub.Mode)
	}
	// A setgid file for a group the creator is not in loses the bit.
	g := mk(t, user1, c, sg.Ino, "g", store.TypeFile, 0o2755)
	if g.Gid != 50 || g.Mode&0o2000 != 0 {
		t.Fatalf("setgid file by non-member: gid %d mode %o; want 50 without setgid", g.Gid, g.Mode)
	}
	plain := mk(t, user1, c, meta.RootIno, "plain", store.TypeDir, 0o755)
	if plain.Gid != 1000 || plain.Mode != 0o755 {
		t.Fatalf("dir in plain dir: gid %d mode %o", plain.Gid, plain.Mode)
	}
	// chmod by a non-member drops setgid.
	a, err := c.SetAttr(user1, plain.Ino, meta.SetMode, &meta.Attr{Mode: 0o2755})
	if err != nil || a.Mode != 0o2755 {
		t.Fatalf("chmod g+s by member: %+v, %v", a, err)
	}
	a, err = c.SetAttr(user1, f.Ino, meta.SetMode, &meta.Attr{Mode: 0o2755})
	if err != nil || a.Mode != 0o755 {
		t.Fatalf("chmod g+s by non-member: %+v, %v; want mode 755", a, err)
	}
}

func testOwnership(t *testing.T, ns newStoreFunc) {
	c := setup(t, ns, meta.Config{})
	rootFile := mk(t, root, c, meta.RootIno, "rootfile", store.TypeFile, 0o666)
	f := mk(t, user1, c, meta.RootIno, "f", store.TypeFile, 0o644)

	_, err := c.SetAttr(user1, rootFile.Ino, meta.SetMode, &meta.Attr{Mode: 0o777})
	wantErr(t, "chmod by non-owner", err, syscall.EPERM)
	testKillSetID(t, c)
	a, err := c.SetAttr(user1, f.Ino, meta.SetMode, &meta.Attr{Mode: 0o600})
	if err != nil || a.Mode != 0o600 {
		t.Fatalf("chmod by owner: %+v, %v", a, err)
	}
	if a := getattr(t, c, f.Ino); a.Mode != 0o600 || a.Ctime < f.Ctime {
		t.Fatalf("after chmod: %+v", a)
	}
	_, err = c.SetAttr(user1, f.Ino, meta.SetUid, &meta.Attr{Uid: 1001})
	wantErr(t, "chown by non-root", err, syscall.EPERM)
	_, err = c.SetAttr(user2, f.Ino, meta.SetUid|meta.SetGid, &meta.Attr{Uid: 1000, Gid: 1001})
	wantErr(t, "chgrp by non-owner", err, syscall.EPERM)
	_, err = c.SetAttr(user1, f.Ino, meta.SetGid, &meta.Attr{Gid: 1001})
	wantErr(t, "chgrp to a group the owner is not in", err, syscall.EPERM)
	member := meta.WithCred(context.Background(), meta.Cred{Uid: 1000, Gid: 1000, Gids: []uint32{77}})
	if a, err := c.SetAttr(member, f.Ino, meta.SetGid, &meta.Attr{Gid: 77}); err != nil || a.Gid != 77 {
		t.Fatalf("chgrp to a supplementary group: %+v, %v", a, err)
	}
	if a, err := c.SetAttr(root, f.Ino, meta.SetUid|meta.SetGid, &meta.Attr{Uid: 5, Gid: 6}); err != nil || a.Uid != 5 || a.Gid != 6 {
		t.Fatalf("chown by root: %+v, %v", a, err)
	}
	// chown drops setuid, and setgid of a group-executable file.
	if _, err := c.SetAttr(root, f.Ino, meta.SetMode, &meta.Attr{Mode: 0o6755}); err != nil {
		t.Fatal(err)
	}
	if a, err := c.SetAttr(root, f.Ino, meta.SetUid, &meta.Attr{Uid: 7}); err != nil || a.Mode != 0o755 {
		t.Fatalf("chown of a 6755 file: %+v, %v; want mode 755", a, err)
	}
	_, err = c.SetAttr(user1, f.Ino, meta.SetFlags, &meta.Attr{Flags: meta.FlagImmutable})
	wantErr(t, "chattr by non-root", err, syscall.EPERM)
	if _, err := c.SetAttr(root, f.Ino, meta.SetFlags, &meta.Attr{Flags: meta.FlagImmutable}); err != nil {
		t.Fatal(err)
	}
	_, err = c.SetAttr(root, f.Ino, meta.SetMode, &meta.Attr{Mode: 0o644})
	wantErr(t, "chmod of an immutable file", err, syscall.EPERM)
	wantErr(t, "unlink of an immutable file", c.Unlink(root, meta.RootIno, []byte("f")), syscall.EPERM)
	_, err = c.Link(root, f.Ino, meta.RootIno, []byte("f2"))
	wantErr(t, "link of an immutable file", err, syscall.EPERM)
	if _, err := c.SetAttr(root, f.Ino, meta.SetFlags, &meta.Attr{}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "unlink after clearing immutable", c.Unlink(root, meta.RootIno, []byte("f")), 0)
}

// testKillSetID checks the mode change a write by a non-owner makes
// (the FUSE kernel sends it before the write): clearing setuid and
// setgid, and nothing else, is allowed to whoever may write the file.
func testKillSetID(t *testing.T, c *meta.Session) {
	t.Helper()
	cases := []struct {
		name      string
		mode, set uint16
		want      syscall.Errno
	}{
		{"clear setuid", 0o4777, 0o777, 0},
		{"clear setgid", 0o2777, 0o777, 0},
		{"clear both", 0o6777, 0o777, 0},
		{"clear setuid and a permission bit", 0o4777, 0o775, syscall.EPERM},
		{"set setuid", 0o777, 0o4777, syscall.EPERM},
		{"no change", 0o4777, 0o4777, syscall.EPERM},
		{"clear setuid without write access", 0o4755, 0o755, syscall.EPERM},
	}
	for i, tc := range cases {
		f := mk(t, root, c, meta.RootIno, fmt.Sprintf("setid%d", i), store.TypeFile, 0o644)
		if _, err := c.SetAttr(root, f.Ino, meta.SetMode, &meta.Attr{Mode: tc.mode}); err != nil {
			t.Fatal(err)
		}
		a, err := c.SetAttr(user1, f.Ino, meta.SetMode, &meta.Attr{Mode: tc.set})
		wantErr(t, tc.name, err, tc.want)
		want := tc.set
		if tc.want != 0 {
			want = tc.mode
		}
		if got := getattr(t, c, f.Ino).Mode; got != want {
			t.Fatalf("%s: mode %o, want %o (returned %+v)", tc.name, got, want, a)
		}
	}
}

func testUtimens(t *testing.T, ns newStoreFunc) {
	c := setup(t, ns, meta.Config{})
	f := mk(t, root, c, meta.RootIno, "f", store.TypeFile, 0o666)
	ro := mk(t, root, c, meta.RootIno, "ro", store.TypeFile, 0o644)
	explicit := &meta.Attr{Atime: 1000, Atimensec: 5, Mtime: 2000, Mtimensec: 7}

	_, err := c.SetAttr(user1, f.Ino, meta.SetAtime|meta.SetMtime, explicit)
	wantErr(t, "explicit utimens by non-owner of writable file", err, syscall.EPERM)
	_, err = c.SetAttr(user1, f.Ino, meta.SetMtime, explicit)
	wantErr(t, "explicit mtime by non-owner", err, syscall.EPERM)
	_, err = c.SetAttr(user1, f.Ino, meta.SetAtimeNow|meta.SetMtimeNow, &meta.Attr{})
	wantErr(t, "utimens now by non-owner with write access", err, 0)
	_, err = c.SetAttr(user1, ro.Ino, meta.SetAtimeNow|meta.SetMtimeNow, &meta.Attr{})
	wantErr(t, "utimens now by non-owner without write access", err, syscall.EACCES)

	a, err := c.SetAttr(root, f.Ino, meta.SetAtime|meta.SetMtime, explicit)
	if err != nil {
		t.Fatal(err)
	}
	got := getattr(t, c, f.Ino)
	for _, x := range []*meta.Attr{a, got} {
		if x.Atime != 1000 || x.Atimensec != 5 || x.Mtime != 2000 || x.Mtimensec != 7 {
			t.Fatalf("times after utimens: %+v", x)
		}
	}
	if got.Ctime < f.Ctime {
		t.Fatalf("ctime went back: %d < %d", got.Ctime, f.Ctime)
	}
}
