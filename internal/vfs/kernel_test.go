package vfs

import (
	"slices"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// TestKernelViewKeepsRecordsForTheTimeout checks that the view keeps a
// record at least as long as the kernel's longest timeout and forgets it
// within two of them.
func TestKernelViewKeepsRecordsForTheTimeout(t *testing.T) {
	now := time.Unix(1000, 0)
	kv := newKernelView(time.Second, 500*time.Millisecond)
	kv.now = func() time.Time { return now }
	kv.mu.rotated = now
	if kv.period < time.Second {
		t.Fatalf("period %v is shorter than the longest timeout", kv.period)
	}
	file := func(length uint64) *meta.Attr {
		return &meta.Attr{Ino: 5, Type: store.TypeFile, Length: length}
	}
	cases := []struct {
		name      string
		recordAt  time.Duration // after the start
		checkAt   time.Duration
		wantNames bool
	}{
		{"at once", 0, 0, true},
		{"just before the timeout", 0, time.Second - time.Millisecond, true},
		{"a period later, after a rotation in between", 0, kv.period + time.Millisecond, true},
		{"two periods later", 0, 2*kv.period + time.Millisecond, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := now
			kv.mu.cur, kv.mu.prev, kv.mu.rotated = newViewGen(), newViewGen(), start
			now = start.Add(c.recordAt)
			kv.entry(1, []byte("f"), file(10))
			if c.checkAt > c.recordAt {
				// Something else is recorded in between, as on a busy mount.
				now = start.Add((c.recordAt + c.checkAt) / 2)
				kv.name(2, []byte("other"))
			}
			now = start.Add(c.checkAt)
			changed := kv.attrChanged(file(20))
			names := kv.takeNames(1)
			if got := slices.Equal(names, []string{"f"}); got != c.wantNames {
				t.Errorf("names of the directory: %v, want them kept: %v", names, c.wantNames)
			}
			if changed != c.wantNames {
				t.Errorf("attributes reported changed: %v, want %v", changed, c.wantNames)
			}
			if again := kv.takeNames(1); len(again) != 0 {
				t.Errorf("names taken twice: %v", again)
			}
			now = start
		})
	}
}

// TestKernelViewAdvance checks that this mount's own commits move the
// record along only from the version the kernel holds, and that a change
// of the change time alone does not count.
func TestKernelViewAdvance(t *testing.T) {
	kv := newKernelView(time.Second)
	a := &meta.Attr{Ino: 7, Type: store.TypeFile, Length: 3, Mtime: 100}
	kv.attr(a)
	b := *a
	b.Length, b.Mtime = 9, 101
	kv.advance(7, meta.VersionOf(a), meta.VersionOf(&b))
	if kv.attrChanged(&b) {
		t.Error("the mount's own commit counts as another mount's change")
	}
	c := b
	c.Ctime = 500 // a rename or chmod
	if kv.attrChanged(&c) {
		t.Error("a change of the change time alone counts as a change")
	}
	d := b
	d.Mtime = 102
	kv.advance(7, meta.VersionOf(a), meta.VersionOf(&d)) // from a version the kernel does not hold
	if !kv.attrChanged(&d) {
		t.Error("a commit on top of another mount's change moved the record")
	}
}

// TestKernelViewListedSettled checks when a kept listing of a directory
// may be trusted: only one begun at least the settle time after the
// directory's modification time, and only while the view remembers it.
func TestKernelViewListedSettled(t *testing.T) {
	start := time.Unix(1000, 0)
	const settle = 100 * time.Millisecond
	dir := &meta.Attr{Ino: 7, Type: store.TypeDir, Mtime: start.Unix()}
	cases := []struct {
		name    string
		listAt  time.Duration // after the directory's modification time; <0: never listed
		checkAt time.Duration
		want    bool
	}{
		{"never listed", -1, time.Second, false},
		{"listed at the change", 0, time.Second, false},
		{"listed within the settle time", settle - time.Millisecond, time.Second, false},
		{"listed at the settle time", settle, time.Second, true},
		{"listed well after", time.Second, 2 * time.Second, true},
		{"listed, then forgotten by the view", settle, settle + 3*time.Second, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now := start
			kv := newKernelView(time.Second)
			kv.now = func() time.Time { return now }
			kv.mu.rotated = now
			if c.listAt >= 0 {
				now = start.Add(c.listAt)
				kv.listing(dir.Ino)
			}
			now = start.Add(c.checkAt)
			if got := kv.listedSettled(dir, settle); got != c.want {
				t.Errorf("listedSettled = %v, want %v", got, c.want)
			}
		})
	}
	off := newKernelView()
	off.listing(dir.Ino)
	if off.listedSettled(dir, 0) {
		t.Error("a view of a kernel that caches nothing trusts a listing")
	}
}
