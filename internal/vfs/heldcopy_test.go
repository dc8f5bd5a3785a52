package vfs

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
)

// countingCopies is a metadata client that counts its transactions that
// copy or change attributes.
type countingCopies struct {
	Meta
	copies, commits, applies atomic.Int32
}

func (c *countingCopies) CopyFileRange(ctx context.Context, src meta.Ino, srcOff uint64, dst meta.Ino, dstOff, length uint64) (uint64, *meta.Attr, error) {
	c.copies.Add(1)
	return c.Meta.CopyFileRange(ctx, src, srcOff, dst, dstOff, length)
}

func (c *countingCopies) CommitCopy(ctx context.Context, cp meta.HeldCopy, held []meta.AttrChange) (meta.Version, *meta.Attr, error) {
	c.commits.Add(1)
	return c.Meta.(meta.CopyCommitter).CommitCopy(ctx, cp, held)
}

func (c *countingCopies) ApplyAttrChanges(ctx context.Context, ino meta.Ino, changes []meta.AttrChange) (*meta.Attr, error) {
	c.applies.Add(1)
	return c.Meta.ApplyAttrChanges(ctx, ino, changes)
}

// readAll reads n bytes of the file fh from off on m.
func readAt(t *testing.T, m *mount, fh uint64, off uint64, n int) string {
	t.Helper()
	p := make([]byte, n)
	got, err := m.Read(as(1), fh, off, p)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return string(p[:got])
}

