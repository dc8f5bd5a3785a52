package vfs

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// countingStore counts the read transactions run on a store.
type countingStore struct {
	store.Store
	views atomic.Int64
}

func (s *countingStore) View(ctx context.Context, fn func(store.Tx) error) error {
	s.views.Add(1)
	return s.Store.View(ctx, fn)
}

// TestXattrsAtOpen: an open that reads a file as having no extended
// attributes answers the kernel's capability check and cp -a's listing
// without the engine while the file is open; another mount's new
// attribute shows at the next open (close-to-open), and this mount's own
// at once.
func TestXattrsAtOpen(t *testing.T) {
	vol := newVolume(t, 0)
	counted := &countingStore{Store: vol.st}
	m1 := vol.mount(t)
	vol.st = counted
	m2 := vol.mount(t)
	ino := m1.create(t, "f", []byte("data"))

	list := func(m *mount) []string {
		t.Helper()
		names, err := m.ListXattr(as(1), ino)
		if err != nil {
			t.Fatalf("listxattr: %v", err)
		}
		return names
	}
	// A second descriptor stays open throughout, as a long-lived reader
	// would keep it: what the mount knows of the open file then lives
	// across the other descriptor's opens.
	keep := m2.open(t, ino)
	defer m2.close(t, keep)
	fh := m2.open(t, ino)
	before := counted.views.Load()
	if names := list(m2); len(names) != 0 {
		t.Fatalf("listxattr of a file without attributes: %q", names)
	}
	if _, err := m2.GetXattr(as(1), ino, xattrCaps); !errors.Is(err, syscall.ENODATA) {
		t.Fatalf("getxattr %s: %v, want ENODATA", xattrCaps, err)
	}
	if n := counted.views.Load() - before; n != 0 {
		t.Errorf("listing and the capability check read the engine %d times; the open had said there are none", n)
	}

	if err := m1.SetXattr(as(1), ino, "user.x", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	m2.close(t, fh)
	fh = m2.open(t, ino)
	if names := list(m2); !slices.Equal(names, []string{"user.x"}) {
		t.Errorf("after another mount set user.x, a new open lists %q", names)
	}
	if err := m2.SetXattr(as(1), ino, "user.y", nil, 0); err != nil {
		t.Fatal(err)
	}
	if names := list(m2); !slices.Equal(names, []string{"user.x", "user.y"}) {
		t.Errorf("after this mount set user.y, the open file lists %q", names)
	}
	m2.close(t, fh)

	// Both gone again: the next open answers from memory once more.
	for _, name := range []string{"user.x", "user.y"} {
		if err := m1.RemoveXattr(as(1), ino, name); err != nil {
			t.Fatal(err)
		}
	}
	fh = m2.open(t, ino)
	before = counted.views.Load()
	if names := list(m2); len(names) != 0 {
		t.Errorf("after both were removed, a new open lists %q", names)
	}
	if n := counted.views.Load() - before; n != 0 {
		t.Errorf("listing read the engine %d times after an open that saw no attributes", n)
	}
	m2.close(t, fh)
}
