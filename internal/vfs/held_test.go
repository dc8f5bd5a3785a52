package vfs

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
)

// attrOf returns the attributes of ino as mount m answers them.
func attrOf(t *testing.T, m *mount, ino meta.Ino) *meta.Attr {
	t.Helper()
	a, err := m.GetAttr(as(1), ino)
	if err != nil {
		t.Fatalf("getattr %d: %v", ino, err)
	}
	return a
}

// TestHeldAttrs checks the attribute changes a mount holds back while a
// file has buffered writes (SetAttr): this mount sees them at once,
// another when the writes commit, and they land in the order they were
// made relative to writes, truncations and xattr changes.
func TestHeldAttrs(t *testing.T) {
	const old = 1_000_000_000 // a time in 2001, as tar restores
	times := &meta.Attr{Atime: old, Mtime: old}
	var touched meta.Attr // what the touch case's SetAttr answered
	for _, tc := range []struct {
		name string
		// steps run on the open file fh of ino between the first write
		// and close, on mount a; b is another mount.
		steps func(t *testing.T, a, b *mount, ino meta.Ino, fh uint64)
		want  func(t *testing.T, got *meta.Attr)
	}{
		{"tar: times, owner, mode", func(t *testing.T, a, b *mount, ino meta.Ino, fh uint64) {
			for _, c := range []struct {
				mask uint32
				in   *meta.Attr
			}{
				{meta.SetAtime | meta.SetMtime, times},
				{meta.SetUid | meta.SetGid, &meta.Attr{Uid: 5, Gid: 6}},
				{meta.SetMode, &meta.Attr{Mode: 0o600}},
			} {
				if _, err := a.SetAttr(as(1), ino, c.mask, c.in); err != nil {
					t.Fatalf("setattr %#x: %v", c.mask, err)
				}
			}
			if got := attrOf(t, a, ino); got.Uid != 5 || got.Mode&0o7777 != 0o600 || got.Mtime != old {
				t.Errorf("this mount sees uid %d mode %o mtime %d before close", got.Uid, got.Mode&0o7777, got.Mtime)
			}
			if got := attrOf(t, b, ino); got.Uid != 0 || got.Mode&0o7777 != 0o644 {
				t.Errorf("another mount sees uid %d mode %o before the writes commit", got.Uid, got.Mode&0o7777)
			}
		}, func(t *testing.T, got *meta.Attr) {
			if got.Uid != 5 || got.Gid != 6 || got.Mode&0o7777 != 0o600 || got.Mtime != old || got.Atime != old || got.Length != 5 {
				t.Errorf("after close: %+v", got)
			}
		}},
		{"a write after held times", func(t *testing.T, a, b *mount, ino meta.Ino, fh uint64) {
			if _, err := a.SetAttr(as(1), ino, meta.SetMtime, times); err != nil {
				t.Fatal(err)
			}
			if err := a.Write(as(1), fh, 5, []byte("more")); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, got *meta.Attr) {
			if got.Mtime == old || got.Length != 9 {
				t.Errorf("mtime %d length %d: the later write must set mtime, and land", got.Mtime, got.Length)
			}
		}},
		{"truncate after a held chmod", func(t *testing.T, a, b *mount, ino meta.Ino, fh uint64) {
			if _, err := a.SetAttr(as(1), ino, meta.SetMode, &meta.Attr{Mode: 0o640}); err != nil {
				t.Fatal(err)
			}
			if _, err := a.SetAttr(as(1), ino, meta.SetSize, &meta.Attr{Length: 3}); err != nil {
				t.Fatal(err)
			}
			if got := attrOf(t, b, ino); got.Mode&0o7777 != 0o640 || got.Length != 3 {
				t.Errorf("another mount after the truncation: mode %o length %d", got.Mode&0o7777, got.Length)
			}
		}, func(t *testing.T, got *meta.Attr) {
			if got.Mode&0o7777 != 0o640 || got.Length != 3 {
				t.Errorf("after close: mode %o length %d, want 640, 3", got.Mode&0o7777, got.Length)
			}
		}},
		{"xattr after a held chmod", func(t *testing.T, a, b *mount, ino meta.Ino, fh uint64) {
			if _, err := a.SetAttr(as(1), ino, meta.SetMode, &meta.Attr{Mode: 0o604}); err != nil {
				t.Fatal(err)
			}
			if err := a.SetXattr(as(1), ino, "user.k", []byte("v"), 0); err != nil {
				t.Fatal(err)
			}
			if got := attrOf(t, b, ino); got.Mode&0o7777 != 0o604 {
				t.Errorf("another mount after the xattr: mode %o, want 604", got.Mode&0o7777)
			}
		}, func(t *testing.T, got *meta.Attr) {
			if got.Mode&0o7777 != 0o604 {
				t.Errorf("after close: mode %o", got.Mode&0o7777)
			}
		}},
		{"touch keeps the time it was asked at", func(t *testing.T, a, b *mount, ino meta.Ino, fh uint64) {
			at, err := a.SetAttr(as(1), ino, meta.SetAtimeNow|meta.SetMtimeNow, &meta.Attr{})
			if err != nil {
				t.Fatal(err)
			}
			touched = *at
			time.Sleep(20 * time.Millisecond)
		}, func(t *testing.T, got *meta.Attr) {
			if got.Mtime != touched.Mtime || got.Mtimensec != touched.Mtimensec || got.Atimensec != touched.Atimensec {
				t.Errorf("mtime %d.%09d atime ...%09d after close, want the touch's %d.%09d ...%09d",
					got.Mtime, got.Mtimensec, got.Atimensec, touched.Mtime, touched.Mtimensec, touched.Atimensec)
			}
		}},
		{"not held: chmod by someone else", func(t *testing.T, a, b *mount, ino meta.Ino, fh uint64) {
			other := meta.WithCred(as(2), meta.Cred{Uid: 1000, Gid: 1000, Pid: 2})
			if _, err := a.SetAttr(other, ino, meta.SetMode, &meta.Attr{Mode: 0o777}); meta.Errno(err) != syscall.EPERM {
				t.Errorf("chmod by a non-owner: %v, want EPERM", err)
			}
		}, func(t *testing.T, got *meta.Attr) {
			if got.Mode&0o7777 != 0o644 {
				t.Errorf("after close: mode %o", got.Mode&0o7777)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vol := newVolume(t, 0)
			a, b := vol.mount(t), vol.mount(t)
			at, fh, err := a.Create(as(1), meta.RootIno, []byte("f"), 0o644, 0, syscall.O_RDWR)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Write(as(1), fh, 0, []byte("hello")); err != nil {
				t.Fatal(err)
			}
			tc.steps(t, a, b, at.Ino, fh)
			a.close(t, fh)
			tc.want(t, attrOf(t, b, at.Ino))
			if got := attrOf(t, a, at.Ino); *got != *attrOf(t, b, at.Ino) {
				t.Errorf("the mounts disagree after close:\n%+v\n%+v", got, attrOf(t, b, at.Ino))
			}
		})
	}
}

// TestHeldAttrsWithoutWrites checks changes held on an open file with
// nothing buffered (cp -a sets times and mode after copy_file_range):
// another mount sees them heldDelay later, or at close.
func TestHeldAttrsWithoutWrites(t *testing.T) {
	vol := newVolume(t, 0)
	a, b := vol.mount(t), vol.mount(t)
	ino := a.create(t, "f", []byte("data"))
	for _, closeEarly := range []bool{false, true} {
		mode := uint16(0o600)
		if closeEarly {
			mode = 0o640
		}
		fh := a.open(t, ino)
		if _, err := a.SetAttr(as(1), ino, meta.SetMode, &meta.Attr{Mode: mode}); err != nil {
			t.Fatal(err)
		}
		if got := attrOf(t, a, ino).Mode & 0o7777; got != mode {
			t.Errorf("this mount: mode %o, want %o", got, mode)
		}
		if closeEarly {
			a.close(t, fh)
		} else {
			deadline := time.Now().Add(5 * heldDelay)
			for attrOf(t, b, ino).Mode&0o7777 != mode && time.Now().Before(deadline) {
				time.Sleep(heldDelay / 10)
			}
		}
		if got := attrOf(t, b, ino).Mode & 0o7777; got != mode {
			t.Errorf("close=%v: another mount sees mode %o, want %o", closeEarly, got, mode)
		}
		if !closeEarly {
			a.close(t, fh)
		}
	}
}

// TestHeldAttrsRaceRelease checks a change made while the last handle of
// its file is released, after Release flushed (pjdfstest's chmod right
// after a create's close): once Release returns, the change is in the
// engine, where a caller that no longer finds the file open reads it.
func TestHeldAttrsRaceRelease(t *testing.T) {
	vol := newVolume(t, 0)
	a, b := vol.mount(t), vol.mount(t)
	ino := a.create(t, "f", []byte("data"))
	const mode = 0o640
	testHookReleaseFlushed = func(meta.Ino) {
		if _, err := a.SetAttr(as(1), ino, meta.SetMode, &meta.Attr{Mode: mode}); err != nil {
			t.Error(err)
		}
	}
	defer func() { testHookReleaseFlushed = nil }()
	a.close(t, a.open(t, ino))
	testHookReleaseFlushed = nil
	if got := attrOf(t, b, ino).Mode & 0o7777; got != mode {
		t.Fatalf("another mount sees mode %o after the release returned, want %o", got, mode)
	}
	// The file is closed now: a change goes to the engine at once.
	if _, err := a.SetAttr(as(1), ino, meta.SetMode, &meta.Attr{Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	if got := attrOf(t, b, ino).Mode & 0o7777; got != 0o600 {
		t.Fatalf("another mount sees mode %o after a change of the closed file, want 600", got)
	}
}

// TestHeldAttrsBeforeAccess checks that an access recorded while changes
// are held back on its file lands after them: a utimes made while a
// writer still has the file open, then an open for reading (which
// records the access, as the kernel may serve its reads from its pages),
// must leave the access's atime, not the utimes'.
func TestHeldAttrsBeforeAccess(t *testing.T) {
	const old = 1000 // before the file's mtime, so relatime updates
	for _, mode := range []string{meta.AtimeRelative, meta.AtimeStrict} {
		t.Run(mode, func(t *testing.T) {
			vol := newVolume(t, 0)
			a := vol.mountWith(t, meta.Config{AtimeMode: mode})
			ino := a.create(t, "f", []byte("data"))
			w := a.open(t, ino) // the writer, still open
			if _, err := a.SetAttr(as(1), ino, meta.SetAtime|meta.SetMtime, &meta.Attr{Atime: old, Mtime: old + 1000}); err != nil {
				t.Fatal(err)
			}
			_, r, err := a.Open(as(1), ino, syscall.O_RDONLY)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(a.read(t, r, 4)); got != "data" {
				t.Errorf("read %q", got)
			}
			a.close(t, r)
			a.close(t, w)
			got := attrOf(t, a, ino)
			if got.Atime == old {
				t.Errorf("atime %d after an open for reading that followed the utimes: the held utimes landed after the access", got.Atime)
			}
			if got.Mtime != old+1000 {
				t.Errorf("mtime %d, want the utimes' %d", got.Mtime, old+1000)
			}
		})
	}
}

// stalledApply is a metadata client whose ApplyAttrChanges does not
// answer until its caller gives up or the test ends, as over an engine
// that stopped answering.
type stalledApply struct {
	Meta
	end chan struct{}
}

func (s stalledApply) ApplyAttrChanges(ctx context.Context, ino meta.Ino, changes []meta.AttrChange) (*meta.Attr, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.end:
		return nil, syscall.EIO
	}
}

// TestCloseGivesUpHeldAttrs checks that Close, told to give up (a mount
// stopping on a stalled engine after a signal), does not wait for the
// held-back changes of an open file to reach the engine.
func TestCloseGivesUpHeldAttrs(t *testing.T) {
	vol := newVolume(t, 0)
	bg := context.Background()
	c, err := meta.NewSession(bg, vol.st, meta.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := chunk.New(vol.obj, chunk.Config{BlockSize: 64 << 10})
	end := make(chan struct{})
	v := New(stalledApply{Meta: c, end: end}, s, Config{})
	v.SetKernel(&fakeKernel{})
	t.Cleanup(func() {
		close(end)
		s.Close(bg)
		c.Close(bg)
	})
	a, fh, err := v.Create(as(1), meta.RootIno, []byte("f"), 0o644, 0, syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.SetAttr(as(1), a.Ino, meta.SetMode, &meta.Attr{Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	_ = fh // left open: the change stays held
	ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- v.Close(ctx) }()
	select {
	case err := <-closed:
		if err == nil {
			t.Errorf("Close gave up on a held change and reported no error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close still waits for the stalled engine 30 s after its context ended")
	}
}
