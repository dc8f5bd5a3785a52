package metatest

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// write commits a fake slice to chunk idx of ino and returns the new length.
func write(t *testing.T, c *meta.Session, ino meta.Ino, idx uint32, s meta.Slice) uint64 {
	t.Helper()
	a, err := Write(root, c, ino, idx, s)
	if err != nil {
		t.Fatalf("write chunk %d of %d: %v", idx, ino, err)
	}
	return a.Length
}

// newSlice returns a slice with a fresh id covering [pos, pos+n) of a chunk.
func newSlice(t *testing.T, c *meta.Session, pos, n uint32) meta.Slice {
	t.Helper()
	id, err := c.NewSliceID(root)
	if err != nil {
		t.Fatalf("new slice id: %v", err)
	}
	if id == 0 {
		t.Fatalf("slice id 0 is reserved for holes")
	}
	return meta.Slice{Pos: pos, Id: id, Size: n, Len: n}
}

// wantChunk fails t unless chunk idx of ino holds exactly want.
func wantChunk(t *testing.T, c *meta.Session, ino meta.Ino, idx uint32, want ...meta.Slice) {
	t.Helper()
	got, err := c.ReadChunk(root, ino, idx)
	if err != nil {
		t.Fatalf("read chunk %d of %d: %v", idx, ino, err)
	}
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("chunk %d of %d:\n got %+v\nwant %+v", idx, ino, got, want)
	}
}

// truncate sets the length of ino as root and checks the result.
func truncate(t *testing.T, c *meta.Session, ino meta.Ino, length uint64) {
	t.Helper()
	a, err := c.SetAttr(root, ino, meta.SetSize, &meta.Attr{Length: length})
	if err != nil {
		t.Fatalf("truncate %d to %d: %v", ino, length, err)
	}
	if a.Length != length || getattr(t, c, ino).Length != length {
		t.Fatalf("truncate %d to %d: length %d", ino, length, a.Length)
	}
}

func testTruncate(t *testing.T, ns newStoreFunc) {
	c := setup(t, ns, meta.Config{})
	f := mkfile(t, c, meta.RootIno, "f")
	s1 := newSlice(t, c, 0, 10000)
	if n := write(t, c, f.Ino, 0, s1); n != 10000 {
		t.Fatalf("length after write: %d", n)
	}
	truncate(t, c, f.Ino, 20000) // up: no slice changes
	wantChunk(t, c, f.Ino, 0, s1)
	truncate(t, c, f.Ino, 5000) // down: a hole covers the cut up to the old end
	hole1 := meta.Slice{Pos: 5000, Len: 15000}
	wantChunk(t, c, f.Ino, 0, s1, hole1)

	s2 := newSlice(t, c, 100, 4096)
	if n := write(t, c, f.Ino, 2, s2); n != 2*meta.ChunkSize+4196 {
		t.Fatalf("length after write to chunk 2: %d", n)
	}
	truncate(t, c, f.Ino, meta.ChunkSize+10) // chunk 2 goes, chunk 1 gets a hole to its end
	wantChunk(t, c, f.Ino, 2)
	wantChunk(t, c, f.Ino, 1, meta.Slice{Pos: 10, Len: meta.ChunkSize - 10})
	wantChunk(t, c, f.Ino, 0, s1, hole1)
	truncate(t, c, f.Ino, meta.ChunkSize) // at a chunk boundary: no hole, chunk 1 goes
	wantChunk(t, c, f.Ino, 1)
	wantChunk(t, c, f.Ino, 0, s1, hole1)
	truncate(t, c, f.Ino, 0)
	wantChunk(t, c, f.Ino, 0)

	d := mkdir(t, c, meta.RootIno, "d")
	_, err := c.SetAttr(root, d.Ino, meta.SetSize, &meta.Attr{Length: 0})
	wantErr(t, "truncate a dir", err, syscall.EISDIR)
	l := mk(t, root, c, meta.RootIno, "l", store.TypeSymlink, 0)
	_, err = c.SetAttr(root, l.Ino, meta.SetSize, &meta.Attr{Length: 0})
	wantErr(t, "truncate a symlink", err, syscall.EINVAL)
}