// TestHeldCopy checks copy_file_range held back on the file it copies
// into (VFS.CopyFileRange): cp -a's copy and the owner, mode and times it
// sets next commit in one transaction; this mount sees the copy at once,
// another mount at close; and whatever this mount does next to either
// file lands after the copy.
func TestHeldCopy(t *testing.T) {
	const old = 1_000_000_000
	const data = "0123456789"
	for _, tc := range []struct {
		name string
		// steps run after the copy of src (open as in) into dst (open
		// as out), on mount a; b is another mount.
		steps func(t *testing.T, a, b *mount, src, dst meta.Ino, in, out uint64)
		// the contents of dst and src after every handle closed
		wantDst, wantSrc string
	}{
		{"cp -a: times, owner and mode after the copy", func(t *testing.T, a, b *mount, src, dst meta.Ino, in, out uint64) {
			if _, err := a.SetAttr(as(1), dst, meta.SetAtime|meta.SetMtime, &meta.Attr{Atime: old, Mtime: old}); err != nil {
				t.Fatal(err)
			}
			if _, err := a.SetAttr(as(1), dst, meta.SetMode, &meta.Attr{Mode: 0o600}); err != nil {
				t.Fatal(err)
			}
			if got := attrOf(t, a, dst); got.Length != 10 || got.Mtime != old || got.Mode&0o7777 != 0o600 {
				t.Errorf("this mount before close: length %d mtime %d mode %o", got.Length, got.Mtime, got.Mode&0o7777)
			}
			if got := attrOf(t, b, dst); got.Length != 0 || got.Mtime == old {
				t.Errorf("another mount before close: length %d mtime %d, want the file as created", got.Length, got.Mtime)
			}
		}, data, data},
		{"read on this mount before close", func(t *testing.T, a, b *mount, src, dst meta.Ino, in, out uint64) {
			if got := readAt(t, a, out, 0, 20); got != data {
				t.Errorf("read %q right after the copy", got)
			}
		}, data, data},
		{"a write over the copy lands after it", func(t *testing.T, a, b *mount, src, dst meta.Ino, in, out uint64) {
			if err := a.Write(as(1), out, 2, []byte("xx")); err != nil {
				t.Fatal(err)
			}
		}, "01xx456789", data},
		{"a write to the source does not reach the copy", func(t *testing.T, a, b *mount, src, dst meta.Ino, in, out uint64) {
			if err := a.Write(as(1), in, 0, []byte("ZZ")); err != nil {
				t.Fatal(err)
			}
		}, data, "ZZ23456789"},
		{"a truncation of the source does not reach the copy", func(t *testing.T, a, b *mount, src, dst meta.Ino, in, out uint64) {
			if _, err := a.SetAttr(as(1), src, meta.SetSize, &meta.Attr{Length: 3}); err != nil {
				t.Fatal(err)
			}
		}, data, "012"},
		{"the source closed and unlinked first", func(t *testing.T, a, b *mount, src, dst meta.Ino, in, out uint64) {
			a.close(t, in)
			if err := a.Unlink(as(1), meta.RootIno, []byte("src")); err != nil {
				t.Fatal(err)
			}
		}, data, ""},
		{"another mount sees it heldDelay later", func(t *testing.T, a, b *mount, src, dst meta.Ino, in, out uint64) {
			deadline := time.Now().Add(5 * heldDelay)
			for attrOf(t, b, dst).Length != 10 && time.Now().Before(deadline) {
				time.Sleep(heldDelay / 10)
			}
			if got := attrOf(t, b, dst).Length; got != 10 {
				t.Errorf("another mount sees length %d %v after the copy, want 10", got, 5*heldDelay)
			}
		}, data, data},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vol := newVolume(t, 0)
			a, b := vol.mount(t), vol.mount(t)
			cm := &countingCopies{Meta: a.meta}
			a.meta = cm
			src := a.create(t, "src", []byte(data))
			in := a.open(t, src)
			da, out, err := a.Create(as(1), meta.RootIno, []byte("dst"), 0o644, 0, syscall.O_RDWR)
			if err != nil {
				t.Fatal(err)
			}
			n, err := a.CopyFileRange(as(1), in, 0, out, 0, 1<<30)
			if err != nil || n != 10 {
				t.Fatalf("copy_file_range: %d, %v; want 10", n, err)
			}
			if got := cm.copies.Load() + cm.commits.Load(); got != 0 {
				t.Errorf("%d transactions at the copy itself, want it held", got)
			}
			tc.steps(t, a, b, src, da.Ino, in, out)
			a.close(t, out)
			if tc.name != "the source closed and unlinked first" {
				a.close(t, in)
			}
			if tc.name == "cp -a: times, owner and mode after the copy" {
				if c, ap := cm.commits.Load(), cm.applies.Load(); c != 1 || ap != 0 {
					t.Errorf("%d copy commits and %d attribute commits, want the copy and the changes after it in one", c, ap)
				}
				if got := attrOf(t, b, da.Ino); got.Mtime != old || got.Mode&0o7777 != 0o600 {
					t.Errorf("another mount after close: mtime %d mode %o", got.Mtime, got.Mode&0o7777)
				}
			}
			for _, f := range []struct {
				name string
				ino  meta.Ino
				want string
			}{{"dst", da.Ino, tc.wantDst}, {"src", src, tc.wantSrc}} {
				if f.want == "" {
					continue
				}
				if got := attrOf(t, b, f.ino).Length; got != uint64(len(f.want)) {
					t.Errorf("%s: another mount sees length %d, want %d", f.name, got, len(f.want))
				}
				fh := b.open(t, f.ino)
				if got := readAt(t, b, fh, 0, 20); got != f.want {
					t.Errorf("%s: another mount reads %q, want %q", f.name, got, f.want)
				}
				b.close(t, fh)
			}
			// This mount's own view of dst moved along with its commit:
			// an open does not take it for another mount's change.
			if _, fh, err := a.Open(as(1), da.Ino, syscall.O_RDONLY); err != nil {
				t.Errorf("open after close: %v", err)
			} else {
				a.close(t, fh)
			}
		})
	}
}

// TestHeldCopyNothingToCopy checks a copy from at or past the source's
// end: it copies nothing and asks the engine nothing.
func TestHeldCopyNothingToCopy(t *testing.T) {
	vol := newVolume(t, 0)
	a := vol.mount(t)
	cm := &countingCopies{Meta: a.meta}
	a.meta = cm
	src := a.create(t, "src", []byte("abc"))
	dst := a.create(t, "dst", nil)
	in, out := a.open(t, src), a.open(t, dst)
	if n, err := a.CopyFileRange(as(1), in, 3, out, 0, 100); err != nil || n != 0 {
		t.Errorf("copy from the end: %d, %v; want 0", n, err)
	}
	a.close(t, out)
	a.close(t, in)
	if got := cm.copies.Load() + cm.commits.Load(); got != 0 {
		t.Errorf("%d copy transactions for a copy of nothing", got)
	}
	if got := attrOf(t, a, dst).Length; got != 0 {
		t.Errorf("dst length %d", got)
	}
}
