package vfs

import (
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
)

// TestOpenCacheAcrossMounts checks a mount with an open cache
// (meta.Config.OpenCache) beside another mount: its own writes show at
// its next open; another mount's change is missed by opens within the
// cache time (what the option gives up), but not once the kernel was
// given the new attributes, nor after a lock found the change.
func TestOpenCacheAcrossMounts(t *testing.T) {
	vol := newVolume(t, 0)
	a := vol.mount(t)
	b := vol.mountWith(t, meta.Config{Statahead: time.Second, OpenCache: time.Hour})
	ino := a.create(t, "f", []byte("one"))

	// open opens ino as the kernel does: after an ESTALE (the mount saw
	// the kernel's attributes are old), it fetches them and tries again.
	open := func(m *mount, flags uint32) (*meta.Attr, uint64) {
		t.Helper()
		at, fh, err := m.Open(as(1), ino, flags)
		if err == syscall.ESTALE {
			if _, err := m.GetAttr(as(1), ino); err != nil {
				t.Fatal(err)
			}
			at, fh, err = m.Open(as(1), ino, flags)
		}
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return at, fh
	}
	length := func(m *mount) uint64 {
		t.Helper()
		at, fh := open(m, syscall.O_RDONLY)
		m.close(t, fh)
		return at.Length
	}
	rewrite := func(m *mount, data string) {
		t.Helper()
		_, fh := open(m, syscall.O_RDWR)
		if err := m.Write(as(1), fh, 0, []byte(data)); err != nil {
			t.Fatal(err)
		}
		m.close(t, fh)
	}

	if n := length(b); n != 3 {
		t.Fatalf("b opens a file of %d bytes, want 3", n)
	}
	// b's own write: its next open has the new length.
	rewrite(b, "three")
	if n := length(b); n != 5 {
		t.Fatalf("b opens a file of %d bytes after writing 5, want 5", n)
	}
	// a's change: b's opens within the cache time miss it.
	rewrite(a, "seven!!")
	if n := length(b); n != 5 {
		t.Fatalf("b opens a file of %d bytes within its open cache, want the 5 it read", n)
	}
	// Once b's kernel has the new attributes, b's open agrees with them.
	if at, err := b.GetAttr(as(1), ino); err != nil || at.Length != 7 {
		t.Fatalf("b getattr: %+v, %v; want 7 bytes", at, err)
	}
	// (at once: the kernel need not look the name up again)
	at, fh, err := b.Open(as(1), ino, syscall.O_RDONLY)
	if err != nil || at.Length != 7 {
		t.Fatalf("b open after its kernel was given 7 bytes: %+v, %v; want 7 bytes", at, err)
	}
	b.close(t, fh)

	// A lock finds the change, and the next open reads the engine.
	rewrite(a, "eleven!!!!!")
	_, fh = open(b, syscall.O_RDWR)
	if err := b.SetLk(as(1), fh, 1, meta.PosixLock{Start: 0, End: meta.LockEnd, Type: meta.LockWrite, Pid: 1}, false); err != nil {
		t.Fatal(err)
	}
	if err := b.SetLk(as(1), fh, 1, meta.PosixLock{Start: 0, End: meta.LockEnd, Type: meta.LockUnlock, Pid: 1}, false); err != nil {
		t.Fatal(err)
	}
	b.close(t, fh)
	if n := length(b); n != 11 {
		t.Fatalf("b opens a file of %d bytes after a lock found 11, want 11", n)
	}
}