func testWrite(t *testing.T, ns newStoreFunc) {
	c := setup(t, ns, meta.Config{})
	f := mkfile(t, c, meta.RootIno, "f")
	s1 := newSlice(t, c, 0, 4096)
	s2 := newSlice(t, c, 1000, 100)
	s3 := newSlice(t, c, 8192, 4096)
	if n := write(t, c, f.Ino, 0, s1); n != 4096 {
		t.Fatalf("length %d, want 4096", n)
	}
	if n := write(t, c, f.Ino, 0, s2); n != 4096 { // inside: no change
		t.Fatalf("length %d, want 4096", n)
	}
	if n := write(t, c, f.Ino, 0, s3); n != 12288 {
		t.Fatalf("length %d, want 12288", n)
	}
	wantChunk(t, c, f.Ino, 0, s1, s2, s3)
	s4 := newSlice(t, c, 0, 1)
	if n := write(t, c, f.Ino, 3, s4); n != 3*meta.ChunkSize+1 {
		t.Fatalf("length %d, want 3 chunks + 1", n)
	}
	wantChunk(t, c, f.Ino, 3, s4)
	wantChunk(t, c, f.Ino, 1)
	a := getattr(t, c, f.Ino)
	if a.Length != 3*meta.ChunkSize+1 || a.Mtime < f.Mtime {
		t.Fatalf("after writes: %+v", a)
	}
	d := mkdir(t, c, meta.RootIno, "d")
	_, err := Write(root, c, d.Ino, 0, newSlice(t, c, 0, 1))
	wantErr(t, "write to a dir", err, syscall.EBADF)
	_, err = Write(root, c, f.Ino+1000, 0, newSlice(t, c, 0, 1))
	wantErr(t, "write to unknown inode", err, syscall.ENOENT)
}

func testUnlinkOpen(t *testing.T, ns newStoreFunc) {
	st := openStore(t, ns)
	format(t, st, testFormat())
	c := newClient(t, st, meta.Config{})
	f := mkfile(t, c, meta.RootIno, "f")
	if _, err := c.Open(root, f.Ino, syscall.O_RDWR); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "unlink open file", c.Unlink(root, meta.RootIno, []byte("f")), 0)
	wantGone(t, c, meta.RootIno, "f")
	a := getattr(t, c, f.Ino)
	if a.Nlink != 0 {
		t.Fatalf("open unlinked file has nlink %d", a.Nlink)
	}
	// The handle still works.
	if n := write(t, c, f.Ino, 0, newSlice(t, c, 0, 10)); n != 10 {
		t.Fatalf("write through handle of unlinked file: length %d", n)
	}
	_, err := c.Link(root, f.Ino, meta.RootIno, []byte("again"))
	wantErr(t, "link of an unlinked file", err, syscall.ENOENT)
	wantErr(t, "release", c.Release(root, f.Ino), 0)
	_, err = c.GetAttr(root, f.Ino)
	wantErr(t, "getattr after release", err, syscall.ENOENT)

	// Two handles: the file lives until the last one goes.
	g := mkfile(t, c, meta.RootIno, "g")
	c.Created(g.Ino)
	if _, err := c.Open(root, g.Ino, syscall.O_RDONLY); err != nil {
		t.Fatal(err)
	}
	mkfile(t, c, meta.RootIno, "h")
	rename(t, c, meta.RootIno, "h", meta.RootIno, "g", 0, 0) // replaces the open file
	wantNlink(t, c, g.Ino, 0)
	wantErr(t, "release 1", c.Release(root, g.Ino), 0)
	wantNlink(t, c, g.Ino, 0)
	wantErr(t, "release 2", c.Release(root, g.Ino), 0)
	_, err = c.GetAttr(root, g.Ino)
	wantErr(t, "getattr after last release", err, syscall.ENOENT)

	// Closing the client deletes what it kept open.
	c2, err := meta.NewSession(context.Background(), st, meta.Config{})
	if err != nil {
		t.Fatal(err)
	}
	k := mkfile(t, c2, meta.RootIno, "k")
	c2.Created(k.Ino)
	wantErr(t, "unlink k", c2.Unlink(root, meta.RootIno, []byte("k")), 0)
	wantNlink(t, c, k.Ino, 0)
	if err := c2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	collectOrphans(t, c) // k might have been open in c too
	_, err = c.GetAttr(root, k.Ino)
	wantErr(t, "getattr after the holding client closed", err, syscall.ENOENT)
}

// deleteRecorder records the slices a client asks to delete.
type deleteRecorder struct {
	mu  sync.Mutex
	ids map[uint64]uint32
}

func (r *deleteRecorder) delete(_ context.Context, id uint64, size uint32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids[id] = size
	return nil
}

func (r *deleteRecorder) has(id uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.ids[id]
	return ok
}

