package metatest

import (
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// rename calls c.Rename as root on names and checks the errno.
func rename(t *testing.T, c *meta.Session, sp meta.Ino, sn string, dp meta.Ino, dn string, flags uint32, want syscall.Errno) {
	t.Helper()
	err := c.Rename(root, sp, []byte(sn), dp, []byte(dn), flags)
	wantErr(t, "rename "+sn+" -> "+dn, err, want)
}

func testRename(t *testing.T, ns newStoreFunc) {
	cases := []struct {
		name string
		fn   func(t *testing.T, c *meta.Session)
	}{
		{"Simple", func(t *testing.T, c *meta.Session) {
			f := mkfile(t, c, meta.RootIno, "f")
			d := mkdir(t, c, meta.RootIno, "d")
			rename(t, c, meta.RootIno, "f", meta.RootIno, "g", 0, 0)
			wantGone(t, c, meta.RootIno, "f")
			if g := lookup(t, c, meta.RootIno, "g"); g.Ino != f.Ino {
				t.Fatalf("g is inode %d, want %d", g.Ino, f.Ino)
			}
			rename(t, c, meta.RootIno, "g", d.Ino, "h", 0, 0)
			if h := lookup(t, c, d.Ino, "h"); h.Ino != f.Ino || h.Nlink != 1 {
				t.Fatalf("d/h: %+v", h)
			}
			wantNlink(t, c, d.Ino, 2)
			rename(t, c, meta.RootIno, "missing", meta.RootIno, "x", 0, syscall.ENOENT)
			rename(t, c, meta.RootIno, "d", meta.RootIno, "x", meta.RenameNoReplace|meta.RenameExchange, syscall.EINVAL)
		}},
		{"DirAcrossParents", func(t *testing.T, c *meta.Session) {
			p1 := mkdir(t, c, meta.RootIno, "p1")
			p2 := mkdir(t, c, meta.RootIno, "p2")
			x := mkdir(t, c, p1.Ino, "x")
			wantNlink(t, c, p1.Ino, 3)
			rename(t, c, p1.Ino, "x", p2.Ino, "y", 0, 0)
			wantNlink(t, c, p1.Ino, 2)
			wantNlink(t, c, p2.Ino, 3)
			wantNlink(t, c, meta.RootIno, 4)
			if up := lookup(t, c, x.Ino, ".."); up.Ino != p2.Ino {
				t.Fatalf("after move, .. of x is %d, want p2 %d", up.Ino, p2.Ino)
			}
		}},
		{"OverFile", func(t *testing.T, c *meta.Session) {
			a := mkfile(t, c, meta.RootIno, "a")
			b := mkfile(t, c, meta.RootIno, "b")
			rename(t, c, meta.RootIno, "a", meta.RootIno, "b", 0, 0)
			wantGone(t, c, meta.RootIno, "a")
			if got := lookup(t, c, meta.RootIno, "b"); got.Ino != a.Ino {
				t.Fatalf("b is inode %d, want %d", got.Ino, a.Ino)
			}
			_, err := c.GetAttr(root, b.Ino)
			wantErr(t, "getattr of replaced file", err, syscall.ENOENT)
		}},
		{"OverLinkedFile", func(t *testing.T, c *meta.Session) {
			mkfile(t, c, meta.RootIno, "a")
			b := mkfile(t, c, meta.RootIno, "b")
			if _, err := c.Link(root, b.Ino, meta.RootIno, []byte("b2")); err != nil {
				t.Fatal(err)
			}
			rename(t, c, meta.RootIno, "a", meta.RootIno, "b", 0, 0)
			wantNlink(t, c, b.Ino, 1) // the other name keeps it
			if got := lookup(t, c, meta.RootIno, "b2"); got.Ino != b.Ino {
				t.Fatalf("b2 is inode %d, want %d", got.Ino, b.Ino)
			}
		}},
		{"OverEmptyDir", func(t *testing.T, c *meta.Session) {
			a := mkdir(t, c, meta.RootIno, "a")
			b := mkdir(t, c, meta.RootIno, "b")
			wantNlink(t, c, meta.RootIno, 4)
			rename(t, c, meta.RootIno, "a", meta.RootIno, "b", 0, 0)
			if got := lookup(t, c, meta.RootIno, "b"); got.Ino != a.Ino {
				t.Fatalf("b is inode %d, want %d", got.Ino, a.Ino)
			}
			wantNlink(t, c, meta.RootIno, 3)
			_, err := c.GetAttr(root, b.Ino)
			wantErr(t, "getattr of replaced dir", err, syscall.ENOENT)
		}},
		{"OverEmptyDirAcrossParents", func(t *testing.T, c *meta.Session) {
			p := mkdir(t, c, meta.RootIno, "p")
			a := mkdir(t, c, meta.RootIno, "a")
			mkdir(t, c, p.Ino, "b")
			rename(t, c, meta.RootIno, "a", p.Ino, "b", 0, 0)
			wantNlink(t, c, meta.RootIno, 3) // root: p only
			wantNlink(t, c, p.Ino, 3)        // p: a replaced b
			if up := lookup(t, c, a.Ino, ".."); up.Ino != p.Ino {
				t.Fatalf(".. of moved dir is %d, want %d", up.Ino, p.Ino)
			}
		}},
		{"OverNonEmptyDir", func(t *testing.T, c *meta.Session) {
			mkdir(t, c, meta.RootIno, "a")
			b := mkdir(t, c, meta.RootIno, "b")
			mkfile(t, c, b.Ino, "f")
			rename(t, c, meta.RootIno, "a", meta.RootIno, "b", 0, syscall.ENOTEMPTY)
			lookup(t, c, meta.RootIno, "a")
			lookup(t, c, b.Ino, "f")
		}},
		{"TypeMismatch", func(t *testing.T, c *meta.Session) {
			mkfile(t, c, meta.RootIno, "f")
			mkdir(t, c, meta.RootIno, "d")
			rename(t, c, meta.RootIno, "f", meta.RootIno, "d", 0, syscall.EISDIR)
			rename(t, c, meta.RootIno, "d", meta.RootIno, "f", 0, syscall.ENOTDIR)
			lookup(t, c, meta.RootIno, "f")
			lookup(t, c, meta.RootIno, "d")
		}},
		{"OverOwnHardLink", func(t *testing.T, c *meta.Session) {
			f := mkfile(t, c, meta.RootIno, "f")
			if _, err := c.Link(root, f.Ino, meta.RootIno, []byte("h")); err != nil {
				t.Fatal(err)
			}
			rename(t, c, meta.RootIno, "f", meta.RootIno, "h", 0, 0)
			for _, name := range []string{"f", "h"} {
				if got := lookup(t, c, meta.RootIno, name); got.Ino != f.Ino || got.Nlink != 2 {
					t.Fatalf("%s after rename over own link: %+v", name, got)
				}
			}
			rename(t, c, meta.RootIno, "f", meta.RootIno, "h", meta.RenameNoReplace, syscall.EEXIST)
			rename(t, c, meta.RootIno, "f", meta.RootIno, "f", 0, 0)
			lookup(t, c, meta.RootIno, "f")
		}},
		{"NoReplace", func(t *testing.T, c *meta.Session) {
			a := mkfile(t, c, meta.RootIno, "a")
			b := mkfile(t, c, meta.RootIno, "b")
			rename(t, c, meta.RootIno, "a", meta.RootIno, "b", meta.RenameNoReplace, syscall.EEXIST)
			if got := lookup(t, c, meta.RootIno, "b"); got.Ino != b.Ino {
				t.Fatalf("b replaced despite RENAME_NOREPLACE")
			}
			rename(t, c, meta.RootIno, "a", meta.RootIno, "c", meta.RenameNoReplace, 0)
			if got := lookup(t, c, meta.RootIno, "c"); got.Ino != a.Ino {
				t.Fatalf("c is inode %d, want %d", got.Ino, a.Ino)
			}
		}},
		{"IntoOwnSubtree", func(t *testing.T, c *meta.Session) {
			a := mkdir(t, c, meta.RootIno, "a")
			b := mkdir(t, c, a.Ino, "b")
			cc := mkdir(t, c, b.Ino, "c")
			rename(t, c, meta.RootIno, "a", cc.Ino, "x", 0, syscall.EINVAL)
			rename(t, c, meta.RootIno, "a", a.Ino, "x", 0, syscall.EINVAL)
			rename(t, c, a.Ino, "b", cc.Ino, "x", 0, syscall.EINVAL)
			rename(t, c, meta.RootIno, "a", cc.Ino, "x", meta.RenameNoReplace, syscall.EINVAL)
			// Moving a subdirectory up is fine.
			rename(t, c, b.Ino, "c", meta.RootIno, "c", 0, 0)
			wantNlink(t, c, b.Ino, 2)
			wantNlink(t, c, meta.RootIno, 4)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, setup(t, ns, meta.Config{})) })
	}
}

