package vfs

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// TestByHandle checks the two lookups the kernel sends to decode a file
// handle whose inode it forgot: ByHandle (LOOKUP of ".") finds a file or
// directory by number alone, whoever asks and whatever the modes, until
// it is deleted (gone, or only in the trash), and ParentOf (LOOKUP of
// "..") gives a directory's parent.
func TestByHandle(t *testing.T) {
	for _, trash := range []int{0, 1} {
		t.Run(fmt.Sprintf("trash=%d", trash), func(t *testing.T) {
			m := newVolume(t, trash).mount(t)
			ctx := as(1)
			mkdir := func(parent meta.Ino, name string, mode uint16) meta.Ino {
				t.Helper()
				a, err := m.Mknod(ctx, parent, []byte(name), meta.NewNode{Type: store.TypeDir, Mode: mode})
				if err != nil {
					t.Fatalf("mkdir %s: %v", name, err)
				}
				return a.Ino
			}
			// d is root's alone: the lookups check no permission.
			d := mkdir(meta.RootIno, "d", 0o700)
			e := mkdir(d, "e", 0o700)
			gone := mkdir(d, "gone", 0o755)
			f := m.create(t, "f", []byte("f"))
			if _, err := m.Link(ctx, f, e, []byte("f2")); err != nil {
				t.Fatal(err)
			}
			g := m.create(t, "g", []byte("g"))
			for _, name := range []string{"f", "g"} {
				if err := m.Unlink(ctx, meta.RootIno, []byte(name)); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.Rmdir(ctx, d, []byte("gone")); err != nil {
				t.Fatal(err)
			}

			user := meta.WithCred(context.Background(), meta.Cred{Uid: 1000, Gid: 1000, Pid: 2})
			for _, tc := range []struct {
				name   string
				lookup func(context.Context, meta.Ino) (*meta.Attr, error)
				ino    meta.Ino
				want   meta.Ino // 0: want errno
				errno  syscall.Errno
			}{
				{". of a directory", m.ByHandle, e, e, 0},
				{". of a file that kept one of two names", m.ByHandle, f, f, 0},
				{". of the root", m.ByHandle, meta.RootIno, meta.RootIno, 0},
				{". of an internal file", m.ByHandle, ControlIno, ControlIno, 0},
				{". of a deleted file", m.ByHandle, g, 0, syscall.ESTALE},
				{". of a removed directory", m.ByHandle, gone, 0, syscall.ESTALE},
				{". of an inode never made", m.ByHandle, 1 << 40, 0, syscall.ESTALE},
				{".. of a directory", m.ParentOf, e, d, 0},
				{".. of a directory in the root", m.ParentOf, d, meta.RootIno, 0},
				{".. of the root", m.ParentOf, meta.RootIno, meta.RootIno, 0},
				{".. of a file", m.ParentOf, f, 0, syscall.ENOTDIR},
				{".. of a removed directory", m.ParentOf, gone, 0, syscall.ESTALE},
			} {
				a, err := tc.lookup(user, tc.ino)
				switch {
				case tc.want == 0 && err != tc.errno:
					t.Errorf("%s: %v, want %v", tc.name, err, tc.errno)
				case tc.want != 0 && err != nil:
					t.Errorf("%s: %v", tc.name, err)
				case tc.want != 0 && a.Ino != tc.want:
					t.Errorf("%s: inode %d, want %d", tc.name, a.Ino, tc.want)
				}
			}
		})
	}
}
