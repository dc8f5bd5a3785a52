package vfs

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/object"
	objmem "github.com/sluicefs/sluice/internal/object/mem"
)

// fakeKernel records the invalidations a VFS sends to the kernel.
type fakeKernel struct {
	mu      sync.Mutex
	inodes  []string // "ino" for attributes, "ino+data" with pages
	entries []string // "parent/name"
}

func (k *fakeKernel) InvalidateInode(ino meta.Ino, data bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := fmt.Sprint(ino)
	if data {
		s += "+data"
	}
	k.inodes = append(k.inodes, s)
	return nil
}

func (k *fakeKernel) InvalidateEntry(parent meta.Ino, name []byte) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.entries = append(k.entries, fmt.Sprintf("%d/%s", parent, name))
	return nil
}

// take returns and forgets what was invalidated so far.
func (k *fakeKernel) take() (inodes, entries []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	inodes, entries = k.inodes, k.entries
	k.inodes, k.entries = nil, nil
	return inodes, entries
}

// volume is one volume that several test mounts share: one metadata
// store and one object store.
type volume struct {
	st  store.Store
	obj object.Store
}

func newVolume(t *testing.T, trashDays int) *volume {
	t.Helper()
	st := kvstore.New(mem.New("t"))
	if _, err := meta.FormatVolume(context.Background(), st, &meta.Format{Name: "test", UUID: "u",
		Storage: "mem", Bucket: "b", BlockSize: 64, TrashDays: trashDays}); err != nil {
		t.Fatalf("format: %v", err)
	}
	return &volume{st: st, obj: objmem.New("x")}
}

// mount is one mount of a volume: its VFS and the kernel in front of it.
type mount struct {
	*VFS
	kernel *fakeKernel
	client *meta.Session
}

// mount returns a new mount of the volume with kernel caches of a second,
// and the statahead, as a mount with default options has.
func (vol *volume) mount(t *testing.T) *mount {
	t.Helper()
	return vol.mountWith(t, meta.Config{Statahead: time.Second})
}

// mountWith returns a new mount of the volume whose metadata client has
// conf.
func (vol *volume) mountWith(t *testing.T, conf meta.Config) *mount {
	t.Helper()
	ctx := context.Background()
	c, err := meta.NewSession(ctx, vol.st, conf)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	s := chunk.New(vol.obj, chunk.Config{BlockSize: 64 << 10})
	v := New(c, s, Config{AttrTimeout: time.Second, EntryTimeout: time.Second, DirEntryTimeout: time.Second})
	k := &fakeKernel{}
	v.SetKernel(k)
	t.Cleanup(func() {
		if err := v.Close(ctx); err != nil {
			t.Errorf("close vfs: %v", err)
		}
		if err := s.Close(ctx); err != nil {
			t.Errorf("close chunk store: %v", err)
		}
		if err := c.Close(ctx); err != nil {
			t.Errorf("close meta client: %v", err)
		}
	})
	return &mount{VFS: v, kernel: k, client: c}
}

// collectOrphans runs the orphan rounds of mounts, all the mounts of one
// volume, so that files whose last name went while several mounts were
// live, and that none holds open, are deleted.
func collectOrphans(t *testing.T, mounts ...*mount) {
	t.Helper()
	for range 2 {
		for _, m := range mounts {
			if err := m.client.CollectOrphans(context.Background()); err != nil {
				t.Fatalf("collect orphans: %v", err)
			}
		}
	}
}

// as is a context of process pid, run by root.
func as(pid uint32) context.Context {
	return meta.WithCred(context.Background(), meta.Cred{Pid: pid})
}

func (m *mount) create(t *testing.T, name string, data []byte) meta.Ino {
	t.Helper()
	ctx := as(1)
	a, fh, err := m.Create(ctx, meta.RootIno, []byte(name), 0o644, 0, syscall.O_RDWR)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	if err := m.Write(ctx, fh, 0, data); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
	m.close(t, fh)
	return a.Ino
}

func (m *mount) open(t *testing.T, ino meta.Ino) uint64 {
	t.Helper()
	_, fh, err := m.Open(as(1), ino, syscall.O_RDWR)
	if err != nil {
		t.Fatalf("open %d: %v", ino, err)
	}
	return fh
}