func (r *deleteRecorder) deleted() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []uint64
	for id := range r.ids {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func testDeletionQueue(t *testing.T, ns newStoreFunc) {
	rec := &deleteRecorder{ids: map[uint64]uint32{}}
	c := setup(t, ns, meta.Config{DeleteSlice: rec.delete})
	flush := func() {
		t.Helper()
		if err := c.FlushDeletions(root); err != nil {
			t.Fatalf("flush deletions: %v", err)
		}
	}
	f := mkfile(t, c, meta.RootIno, "f")
	var ids []uint64
	for idx := range uint32(3) {
		s := newSlice(t, c, 0, 4096)
		write(t, c, f.Ino, idx, s)
		ids = append(ids, s.Id)
	}
	keep := mkfile(t, c, meta.RootIno, "keep")
	kept := newSlice(t, c, 0, 4096)
	write(t, c, keep.Ino, 0, kept)
	truncate(t, c, f.Ino, 100) // queues the slices of chunks 1 and 2
	flush()
	for _, id := range ids[1:] {
		if !rec.has(id) {
			t.Fatalf("slice %d of a truncated chunk was not deleted (deleted: %v)", id, rec.deleted())
		}
	}
	if rec.has(ids[0]) {
		t.Fatalf("slice %d still in use was deleted", ids[0])
	}
	wantErr(t, "unlink f", c.Unlink(root, meta.RootIno, []byte("f")), 0)
	flush()
	for _, id := range ids {
		if !rec.has(id) {
			t.Fatalf("slice %d of an unlinked file was not deleted (deleted: %v)", id, rec.deleted())
		}
	}
	if rec.has(kept.Id) || rec.has(0) {
		t.Fatalf("deleted slices %v include a live slice or a hole", rec.deleted())
	}

	// An open file keeps its data until the last handle goes.
	g := mkfile(t, c, meta.RootIno, "g")
	gs := newSlice(t, c, 0, 4096)
	write(t, c, g.Ino, 0, gs)
	c.Created(g.Ino)
	wantErr(t, "unlink g", c.Unlink(root, meta.RootIno, []byte("g")), 0)
	flush()
	if rec.has(gs.Id) {
		t.Fatalf("slice %d of an open file was deleted", gs.Id)
	}
	wantErr(t, "release g", c.Release(root, g.Ino), 0)
	flush()
	if !rec.has(gs.Id) {
		t.Fatalf("slice %d of a released unlinked file was not deleted", gs.Id)
	}
	if got := lookup(t, c, meta.RootIno, "keep"); got.Length != 4096 {
		t.Fatalf("keep: %+v", got)
	}
	wantChunk(t, c, keep.Ino, 0, kept)
}

// testOpenElsewhere checks, on a volume without a trash, that a file
// whose last name one client removes lives while another client holds it
// open, and goes when the last holder closes it or its session expires.
func testOpenElsewhere(t *testing.T, ns newStoreFunc) {
	st := openStore(t, ns)
	format(t, st, testFormat())
	a := newClient(t, st, meta.Config{})
	b := newClient(t, st, meta.Config{})
	open := func(c *meta.Session, ino meta.Ino) {
		t.Helper()
		if _, err := c.Open(root, ino, syscall.O_RDWR); err != nil {
			t.Fatal(err)
		}
	}
	wantExists := func(what string, ino meta.Ino) {
		t.Helper()
		for _, c := range []*meta.Session{a, b} {
			if n := getattr(t, c, ino); n.Nlink != 0 {
				t.Fatalf("%s: nlink %d, want 0", what, n.Nlink)
			}
		}
	}
	wantDeleted := func(what string, ino meta.Ino) {
		t.Helper()
		_, err := a.GetAttr(root, ino)
		wantErr(t, what, err, syscall.ENOENT)
		files, err := meta.PendingFiles(root, st)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(files, func(f store.DelFile) bool { return f.Ino == ino }) {
			t.Fatalf("%s: data of %d not queued for deletion: %+v", what, ino, files)
		}
	}

	// Open in a, removed by b: a keeps reading and writing it.
	f := mkfile(t, a, meta.RootIno, "f")
	s1 := newSlice(t, a, 0, 10)
	write(t, a, f.Ino, 0, s1)
	open(a, f.Ino)
	wantErr(t, "unlink in b", b.Unlink(root, meta.RootIno, []byte("f")), 0)
	wantGone(t, b, meta.RootIno, "f")
	wantExists("right after the unlink", f.Ino)
	collectOrphans(t, a, b)
	wantExists("after the orphan rounds", f.Ino)
	s2 := newSlice(t, a, 10, 10)
	if n := write(t, a, f.Ino, 0, s2); n != 20 {
		t.Fatalf("write after the unlink: length %d", n)
	}
	wantChunk(t, a, f.Ino, 0, s1, s2)
	wantErr(t, "release in a", a.Release(root, f.Ino), 0)
	wantDeleted("after the holder closed it", f.Ino)

	// Open in both, removed and closed by b: it waits for a.
	g := mkfile(t, a, meta.RootIno, "g")
	write(t, a, g.Ino, 0, newSlice(t, a, 0, 10))
	open(a, g.Ino)
	open(b, g.Ino)
	wantErr(t, "unlink in b", b.Unlink(root, meta.RootIno, []byte("g")), 0)
	wantErr(t, "release in b", b.Release(root, g.Ino), 0)
	wantExists("closed by the remover only", g.Ino)
	collectOrphans(t, b, a)
	wantExists("closed by the remover only, after the orphan rounds", g.Ino)
	wantErr(t, "release in a", a.Release(root, g.Ino), 0)
	wantDeleted("after the last holder closed it", g.Ino)

	// Open nowhere: it goes with the orphan rounds.
	h := mkfile(t, a, meta.RootIno, "h")
	write(t, a, h.Ino, 0, newSlice(t, a, 0, 10))
	wantErr(t, "unlink in b", b.Unlink(root, meta.RootIno, []byte("h")), 0)
	collectOrphans(t, a, b)
	wantDeleted("open nowhere", h.Ino)

	// Open in a client that dies: it goes once the session expired.
	dead, err := meta.NewSession(root, st, meta.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close(root) }) // its session is gone by then
	k := mkfile(t, a, meta.RootIno, "k")
	write(t, a, k.Ino, 0, newSlice(t, a, 0, 10))
	open(dead, k.Ino)
	wantErr(t, "unlink in b", b.Unlink(root, meta.RootIno, []byte("k")), 0)
	collectOrphans(t, a, b, dead)
	wantExists("held by a live session", k.Ino)
	// Stop dead's session without ending it, as a crash would.
	later := func() time.Time { return time.Now().Add(time.Hour) }
	live := newClient(t, st, meta.Config{SessionTimeout: time.Minute, Now: later})
	if err := live.CleanStaleSessions(root); err != nil {
		t.Fatal(err)
	}
	collectOrphans(t, live)
	wantDeleted("held by an expired session", k.Ino)

	// Alone again (the others' sessions expired too, by live's clock), a
	// client deletes a file with its last name at once.
	m := mkfile(t, live, meta.RootIno, "m")
	write(t, live, m.Ino, 0, newSlice(t, live, 0, 10))
	wantErr(t, "unlink alone", live.Unlink(root, meta.RootIno, []byte("m")), 0)
	wantDeleted("removed by the only session", m.Ino)
}

