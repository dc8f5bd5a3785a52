package metatest

import (
	"context"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

func statfs(t *testing.T, c *meta.Session) meta.StatFS {
	t.Helper()
	s, err := c.StatFS(root)
	if err != nil {
		t.Fatalf("statfs: %v", err)
	}
	return s
}

func testStatFS(t *testing.T, ns newStoreFunc) {
	c := setup(t, ns, meta.Config{})
	s0 := statfs(t, c)
	if s0.TotalSpace == 0 || s0.AvailSpace > s0.TotalSpace || s0.AvailInodes == 0 {
		t.Fatalf("statfs of an empty volume: %+v", s0)
	}
	used := func(s meta.StatFS) uint64 { return s.TotalSpace - s.AvailSpace }
	d := mkdir(t, c, meta.RootIno, "d")
	f := mkfile(t, c, d.Ino, "f")
	mkfile(t, c, d.Ino, "g")
	mk(t, root, c, d.Ino, "l", store.TypeSymlink, 0)
	s1 := statfs(t, c)
	if s1.UsedInodes != s0.UsedInodes+4 || s1.AvailInodes != s0.AvailInodes-4 {
		t.Fatalf("inodes after 4 creates: %+v, before %+v", s1, s0)
	}
	if used(s1) != used(s0)+4*4096 {
		t.Fatalf("space after 4 creates: %d, before %d", used(s1), used(s0))
	}
	write(t, c, f.Ino, 0, newSlice(t, c, 0, 10000))
	if s := statfs(t, c); used(s) != used(s0)+3*4096+12288 {
		t.Fatalf("space after a 10000-byte write: %d, want %d", used(s), used(s0)+3*4096+12288)
	}
	if _, err := c.Link(root, f.Ino, meta.RootIno, []byte("f2")); err != nil {
		t.Fatal(err)
	}
	if s := statfs(t, c); s.UsedInodes != s1.UsedInodes {
		t.Fatalf("a hard link changed the inode count: %d, want %d", s.UsedInodes, s1.UsedInodes)
	}
	for _, name := range []string{"f", "g", "l"} {
		wantErr(t, "unlink "+name, c.Unlink(root, d.Ino, []byte(name)), 0)
	}
	wantErr(t, "unlink f2", c.Unlink(root, meta.RootIno, []byte("f2")), 0)
	wantErr(t, "rmdir d", c.Rmdir(root, meta.RootIno, []byte("d")), 0)
	if s := statfs(t, c); s.UsedInodes != s0.UsedInodes || used(s) != used(s0) {
		t.Fatalf("statfs after removing everything: %+v, want %+v", s, s0)
	}
}

// testInodeLimit checks the inode and space limits of a volume.
func testInodeLimit(t *testing.T, ns newStoreFunc) {
	st := openStore(t, ns)
	f := testFormat()
	f.Inodes = 3
	f.Capacity = 3 * 4096
	format(t, st, f)
	c := newClient(t, st, meta.Config{})
	a := mkfile(t, c, meta.RootIno, "a")
	mkfile(t, c, meta.RootIno, "b")
	mkfile(t, c, meta.RootIno, "c")
	_, err := c.Mknod(root, meta.RootIno, []byte("d"), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	wantErr(t, "create past the inode limit", err, syscall.ENOSPC)
	if s := statfs(t, c); s.TotalSpace != 3*4096 || s.AvailInodes != 0 || s.UsedInodes != 3 {
		t.Fatalf("statfs of a full volume: %+v", s)
	}
	_, err = Write(root, c, a.Ino, 0, newSlice(t, c, 0, 4097))
	wantErr(t, "write past the capacity", err, syscall.ENOSPC)
	_, err = c.SetAttr(root, a.Ino, meta.SetSize, &meta.Attr{Length: 8192})
	wantErr(t, "truncate past the capacity", err, syscall.ENOSPC)
	wantErr(t, "unlink c", c.Unlink(root, meta.RootIno, []byte("c")), 0)
	mkfile(t, c, meta.RootIno, "d")
}

func testReadOnly(t *testing.T, ns newStoreFunc) {
	st := openStore(t, ns)
	format(t, st, testFormat())
	rw := newClient(t, st, meta.Config{})
	d := mkdir(t, rw, meta.RootIno, "d")
	f := mkfile(t, rw, d.Ino, "f")
	if err := rw.SetXattr(root, f.Ino, "user.a", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	ro := newClient(t, st, meta.Config{ReadOnly: true})
	if a, err := ro.Lookup(root, d.Ino, []byte("f")); err != nil || a.Ino != f.Ino {
		t.Fatalf("read-only lookup: %+v, %v", a, err)
	}
	if v, err := ro.GetXattr(root, f.Ino, "user.a"); err != nil || string(v) != "1" {
		t.Fatalf("read-only getxattr: %q, %v", v, err)
	}
	if es, err := ro.ReadDir(root, d.Ino, nil, 10, true); err != nil || len(es) != 1 {
		t.Fatalf("read-only readdir: %v, %v", es, err)
	}
	if _, err := ro.Open(root, f.Ino, syscall.O_RDONLY); err != nil {
		t.Fatalf("read-only open for reading: %v", err)
	}
	wantErr(t, "release", ro.Release(root, f.Ino), 0)
	changes := map[string]func() error{
		"mknod": func() error {
			_, err := ro.Mknod(root, d.Ino, []byte("x"), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
			return err
		},
		"link":   func() error { _, err := ro.Link(root, f.Ino, d.Ino, []byte("x")); return err },
		"unlink": func() error { return ro.Unlink(root, d.Ino, []byte("f")) },
		"rmdir":  func() error { return ro.Rmdir(root, meta.RootIno, []byte("d")) },
		"rename": func() error { return ro.Rename(root, d.Ino, []byte("f"), d.Ino, []byte("g"), 0) },
		"setattr": func() error {
			_, err := ro.SetAttr(root, f.Ino, meta.SetMode, &meta.Attr{Mode: 0o600})
			return err
		},
		"truncate": func() error {
			_, err := ro.SetAttr(root, f.Ino, meta.SetSize, &meta.Attr{Length: 1})
			return err
		},
		"setxattr":    func() error { return ro.SetXattr(root, f.Ino, "user.b", nil, 0) },
		"removexattr": func() error { return ro.RemoveXattr(root, f.Ino, "user.a") },
		"write": func() error {
			_, err := Write(root, ro, f.Ino, 0, meta.Slice{Id: 1, Size: 1, Len: 1})
			return err
		},
		"open-write":   func() error { _, err := ro.Open(root, f.Ino, syscall.O_WRONLY); return err },
		"open-trunc":   func() error { _, err := ro.Open(root, f.Ino, syscall.O_RDONLY|syscall.O_TRUNC); return err },
		"access-write": func() error { return ro.Access(root, f.Ino, meta.MayWrite) },
	}
	for name, fn := range changes {
		wantErr(t, "read-only "+name, fn(), syscall.EROFS)
	}
	if a := getattr(t, rw, f.Ino); a.Mode != 0o644 || a.Length != 0 || a.Nlink != 1 {
		t.Fatalf("read-only client changed f: %+v", a)
	}
}

func testFormatTwice(t *testing.T, ns newStoreFunc) {
	ctx := context.Background()
	st := openStore(t, ns)
	format(t, st, testFormat())
	again := testFormat()
	again.UUID = "another-uuid"
	again.TrashDays = 3 // mutable
	created, err := meta.FormatVolume(ctx, st, again)
	if err != nil || created {
		t.Fatalf("format again with the same settings: created %v, %v", created, err)
	}
	got, err := meta.Load(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if got.UUID != testFormat().UUID || got.TrashDays != 3 || got.BlockSize != 4096 || got.MetaVersion != meta.MetaVersion {
		t.Fatalf("settings after second format: %+v", got)
	}
	changed := testFormat()
	changed.BlockSize = 1024
	if _, err := meta.FormatVolume(ctx, st, changed); err == nil {
		t.Fatalf("format with a different block size succeeded")
	}
	changed = testFormat()
	changed.Bucket = "y"
	if _, err := meta.FormatVolume(ctx, st, changed); err == nil {
		t.Fatalf("format with a different bucket succeeded")
	}
	if got, err := meta.Load(ctx, st); err != nil || got.BlockSize != 4096 || got.Bucket != "x" {
		t.Fatalf("settings after refused format: %+v, %v", got, err)
	}
	bad := testFormat()
	bad.BlockSize = 100
	if _, err := meta.FormatVolume(ctx, openStore(t, ns), bad); err == nil {
		t.Fatalf("format with block size 100 KiB succeeded")
	}
	if _, err := meta.NewSession(ctx, openStore(t, ns), meta.Config{}); err == nil {
		t.Fatalf("client on an unformatted store succeeded")
	}
	// The root exists once, whatever the number of formats; turning the
	// trash on made .trash, its one subdirectory.
	c := newClient(t, st, meta.Config{})
	if r := getattr(t, c, meta.RootIno); r.Type != store.TypeDir || r.Nlink != 3 {
		t.Fatalf("root after reformat: %+v", r)
	}
	if tr := lookup(t, c, meta.RootIno, meta.TrashName); tr.Ino != meta.TrashIno || tr.Type != store.TypeDir {
		t.Fatalf("trash after a reformat with trash days: %+v", tr)
	}
}