func (m *mount) close(t *testing.T, fh uint64) {
	t.Helper()
	if err := m.Flush(as(1), fh, 0); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if err := m.Release(as(1), fh, 0); err != nil {
		t.Fatalf("release: %v", err)
	}
}

func (m *mount) read(t *testing.T, fh uint64, n int) []byte {
	t.Helper()
	p := make([]byte, n)
	got, err := m.Read(as(1), fh, 0, p)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return p[:got]
}

// lockKinds are the two ways a program locks a file.
var lockKinds = []struct {
	name   string
	lock   func(m *mount, ino meta.Ino, fh uint64) error
	unlock func(m *mount, ino meta.Ino, fh uint64) error
}{
	{"fcntl",
		func(m *mount, ino meta.Ino, fh uint64) error {
			return m.SetLk(as(1), fh, 1, meta.PosixLock{Start: 0, End: meta.LockEnd, Type: meta.LockWrite, Pid: 1}, false)
		},
		func(m *mount, ino meta.Ino, fh uint64) error {
			return m.SetLk(as(1), fh, 1, meta.PosixLock{Start: 0, End: meta.LockEnd, Type: meta.LockUnlock, Pid: 1}, false)
		}},
	{"flock",
		func(m *mount, ino meta.Ino, fh uint64) error { return m.Flock(as(1), fh, 1, meta.LockWrite, false) },
		func(m *mount, ino meta.Ino, fh uint64) error { return m.Flock(as(1), fh, 1, meta.LockUnlock, false) }},
}

// TestLockBringsNewestBytes is SQLite's case reduced: mount b opens a file
// and reads it; mount a rewrites the same bytes (same length) and closes;
// b takes a lock on its open handle and reads again, and must get a's
// bytes, and the kernel in front of b must drop its pages of the file.
func TestLockBringsNewestBytes(t *testing.T) {
	for _, lk := range lockKinds {
		t.Run(lk.name, func(t *testing.T) {
			vol := newVolume(t, 0)
			a, b := vol.mount(t), vol.mount(t)
			ino := a.create(t, "db", []byte("version 1"))

			fb := b.open(t, ino)
			if got := b.read(t, fb, 100); string(got) != "version 1" {
				t.Fatalf("b reads %q before any change", got)
			}
			fa := a.open(t, ino)
			if err := a.Write(as(1), fa, 0, []byte("version 2")); err != nil {
				t.Fatal(err)
			}
			a.close(t, fa)

			b.kernel.take()
			if err := lk.lock(b, ino, fb); err != nil {
				t.Fatalf("b lock: %v", err)
			}
			if got := b.read(t, fb, 100); string(got) != "version 2" {
				t.Errorf("b reads %q under its lock after a's commit, want %q", got, "version 2")
			}
			inodes, _ := b.kernel.take()
			if want := fmt.Sprintf("%d+data", ino); !slices.Contains(inodes, want) {
				t.Errorf("kernel invalidations after the lock: %v, want %s", inodes, want)
			}
			if err := lk.unlock(b, ino, fb); err != nil {
				t.Fatalf("b unlock: %v", err)
			}

			// Unchanged since: the next lock keeps the caches.
			if err := lk.lock(b, ino, fb); err != nil {
				t.Fatalf("b lock again: %v", err)
			}
			if inodes, _ := b.kernel.take(); len(inodes) != 0 {
				t.Errorf("a lock on an unchanged file invalidated %v", inodes)
			}
			// b's own write, committed at unlock, is not taken for
			// another mount's change by b's next lock.
			if err := b.Write(as(1), fb, 0, []byte("version 3")); err != nil {
				t.Fatal(err)
			}
			if err := lk.unlock(b, ino, fb); err != nil {
				t.Fatalf("b unlock after writing: %v", err)
			}
			if err := lk.lock(b, ino, fb); err != nil {
				t.Fatalf("b lock after its own write: %v", err)
			}
			if inodes, _ := b.kernel.take(); len(inodes) != 0 {
				t.Errorf("a lock after the mount's own write invalidated %v", inodes)
			}
			if err := lk.unlock(b, ino, fb); err != nil {
				t.Fatal(err)
			}
			b.close(t, fb)
		})
	}
}