// testTmpfile checks the unnamed files of O_TMPFILE: one named by Link is
// an ordinary file that outlives its handle and its session; one never
// named goes with the session that made it, when the session dies as a
// crashed mount's does; and Link names no other file without a link.
func testTmpfile(t *testing.T, ns newStoreFunc) {
	st := openStore(t, ns)
	format(t, st, testFormat())
	dead, err := meta.NewSession(root, st, meta.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close(root) }) // its session is gone by then
	other := newClient(t, st, meta.Config{})
	tmpfile := func(what string) *meta.Attr {
		t.Helper()
		a, err := dead.Tmpfile(root, meta.RootIno, meta.NewNode{Type: store.TypeFile, Mode: 0o644})
		if err != nil {
			t.Fatalf("tmpfile %s: %v", what, err)
		}
		write(t, dead, a.Ino, 0, newSlice(t, dead, 0, 10))
		return a
	}
	named, lost := tmpfile("named"), tmpfile("lost")
	if _, err := other.Link(root, named.Ino, meta.RootIno, []byte("stolen")); meta.Errno(err) != syscall.ENOENT {
		t.Errorf("link by another session of a file it did not make: %v, want ENOENT", err)
	}
	if _, err := dead.Link(root, named.Ino, meta.RootIno, []byte("named")); err != nil {
		t.Fatalf("link: %v", err)
	}
	wantNlink(t, other, named.Ino, 1)
	collectOrphans(t, dead, other)
	if n := getattr(t, other, lost.Ino); n.Nlink != 0 {
		t.Fatalf("the unnamed file has nlink %d", n.Nlink)
	}
	// Stop dead's session without ending it, as a crash would.
	later := func() time.Time { return time.Now().Add(time.Hour) }
	live := newClient(t, st, meta.Config{SessionTimeout: time.Minute, Now: later})
	if err := live.CleanStaleSessions(root); err != nil {
		t.Fatal(err)
	}
	collectOrphans(t, live)
	_, err = live.GetAttr(root, lost.Ino)
	wantErr(t, "the unnamed file of a dead session", err, syscall.ENOENT)
	files, err := meta.PendingFiles(root, st)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(files, func(f store.DelFile) bool { return f.Ino == lost.Ino }) {
		t.Errorf("data of the unnamed file not queued for deletion: %+v", files)
	}
	if got := lookup(t, live, meta.RootIno, "named"); got.Ino != named.Ino || got.Nlink != 1 || got.Length != 10 {
		t.Errorf("the named file after its session died: inode %d nlink %d length %d", got.Ino, got.Nlink, got.Length)
	}
}
