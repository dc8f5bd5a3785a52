package metatest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// ManyChunks runs the cases whose transactions would exceed etcd's default
// --max-txn-ops if chunks were dropped in one transaction: truncating and
// deleting files of hundreds of chunks, and a chunk of many slices. An
// engine test with a server at default limits runs it.
func ManyChunks(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Run("TruncateManyChunks", func(t *testing.T) { testTruncateManyChunks(t, newStore) })
	t.Run("FragmentedChunk", func(t *testing.T) { testFragmentedChunk(t, newStore) })
}

// wantDeleted fails t unless rec deleted exactly the slices ids.
func wantDeleted(t *testing.T, rec *deleteRecorder, what string, ids ...uint64) {
	t.Helper()
	want := slices.Clone(ids)
	slices.Sort(want)
	if got := rec.deleted(); !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
		t.Fatalf("%s: deleted slices %v, want %v", what, got, want)
	}
}

// testDeletionPaths checks, for every way data stops being named, that a
// slice's blocks are deleted exactly when no chunk names it any more.
func testDeletionPaths(t *testing.T, ns newStoreFunc) {
	cases := []struct {
		name string
		fn   func(t *testing.T, c *meta.Session, rec *deleteRecorder)
	}{
		{"Unlink", func(t *testing.T, c *meta.Session, rec *deleteRecorder) {
			f := mkfile(t, c, meta.RootIno, "f")
			s := newSlice(t, c, 0, 4096)
			write(t, c, f.Ino, 0, s)
			flushDeletions(t, c)
			wantDeleted(t, rec, "before unlink")
			wantErr(t, "unlink", c.Unlink(root, meta.RootIno, []byte("f")), 0)
			flushDeletions(t, c)
			wantDeleted(t, rec, "after unlink", s.Id)
		}},
		{"RenameOver", func(t *testing.T, c *meta.Session, rec *deleteRecorder) {
			a, b := mkfile(t, c, meta.RootIno, "a"), mkfile(t, c, meta.RootIno, "b")
			sa, sb := newSlice(t, c, 0, 10), newSlice(t, c, 0, 20)
			write(t, c, a.Ino, 0, sa)
			write(t, c, b.Ino, 0, sb)
			rename(t, c, meta.RootIno, "a", meta.RootIno, "b", 0, 0)
			flushDeletions(t, c)
			wantDeleted(t, rec, "after rename over b", sb.Id)
			wantChunk(t, c, a.Ino, 0, sa)
		}},
		{"TruncateDown", func(t *testing.T, c *meta.Session, rec *deleteRecorder) {
			f := mkfile(t, c, meta.RootIno, "f")
			s0, s1 := newSlice(t, c, 0, 4096), newSlice(t, c, 0, 4096)
			write(t, c, f.Ino, 0, s0)
			write(t, c, f.Ino, 1, s1)
			truncate(t, c, f.Ino, meta.ChunkSize+100) // cuts chunk 1: still named
			flushDeletions(t, c)
			wantDeleted(t, rec, "after a cut inside chunk 1")
			truncate(t, c, f.Ino, 100)
			flushDeletions(t, c)
			wantDeleted(t, rec, "after chunk 1 went", s1.Id)
			truncate(t, c, f.Ino, 0)
			flushDeletions(t, c)
			wantDeleted(t, rec, "after truncate to 0", s0.Id, s1.Id)
		}},
		{"PunchHole", func(t *testing.T, c *meta.Session, rec *deleteRecorder) {
			// A hole covers the data but the chunk still names the slice
			// until compaction rewrites the chunk or the file goes.
			f := mkfile(t, c, meta.RootIno, "f")
			s := newSlice(t, c, 0, 10000)
			write(t, c, f.Ino, 0, s)
			wantErr(t, "punch", c.Fallocate(root, f.Ino, meta.FallocPunchHole|meta.FallocKeepSize, 0, 10000), 0)
			flushDeletions(t, c)
			wantDeleted(t, rec, "after punching all of it")
			wantErr(t, "unlink", c.Unlink(root, meta.RootIno, []byte("f")), 0)
			flushDeletions(t, c)
			wantDeleted(t, rec, "after unlink", s.Id)
		}},
		{"Overwrite", func(t *testing.T, c *meta.Session, rec *deleteRecorder) {
			f := mkfile(t, c, meta.RootIno, "f")
			s1, s2 := newSlice(t, c, 0, 100), newSlice(t, c, 0, 100)
			write(t, c, f.Ino, 0, s1)
			write(t, c, f.Ino, 0, s2) // covers s1, which the list still names
			flushDeletions(t, c)
			wantDeleted(t, rec, "after overwrite")
			truncate(t, c, f.Ino, 0)
			flushDeletions(t, c)
			wantDeleted(t, rec, "after truncate to 0", s1.Id, s2.Id)
		}},
		{"CopyThenUnlink", func(t *testing.T, c *meta.Session, rec *deleteRecorder) {
			src, dst := mkfile(t, c, meta.RootIno, "src"), mkfile(t, c, meta.RootIno, "dst")
			s := newSlice(t, c, 0, 8000)
			write(t, c, src.Ino, 0, s)
			for i := range 2 { // two copies: two extra references
				if _, _, err := c.CopyFileRange(root, src.Ino, 0, dst.Ino, uint64(i)*8000, 8000); err != nil {
					t.Fatal(err)
				}
			}
			wantErr(t, "unlink src", c.Unlink(root, meta.RootIno, []byte("src")), 0)
			flushDeletions(t, c)
			wantDeleted(t, rec, "after unlink of the source")
			truncate(t, c, dst.Ino, 8000) // drops one copy's reference
			flushDeletions(t, c)
			wantDeleted(t, rec, "after one copy went")
			wantErr(t, "unlink dst", c.Unlink(root, meta.RootIno, []byte("dst")), 0)
			flushDeletions(t, c)
			wantDeleted(t, rec, "after unlink of the last copy", s.Id)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &deleteRecorder{ids: map[uint64]uint32{}}
			tc.fn(t, setup(t, ns, meta.Config{DeleteSlice: rec.delete}), rec)
		})
	}
}