func testRenameExchange(t *testing.T, ns newStoreFunc) {
	cases := []struct {
		name string
		fn   func(t *testing.T, c *meta.Session)
	}{
		{"Files", func(t *testing.T, c *meta.Session) {
			a := mkfile(t, c, meta.RootIno, "a")
			b := mk(t, root, c, meta.RootIno, "b", store.TypeSymlink, 0)
			rename(t, c, meta.RootIno, "a", meta.RootIno, "b", meta.RenameExchange, 0)
			if got := lookup(t, c, meta.RootIno, "a"); got.Ino != b.Ino || got.Type != store.TypeSymlink {
				t.Fatalf("a after exchange: %+v", got)
			}
			if got := lookup(t, c, meta.RootIno, "b"); got.Ino != a.Ino || got.Type != store.TypeFile {
				t.Fatalf("b after exchange: %+v", got)
			}
			for _, e := range listAll(t, c, meta.RootIno, 10, false) {
				want := map[string]uint8{"a": store.TypeSymlink, "b": store.TypeFile}[string(e.Name)]
				if e.Type != want {
					t.Fatalf("entry %q has type %d, want %d", e.Name, e.Type, want)
				}
			}
			rename(t, c, meta.RootIno, "a", meta.RootIno, "missing", meta.RenameExchange, syscall.ENOENT)
		}},
		{"DirAndFileAcrossParents", func(t *testing.T, c *meta.Session) {
			p1 := mkdir(t, c, meta.RootIno, "p1")
			p2 := mkdir(t, c, meta.RootIno, "p2")
			d := mkdir(t, c, p1.Ino, "d")
			mkfile(t, c, d.Ino, "inside") // exchange does not need empty dirs
			f := mkfile(t, c, p2.Ino, "f")
			rename(t, c, p1.Ino, "d", p2.Ino, "f", meta.RenameExchange, 0)
			if got := lookup(t, c, p1.Ino, "d"); got.Ino != f.Ino {
				t.Fatalf("p1/d is %d, want file %d", got.Ino, f.Ino)
			}
			if got := lookup(t, c, p2.Ino, "f"); got.Ino != d.Ino {
				t.Fatalf("p2/f is %d, want dir %d", got.Ino, d.Ino)
			}
			wantNlink(t, c, p1.Ino, 2)
			wantNlink(t, c, p2.Ino, 3)
			wantNlink(t, c, meta.RootIno, 4)
			if up := lookup(t, c, d.Ino, ".."); up.Ino != p2.Ino {
				t.Fatalf(".. of exchanged dir is %d, want %d", up.Ino, p2.Ino)
			}
			lookup(t, c, d.Ino, "inside")
		}},
		{"DirsAcrossParents", func(t *testing.T, c *meta.Session) {
			p1 := mkdir(t, c, meta.RootIno, "p1")
			p2 := mkdir(t, c, meta.RootIno, "p2")
			x := mkdir(t, c, p1.Ino, "x")
			y := mkdir(t, c, p2.Ino, "y")
			mkdir(t, c, p2.Ino, "z")
			rename(t, c, p1.Ino, "x", p2.Ino, "y", meta.RenameExchange, 0)
			wantNlink(t, c, p1.Ino, 3)
			wantNlink(t, c, p2.Ino, 4)
			if up := lookup(t, c, x.Ino, ".."); up.Ino != p2.Ino {
				t.Fatalf(".. of x is %d, want %d", up.Ino, p2.Ino)
			}
			if up := lookup(t, c, y.Ino, ".."); up.Ino != p1.Ino {
				t.Fatalf(".. of y is %d, want %d", up.Ino, p1.Ino)
			}
			// The names stayed: p1/x is now y. The parents were updated, so
			// a later subtree check walks the right chain.
			if got := lookup(t, c, p1.Ino, "x"); got.Ino != y.Ino {
				t.Fatalf("p1/x is %d, want y %d", got.Ino, y.Ino)
			}
			rename(t, c, p1.Ino, "x", y.Ino, "loop", 0, syscall.EINVAL)
			rename(t, c, p2.Ino, "y", y.Ino, "x", 0, 0) // x moves below y: fine
		}},
		{"IntoOwnSubtree", func(t *testing.T, c *meta.Session) {
			a := mkdir(t, c, meta.RootIno, "a")
			b := mkdir(t, c, a.Ino, "b")
			mkfile(t, c, b.Ino, "f")
			rename(t, c, meta.RootIno, "a", b.Ino, "f", meta.RenameExchange, syscall.EINVAL)
			rename(t, c, b.Ino, "f", meta.RootIno, "a", meta.RenameExchange, syscall.EINVAL)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, setup(t, ns, meta.Config{})) })
	}
}