// TestUnlockCommitsWrites checks that writes buffered under a lock are in
// the engine when the lock is released, before the handle is closed.
func TestUnlockCommitsWrites(t *testing.T) {
	for _, lk := range lockKinds {
		t.Run(lk.name, func(t *testing.T) {
			vol := newVolume(t, 0)
			a, b := vol.mount(t), vol.mount(t)
			ino := a.create(t, "f", []byte("old"))
			fa := a.open(t, ino)
			if err := lk.lock(a, ino, fa); err != nil {
				t.Fatal(err)
			}
			if err := a.Write(as(1), fa, 0, []byte("new, longer")); err != nil {
				t.Fatal(err)
			}
			if err := lk.unlock(a, ino, fa); err != nil {
				t.Fatal(err)
			}
			fb := b.open(t, ino)
			if got := b.read(t, fb, 100); string(got) != "new, longer" {
				t.Errorf("b reads %q after a released its lock, want a's write", got)
			}
			b.close(t, fb)
			a.close(t, fa)
		})
	}
}

// TestLockDropsNamesOfItsDirectory checks that a lock makes the kernel
// forget the names of the file's directory it may still cache, found or
// missing, so that a question about a neighbour (SQLite's hot journal)
// reaches the engine.
func TestLockDropsNamesOfItsDirectory(t *testing.T) {
	vol := newVolume(t, 0)
	a := vol.mount(t)
	a.conf.NegEntryTimeout = time.Second
	ino := a.create(t, "db", []byte("x"))
	a.kernel.take()
	if _, err := a.Lookup(as(1), meta.RootIno, []byte("db")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Lookup(as(1), meta.RootIno, []byte("db-journal")); meta.Errno(err) != syscall.ENOENT {
		t.Fatalf("lookup of a missing name: %v", err)
	}
	fh := a.open(t, ino)
	if err := lockKinds[0].lock(a, ino, fh); err != nil {
		t.Fatal(err)
	}
	_, entries := a.kernel.take()
	slices.Sort(entries)
	if want := []string{"1/db", "1/db-journal"}; !slices.Equal(entries, want) {
		t.Errorf("entries dropped at lock: %v, want %v", entries, want)
	}
	a.close(t, fh)
}

// TestLockBringsNamesPastStatahead: under a lock, a name next to the
// locked file that another mount removed is gone, even where this mount
// listed the directory a moment before (SQLite's hot-journal check after
// a walk of its directory).
func TestLockBringsNamesPastStatahead(t *testing.T) {
	vol := newVolume(t, 0)
	a, b := vol.mount(t), vol.mount(t)
	ino := a.create(t, "db", []byte("x"))
	for _, name := range []string{"a", "b", "db-journal"} {
		a.create(t, name, []byte("y"))
	}
	lookup := func(name string) error {
		_, _, err := b.LookupAged(as(1), meta.RootIno, []byte(name))
		return err
	}
	// Three names found in a row list the directory on b.
	for _, name := range []string{"a", "b", "db"} {
		if err := lookup(name); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Unlink(as(1), meta.RootIno, []byte("db-journal")); err != nil {
		t.Fatal(err)
	}
	if err := lookup("db-journal"); err != nil {
		t.Fatalf("db-journal from b's listing: %v", err) // allowed, and shows the listing is there
	}
	fh := b.open(t, ino)
	if err := lockKinds[0].lock(b, ino, fh); err != nil {
		t.Fatal(err)
	}
	if err := lookup("db-journal"); meta.Errno(err) != syscall.ENOENT {
		t.Fatalf("db-journal under the lock: %v, want ENOENT", err)
	}
	b.close(t, fh)
}

// TestOpenOfReplacedFileIsStale checks close-to-open across a rename over
// the name: the kernel of mount b still maps the name to the old inode;
// opening or stat'ing it answers ESTALE once (the kernel then looks the
// name up again), and a retry by the same process of the same inode goes
// through to what it finds.
func TestOpenOfReplacedFileIsStale(t *testing.T) {
	for _, trash := range []int{0, 1} {
		t.Run(fmt.Sprintf("trash=%d", trash), func(t *testing.T) {
			vol := newVolume(t, trash)
			a, b := vol.mount(t), vol.mount(t)
			old := a.create(t, "ref", []byte("1"))
			if _, err := b.Lookup(as(1), meta.RootIno, []byte("ref")); err != nil {
				t.Fatal(err)
			}
			a.create(t, "ref.lock", []byte("2"))
			if err := a.Rename(as(1), meta.RootIno, []byte("ref.lock"), meta.RootIno, []byte("ref"), 0); err != nil {
				t.Fatal(err)
			}

			if _, _, err := b.Open(as(7), old, syscall.O_RDONLY); err != syscall.ESTALE {
				t.Fatalf("open of the replaced inode: %v, want ESTALE", err)
			}
			if trash == 0 {
				// The old inode goes once both mounts said they do
				// not hold it open.
				collectOrphans(t, a, b)
			}
			_, fh, err := b.Open(as(7), old, syscall.O_RDONLY)
			if trash == 0 {
				if meta.Errno(err) != syscall.ENOENT {
					t.Errorf("retried open of the deleted inode: %v, want ENOENT", err)
				}
			} else if err != nil {
				t.Errorf("retried open of the trashed inode (opened in the trash): %v", err)
			} else {
				b.close(t, fh)
			}
			// stat by the old name: the inode is gone (ESTALE once, so the
			// kernel looks the name up again), or in the trash, where it
			// still answers, as fstat of an open file must.
			_, err = b.GetAttr(as(8), old)
			if trash == 0 && err != syscall.ESTALE || trash == 1 && err != nil {
				t.Errorf("stat of the replaced inode: %v", err)
			}
			cur, err := b.Lookup(as(7), meta.RootIno, []byte("ref"))
			if err != nil {
				t.Fatal(err)
			}
			fh = b.open(t, cur.Ino)
			if got := b.read(t, fh, 10); string(got) != "2" {
				t.Errorf("b reads %q through the name after the rename, want %q", got, "2")
			}
			// A file open on this mount stays usable through its handle.
			if _, err := b.GetAttr(as(7), cur.Ino); err != nil {
				t.Errorf("fstat of the open file: %v", err)
			}
			b.close(t, fh)
		})
	}
}

// TestCreateOpensWhatAnotherMountCreated checks open(O_CREAT) of a name
// the kernel believed missing while another mount created it: without
// O_EXCL the existing file is opened (and truncated with O_TRUNC), with
// it the create fails.
func TestCreateOpensWhatAnotherMountCreated(t *testing.T) {
	vol := newVolume(t, 0)
	a, b := vol.mount(t), vol.mount(t)
	a.create(t, "f", []byte("from a"))

	if _, _, err := b.Create(as(1), meta.RootIno, []byte("f"), 0o644, 0, syscall.O_RDWR|syscall.O_EXCL); meta.Errno(err) != syscall.EEXIST {
		t.Errorf("create with O_EXCL of an existing name: %v, want EEXIST", err)
	}
	attr, fh, err := b.Create(as(1), meta.RootIno, []byte("f"), 0o644, 0, syscall.O_RDWR)
	if err != nil {
		t.Fatalf("create without O_EXCL of an existing name: %v", err)
	}
	if got := b.read(t, fh, 100); !bytes.Equal(got, []byte("from a")) {
		t.Errorf("b reads %q from the file a created, want a's bytes", got)
	}
	b.close(t, fh)
	_, fh, err = b.Create(as(1), meta.RootIno, []byte("f"), 0o644, 0, syscall.O_RDWR|syscall.O_TRUNC)
	if err != nil {
		t.Fatalf("create with O_TRUNC of an existing name: %v", err)
	}
	b.close(t, fh)
	if got, err := b.GetAttr(as(1), attr.Ino); err != nil || got.Length != 0 {
		t.Errorf("after create with O_TRUNC: %+v, %v; want length 0", got, err)
	}
	if _, err := b.Mknod(as(1), meta.RootIno, []byte("d"), meta.NewNode{Type: store.TypeDir, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Create(as(1), meta.RootIno, []byte("d"), 0o644, 0, syscall.O_RDWR); meta.Errno(err) != syscall.EISDIR {
		t.Errorf("create of a name that is a directory: %v, want EISDIR", err)
	}
}

// TestOpenOfChangedFileIsStale checks that an open answers ESTALE once
// when the kernel holds attributes from before another mount changed the
// file (it would read up to, and append at, the old length), so that the
// kernel looks the name up again and gets them; and that an unchanged
// file opens at once.
func TestOpenOfChangedFileIsStale(t *testing.T) {
	vol := newVolume(t, 0)
	a, b := vol.mount(t), vol.mount(t)
	ino := a.create(t, "f", []byte("short"))
	if _, err := b.Lookup(as(1), meta.RootIno, []byte("f")); err != nil {
		t.Fatal(err)
	}
	fh := b.open(t, ino)
	b.close(t, fh)
	fa := a.open(t, ino)
	if err := a.Write(as(1), fa, 5, []byte(", now longer")); err != nil {
		t.Fatal(err)
	}
	a.close(t, fa)

	if _, _, err := b.Open(as(1), ino, syscall.O_RDWR|syscall.O_APPEND); err != syscall.ESTALE {
		t.Fatalf("open after another mount's change: %v, want ESTALE", err)
	}
	// The kernel's retry looks the name up again, which gives it the new
	// attributes, and opens.
	if got, err := b.Lookup(as(1), meta.RootIno, []byte("f")); err != nil || got.Length != 17 {
		t.Fatalf("lookup: %+v, %v", got, err)
	}
	fh = b.open(t, ino)
	if got := b.read(t, fh, 100); string(got) != "short, now longer" {
		t.Errorf("b reads %q", got)
	}
	b.close(t, fh)
	// A retry that does not look up again (through /proc/PID/fd) goes
	// through and drops the kernel's attributes.
	fa = a.open(t, ino)
	if err := a.Write(as(1), fa, 0, []byte("S")); err != nil {
		t.Fatal(err)
	}
	a.close(t, fa)
	b.kernel.take()
	if _, _, err := b.Open(as(1), ino, syscall.O_RDONLY); err != syscall.ESTALE {
		t.Fatalf("open after another mount's second change: %v, want ESTALE", err)
	}
	fh = b.open(t, ino)
	if inodes, _ := b.kernel.take(); !slices.Equal(inodes, []string{fmt.Sprint(ino)}) {
		t.Errorf("retried open invalidated %v, want the attributes of %d", inodes, ino)
	}
	b.close(t, fh)
}

// TestLookupInRemovedDirectoryIsStale checks a path through a directory
// another mount removed: the kernel still maps the directory's name to the
// old inode, and a lookup in it answers ESTALE once (the kernel then walks
// the path again), while a missing name in a live directory is ENOENT.
func TestLookupInRemovedDirectoryIsStale(t *testing.T) {
	vol := newVolume(t, 0)
	a, b := vol.mount(t), vol.mount(t)
	d, err := a.Mknod(as(1), meta.RootIno, []byte("d"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lookup(as(3), d.Ino, []byte("x")); meta.Errno(err) != syscall.ENOENT {
		t.Fatalf("lookup of a missing name in a live directory: %v, want ENOENT", err)
	}
	if err := a.Rmdir(as(1), meta.RootIno, []byte("d")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lookup(as(3), d.Ino, []byte("x")); err != syscall.ESTALE {
		t.Fatalf("lookup in the removed directory: %v, want ESTALE", err)
	}
	if _, err := b.Lookup(as(3), d.Ino, []byte("x")); meta.Errno(err) != syscall.ENOENT {
		t.Errorf("the same process's retry: %v, want ENOENT", err)
	}
	if _, err := b.OpenDir(as(4), d.Ino); err != syscall.ESTALE {
		t.Errorf("opendir of the removed directory: %v, want ESTALE", err)
	}
}

// TestGetAttrBringsOpenFile checks that attributes of a newer version
// given to the kernel bring a file held open along: the kernel drops its
// pages on the new length and mtime, and reads through the handle then
// get the new bytes at the new length, not the new bytes cut to the
// length the handle was opened at.
func TestGetAttrBringsOpenFile(t *testing.T) {
	vol := newVolume(t, 0)
	a, b := vol.mount(t), vol.mount(t)
	ino := a.create(t, "f", []byte("short"))
	fb := b.open(t, ino)
	if got := b.read(t, fb, 100); string(got) != "short" {
		t.Fatalf("b reads %q, want %q", got, "short")
	}
	fa := a.open(t, ino)
	if err := a.Write(as(1), fa, 0, []byte("much longer")); err != nil {
		t.Fatal(err)
	}
	a.close(t, fa)
	if at, err := b.GetAttr(as(1), ino); err != nil || at.Length != 11 {
		t.Fatalf("b getattr: %+v, %v; want 11 bytes", at, err)
	}
	if got := b.read(t, fb, 100); string(got) != "much longer" {
		t.Errorf("b reads %q through its open handle after its kernel was given the new length, want %q", got, "much longer")
	}
	b.close(t, fb)
}