// testDeletionBacklog checks that one FlushDeletions drops the data of
// every deleted file that is due, however many more than one listing of
// the queue takes, and that the queue is empty afterwards.
func testDeletionBacklog(t *testing.T, ns newStoreFunc) {
	rec := &deleteRecorder{ids: map[uint64]uint32{}}
	st := openStore(t, ns)
	format(t, st, testFormat())
	c := newClient(t, st, meta.Config{DeleteSlice: rec.delete})
	const n = 210 // more than two listings of 100
	ids := make([]uint64, n)
	for i := range n {
		f := mkfile(t, c, meta.RootIno, fmt.Sprintf("f%03d", i))
		s := newSlice(t, c, 0, 100)
		write(t, c, f.Ino, 0, s)
		ids[i] = s.Id
	}
	for i := range n {
		wantErr(t, "unlink", c.Unlink(root, meta.RootIno, []byte(fmt.Sprintf("f%03d", i))), 0)
	}
	flushDeletions(t, c)
	wantDeleted(t, rec, fmt.Sprintf("after removing %d files", n), ids...)
	if err := st.View(root, func(tx store.Tx) error {
		files, err := tx.DelFiles(0)
		if err == nil && len(files) > 0 {
			err = fmt.Errorf("%d deleted files still queued, first %+v", len(files), files[0])
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// sparseFile creates name with one 1-byte slice at the start of each of n
// chunks and returns it with the slice ids.
func sparseFile(t *testing.T, c *meta.Session, name string, n int) (*meta.Attr, []uint64) {
	t.Helper()
	f := mkfile(t, c, meta.RootIno, name)
	ids := make([]uint64, n)
	for i := range n {
		s := newSlice(t, c, 0, 1)
		write(t, c, f.Ino, uint32(i), s)
		ids[i] = s.Id
	}
	return f, ids
}

// testTruncateManyChunks truncates sparse files of hundreds of chunks:
// the chunks past the end go in bounded transactions, in the background or
// before an extension, which then reads zeros.
func testTruncateManyChunks(t *testing.T, ns newStoreFunc) {
	st := openStore(t, ns)
	format(t, st, testFormat())
	rec := &deleteRecorder{ids: map[uint64]uint32{}}
	// bg leaves every truncation's leftovers to the background.
	bg := newClient(t, st, meta.Config{DeleteSlice: rec.delete, TruncateSyncBatches: -1})
	c := newClient(t, st, meta.Config{DeleteSlice: rec.delete})

	const n = 310
	f, ids := sparseFile(t, c, "f", n)
	truncate(t, bg, f.Ino, 10*meta.ChunkSize)
	flushDeletions(t, bg)
	wantDeleted(t, rec, "after truncating 300 chunks", ids[10:]...)
	for _, idx := range []uint32{9, 10, 11, 100, 309} {
		if idx < 10 {
			wantChunk(t, c, f.Ino, idx, meta.Slice{Id: ids[idx], Size: 1, Len: 1})
		} else {
			wantChunk(t, c, f.Ino, idx)
		}
	}

	// An extension of a file whose leftovers are not dropped yet drops
	// them first: the range between reads zeros.
	extensions := []struct {
		name   string
		extend func(t *testing.T, ino meta.Ino) uint64 // returns the new length
	}{
		{"write", func(t *testing.T, ino meta.Ino) uint64 {
			return write(t, bg, ino, 40, newSlice(t, bg, 0, 1))
		}},
		{"truncate up", func(t *testing.T, ino meta.Ino) uint64 {
			truncate(t, bg, ino, 40*meta.ChunkSize+1)
			return 40*meta.ChunkSize + 1
		}},
		{"fallocate", func(t *testing.T, ino meta.Ino) uint64 {
			wantErr(t, "fallocate", bg.Fallocate(root, ino, 0, 0, 40*meta.ChunkSize+1), 0)
			return 40*meta.ChunkSize + 1
		}},
		{"copy_file_range", func(t *testing.T, ino meta.Ino) uint64 {
			src := mkfile(t, bg, meta.RootIno, "src")
			write(t, bg, src.Ino, 0, newSlice(t, bg, 0, 1))
			if n, _, err := bg.CopyFileRange(root, src.Ino, 0, ino, 40*meta.ChunkSize, 1); err != nil || n != 1 {
				t.Fatalf("copy_file_range: %d, %v", n, err)
			}
			return 40*meta.ChunkSize + 1
		}},
	}
	for i, x := range extensions {
		t.Run(x.name, func(t *testing.T) {
			g, gids := sparseFile(t, c, fmt.Sprintf("g%d", i), 60)
			truncate(t, bg, g.Ino, 1) // one batch goes now, most stays
			if got := x.extend(t, g.Ino); got != 40*meta.ChunkSize+1 {
				t.Fatalf("length after extension: %d", got)
			}
			if a := getattr(t, c, g.Ino); a.Length != 40*meta.ChunkSize+1 {
				t.Fatalf("length after extension: %d", a.Length)
			}
			for _, idx := range []uint32{1, 30, 39, 41, 59} {
				wantChunk(t, c, g.Ino, idx)
			}
			ss, err := c.ReadChunk(root, g.Ino, 40)
			if err != nil || len(ss) > 1 {
				t.Fatalf("chunk 40 after extension: %+v, %v", ss, err)
			}
			for _, s := range ss {
				if slices.Contains(gids, s.Id) {
					t.Fatalf("chunk 40 after extension still names old slice %d: %+v", s.Id, ss)
				}
			}
		})
	}

	// A client with default settings drops them all before returning.
	h, hids := sparseFile(t, c, "h", n)
	truncate(t, c, h.Ino, 0)
	for _, idx := range []uint32{0, 1, 200, 309} {
		wantChunk(t, c, h.Ino, idx)
	}
	flushDeletions(t, c)
	for _, id := range hids {
		if !rec.has(id) {
			t.Fatalf("slice %d of a file truncated to 0 was not deleted", id)
		}
	}

	// Deleting the first file drops its remaining chunks in batches.
	k, kids := sparseFile(t, c, "k", n)
	wantErr(t, "unlink k", c.Unlink(root, meta.RootIno, []byte("k")), 0)
	collectOrphans(t, c, bg) // k might have been open in bg
	flushDeletions(t, c)
	for _, id := range kids {
		if !rec.has(id) {
			t.Fatalf("slice %d of a deleted %d-chunk file was not deleted", id, n)
		}
	}
	for _, idx := range []uint32{0, 309} {
		wantChunk(t, c, k.Ino, idx)
	}
}

// testFragmentedChunk drops a chunk of more slices than one transaction
// may release, by truncation and by deletion.
func testFragmentedChunk(t *testing.T, ns newStoreFunc) {
	rec := &deleteRecorder{ids: map[uint64]uint32{}}
	c := setup(t, ns, meta.Config{DeleteSlice: rec.delete})
	const n = 150
	fragmented := func(name string) (*meta.Attr, []uint64) {
		f := mkfile(t, c, meta.RootIno, name)
		var ids []uint64
		for i := range n {
			s := newSlice(t, c, uint32(i), 1)
			write(t, c, f.Ino, 1, s)
			ids = append(ids, s.Id)
			if i%10 == 0 { // holes in between cost nothing to drop
				if err := c.Fallocate(root, f.Ino, meta.FallocPunchHole|meta.FallocKeepSize, meta.ChunkSize+uint64(i), 1); err != nil {
					t.Fatal(err)
				}
			}
		}
		return f, ids
	}
	f, fids := fragmented("f")
	truncate(t, c, f.Ino, 10)
	wantChunk(t, c, f.Ino, 1)
	flushDeletions(t, c)
	wantDeleted(t, rec, "after truncating a chunk of 150 slices", fids...)
	g, gids := fragmented("g")
	wantErr(t, "unlink g", c.Unlink(root, meta.RootIno, []byte("g")), 0)
	flushDeletions(t, c)
	wantDeleted(t, rec, "after deleting a chunk of 150 slices", append(fids, gids...)...)
	wantChunk(t, c, g.Ino, 1)
}

// testDeleteWorkers checks that queued slices are deleted concurrently, at
// most Config.DeleteWorkers at a time, and that a slice whose deletion
// fails stays queued until a later round deletes it.
func testDeleteWorkers(t *testing.T, ns newStoreFunc) {
	const workers = 4
	var mu sync.Mutex
	inflight, peak := 0, 0
	reached := make(chan struct{})
	var once sync.Once
	failing := map[uint64]bool{}
	rec := &deleteRecorder{ids: map[uint64]uint32{}}
	del := func(ctx context.Context, id uint64, size uint32) error {
		mu.Lock()
		inflight++
		peak = max(peak, inflight)
		if inflight == workers {
			once.Do(func() { close(reached) })
		}
		fail := failing[id]
		mu.Unlock()
		defer func() {
			mu.Lock()
			inflight--
			mu.Unlock()
		}()
		select { // hold every call until the limit is reached once
		case <-reached:
		case <-time.After(10 * time.Second):
			return errors.New("fewer deletions than workers ran at once")
		}
		if fail {
			return errors.New("injected failure")
		}
		return rec.delete(ctx, id, size)
	}
	st := openStore(t, ns)
	format(t, st, testFormat())
	c := newClient(t, st, meta.Config{DeleteSlice: del, DeleteWorkers: workers})
	f, ids := sparseFile(t, c, "f", 40)
	mu.Lock()
	failing[ids[7]] = true
	mu.Unlock()
	wantErr(t, "unlink f", c.Unlink(root, meta.RootIno, []byte("f")), 0)
	if err := c.FlushDeletions(root); err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("flush with a failing deletion: %v", err)
	}
	mu.Lock()
	if peak != workers {
		t.Errorf("%d deletions ran at once, want %d", peak, workers)
	}
	mu.Unlock()
	queued := func() []meta.Slice {
		t.Helper()
		var out []meta.Slice
		if err := st.View(root, func(tx store.Tx) error {
			var err error
			out, err = tx.DelSlices(1000)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if q := queued(); len(q) != 1 || q[0].Id != ids[7] {
		t.Fatalf("queue after a failed deletion: %+v, want only slice %d", q, ids[7])
	}
	wantDeleted(t, rec, "after a round with one failure", slices.DeleteFunc(slices.Clone(ids), func(id uint64) bool { return id == ids[7] })...)
	mu.Lock()
	delete(failing, ids[7])
	mu.Unlock()
	flushDeletions(t, c)
	wantDeleted(t, rec, "after the next round", ids...)
	if q := queued(); len(q) != 0 {
		t.Fatalf("queue after every deletion succeeded: %+v", q)
	}
	wantChunk(t, c, f.Ino, 0)
}
