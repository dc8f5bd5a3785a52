package meta_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// TestOpenCache checks what OpenCached answers with Config.OpenCache: the
// attributes the last Open read, without a read of the engine, for no
// longer than the cache time; this client's own changes at once; another
// mount's change once the time passed or ForgetAhead dropped the file;
// nothing with the cache off, for a directory, or when the cached
// attributes refuse the caller (Open must give the error).
func TestOpenCache(t *testing.T) {
	ctx := context.Background()
	base := memVolume(t)
	clk := &testClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	const ttl = 10 * time.Second
	st := &countingStore{Store: base}
	a := client(t, st, meta.Config{Now: clk.now, OpenCache: ttl})
	b := client(t, base, meta.Config{Now: clk.now}) // another mount

	f, err := b.Mknod(ctx, meta.RootIno, []byte("f"), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	cached := func(c context.Context, flags uint32) (*meta.Attr, bool) {
		t.Helper()
		got, ok := a.OpenCached(c, f.Ino, flags)
		if ok {
			if err := a.Release(ctx, f.Ino); err != nil {
				t.Fatal(err)
			}
		}
		return got, ok
	}
	open := func() *meta.Attr {
		t.Helper()
		got, err := a.Open(ctx, f.Ino, syscall.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Release(ctx, f.Ino); err != nil {
			t.Fatal(err)
		}
		return got
	}

	if _, ok := cached(ctx, syscall.O_RDONLY); ok {
		t.Fatal("OpenCached answered before any Open")
	}
	open()
	views := st.views
	clk.advance(ttl - time.Millisecond)
	got, ok := cached(ctx, syscall.O_RDWR)
	if !ok || got.Ino != f.Ino || got.Mode != 0o644 {
		t.Fatalf("OpenCached = %+v, %v; want the attributes Open read", got, ok)
	}
	if st.views != views {
		t.Fatalf("%d reads of the engine for a cached open, want 0", st.views-views)
	}

	// Another mount's change goes unseen until the time passes.
	if _, err := b.SetAttr(ctx, f.Ino, meta.SetMode, &meta.Attr{Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	if got, ok := cached(ctx, syscall.O_RDONLY); !ok || got.Mode != 0o644 {
		t.Fatalf("OpenCached = %+v, %v within the cache time; want the old attributes", got, ok)
	}
	clk.advance(time.Millisecond)
	if _, ok := cached(ctx, syscall.O_RDONLY); ok {
		t.Fatal("OpenCached answered once the cache time passed")
	}
	if got := open(); got.Mode != 0o600 {
		t.Fatalf("Open read mode %o, want 600", got.Mode)
	}
	if got, ok := cached(ctx, syscall.O_RDONLY); !ok || got.Mode != 0o600 {
		t.Fatalf("OpenCached = %+v, %v after Open; want mode 600", got, ok)
	}

	// ForgetAhead drops the file.
	a.ForgetAhead(f.Ino)
	if _, ok := cached(ctx, syscall.O_RDONLY); ok {
		t.Fatal("OpenCached answered after ForgetAhead")
	}

	// This client's own change drops the file at once.
	open()
	if _, err := a.SetAttr(ctx, f.Ino, meta.SetMode, &meta.Attr{Mode: 0o640}); err != nil {
		t.Fatal(err)
	}
	if _, ok := cached(ctx, syscall.O_RDONLY); ok {
		t.Fatal("OpenCached answered after this client's chmod")
	}
	if got := open(); got.Mode != 0o640 {
		t.Fatalf("Open read mode %o, want 640", got.Mode)
	}

	// Attributes that refuse the caller leave the answer to Open.
	user := meta.WithCred(ctx, meta.Cred{Uid: 1000, Gid: 1000})
	if _, ok := cached(user, syscall.O_RDONLY); ok {
		t.Fatal("OpenCached let a caller in whom mode 640 of root's file refuses")
	}
	if _, err := a.Open(user, f.Ino, syscall.O_RDONLY); err == nil {
		t.Fatal("Open let the caller in")
	}
	if _, ok := cached(ctx, syscall.O_RDONLY); !ok {
		t.Fatal("OpenCached refused root after a refused open of another caller")
	}

	// A directory is not cached, and neither is anything with the cache off.
	d, err := a.Mknod(ctx, meta.RootIno, []byte("d"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Open(ctx, d.Ino, syscall.O_RDONLY); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.OpenCached(ctx, d.Ino, syscall.O_RDONLY); ok {
		t.Fatal("OpenCached answered for a directory")
	}
	off := client(t, base, meta.Config{Now: clk.now})
	if _, err := off.Open(ctx, f.Ino, syscall.O_RDONLY); err != nil {
		t.Fatal(err)
	}
	if _, ok := off.OpenCached(ctx, f.Ino, syscall.O_RDONLY); ok {
		t.Fatal("OpenCached answered with the cache off")
	}
}

// TestOpenDirCache checks OpenDirCached: the attributes the last OpenDir
// read, without a read of the engine; gone once this client changes the
// directory's entries (even when the change leaves its times alone, by
// DirMtimeSkip) or the cache time passes; and another mount's change
// unseen until then.
func TestOpenDirCache(t *testing.T) {
	ctx := context.Background()
	base := memVolume(t)
	clk := &testClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	const ttl = 10 * time.Second
	st := &countingStore{Store: base}
	a := client(t, st, meta.Config{Now: clk.now, OpenCache: ttl, DirMtimeSkip: time.Hour})
	b := client(t, base, meta.Config{Now: clk.now})

	d, err := b.Mknod(ctx, meta.RootIno, []byte("d"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	opendir := func() *meta.Attr {
		t.Helper()
		got, err := a.OpenDir(ctx, d.Ino)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if _, ok := a.OpenDirCached(ctx, d.Ino); ok {
		t.Fatal("OpenDirCached answered before any OpenDir")
	}
	first := opendir()
	views := st.views
	if got, ok := a.OpenDirCached(ctx, d.Ino); !ok || got.Mtime != first.Mtime || got.Mtimensec != first.Mtimensec {
		t.Fatalf("OpenDirCached = %+v, %v; want what OpenDir read", got, ok)
	}
	if st.views != views {
		t.Fatalf("%d reads of the engine for a cached opendir, want 0", st.views-views)
	}
	if _, ok := a.OpenCached(ctx, d.Ino, syscall.O_RDONLY); ok {
		t.Fatal("OpenCached answered for a directory")
	}

	// Another mount's create goes unseen until the time passes.
	clk.advance(time.Second)
	if _, err := b.Mknod(ctx, d.Ino, []byte("x"), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if got, ok := a.OpenDirCached(ctx, d.Ino); !ok || got.Mtime != first.Mtime {
		t.Fatalf("OpenDirCached = %+v, %v within the cache time; want the old attributes", got, ok)
	}
	clk.advance(ttl)
	if _, ok := a.OpenDirCached(ctx, d.Ino); ok {
		t.Fatal("OpenDirCached answered once the cache time passed")
	}
	if got := opendir(); got.Mtime == first.Mtime && got.Mtimensec == first.Mtimensec {
		t.Fatal("OpenDir read the directory's old times after another mount's create")
	}

	// This client's create drops the directory, though its times stay.
	opendir()
	if _, err := a.Mknod(ctx, d.Ino, []byte("y"), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.OpenDirCached(ctx, d.Ino); ok {
		t.Fatal("OpenDirCached answered after this client's create in the directory")
	}
}
