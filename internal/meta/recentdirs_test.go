package meta_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// testClock is a clock that moves only when told.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestDirAttrReuse checks what GetAttr of a directory answers while the
// client remembers the attributes its own changes committed
// (Config.DirAttrReuse): the engine's values after its own changes, its
// own later attribute changes at once, ENOENT once the directory is gone,
// and another client's change no later than DirAttrReuse after it.
func TestDirAttrReuse(t *testing.T) {
	ctx := context.Background()
	st := kvstore.New(mem.New(t.Name()))
	if _, err := meta.FormatVolume(ctx, st, &meta.Format{Name: "test", UUID: "u", Storage: "mem", Bucket: "x", BlockSize: 4096}); err != nil {
		t.Fatal(err)
	}
	clk := &testClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	const reuse = 100 * time.Millisecond
	open := func(reuse time.Duration) *meta.Session {
		c, err := meta.NewSession(ctx, st, meta.Config{Now: clk.now, DirAttrReuse: reuse, DirMtimeSkip: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(ctx) })
		return c
	}
	a, b := open(reuse), open(0) // b is another mount, and the engine's view
	engine := func(ino meta.Ino) *meta.Attr {
		t.Helper()
		at, err := b.GetAttr(ctx, ino)
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	same := func(step string, got, want *meta.Attr) {
		t.Helper()
		if got.Mode != want.Mode || got.Nlink != want.Nlink || got.Mtime != want.Mtime || got.Mtimensec != want.Mtimensec ||
			got.Ctime != want.Ctime || got.Ctimensec != want.Ctimensec || got.Uid != want.Uid {
			t.Fatalf("%s: GetAttr = %+v, want %+v", step, *got, *want)
		}
	}
	getA := func(ino meta.Ino) *meta.Attr {
		t.Helper()
		at, err := a.GetAttr(ctx, ino)
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	file := meta.NewNode{Type: store.TypeFile, Mode: 0o644}
	d, err := a.Mknod(ctx, meta.RootIno, []byte("d"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"create", func() error { _, err := a.Mknod(ctx, d.Ino, []byte("f"), file); return err }},
		{"mkdir", func() error {
			_, err := a.Mknod(ctx, d.Ino, []byte("sub"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
			return err
		}},
		{"link", func() error {
			f, err := a.Lookup(ctx, d.Ino, []byte("f"))
			if err != nil {
				return err
			}
			_, err = a.Link(ctx, f.Ino, d.Ino, []byte("g"))
			return err
		}},
		{"rename within", func() error { return a.Rename(ctx, d.Ino, []byte("g"), d.Ino, []byte("h"), 0) }},
		{"unlink", func() error { return a.Unlink(ctx, d.Ino, []byte("h")) }},
		{"rmdir", func() error { return a.Rmdir(ctx, d.Ino, []byte("sub")) }},
		{"own chmod", func() error {
			_, err := a.SetAttr(ctx, d.Ino, meta.SetMode, &meta.Attr{Mode: 0o700})
			return err
		}},
		{"own xattr", func() error { return a.SetXattr(ctx, d.Ino, "user.x", []byte("1"), 0) }},
	}
	for _, s := range steps {
		clk.advance(time.Millisecond)
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		same(s.name, getA(d.Ino), engine(d.Ino))
		same(s.name+" (root)", getA(meta.RootIno), engine(meta.RootIno))
	}

	// Another mount's change is not seen while the remembered attributes
	// are fresh (as through the kernel's attribute cache), and is once
	// DirAttrReuse has passed.
	if _, err := a.Mknod(ctx, d.Ino, []byte("e"), file); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SetAttr(ctx, d.Ino, meta.SetMode, &meta.Attr{Mode: 0o750}); err != nil {
		t.Fatal(err)
	}
	if got := getA(d.Ino); got.Mode&0o777 != 0o700 {
		t.Fatalf("within DirAttrReuse: mode %o, want the remembered 700", got.Mode&0o777)
	}
	clk.advance(reuse)
	if got := getA(d.Ino); got.Mode&0o777 != 0o750 {
		t.Fatalf("DirAttrReuse after another mount's chmod: mode %o, want 750", got.Mode&0o777)
	}

	// A directory this client removes or moves is not answered from memory.
	if _, err := a.Mknod(ctx, d.Ino, []byte("x"), meta.NewNode{Type: store.TypeDir, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	x, err := a.Lookup(ctx, d.Ino, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Mknod(ctx, x.Ino, []byte("y"), file); err != nil {
		t.Fatal(err)
	}
	if err := a.Rename(ctx, d.Ino, []byte("x"), meta.RootIno, []byte("x2"), 0); err != nil {
		t.Fatal(err)
	}
	same("moved directory", getA(x.Ino), engine(x.Ino))
	if err := a.Unlink(ctx, x.Ino, []byte("y")); err != nil {
		t.Fatal(err)
	}
	if err := a.Rmdir(ctx, meta.RootIno, []byte("x2")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.GetAttr(ctx, x.Ino); !errors.Is(err, meta.ErrNoInode) && !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetAttr of a removed directory: %v, want it gone", err)
	}
}
