package metatest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// Contention: two clients on one store (two mounts of a volume), each
// with several goroutines changing one file or one directory at once.
// Every operation must succeed: a write a local file system accepts
// must not fail because others wrote the same file meanwhile (issue 51:
// slice commits gave up after 50 attempts at a conflicting transaction).
const (
	contendClients = 2
	contendWorkers = 8 // goroutines per client (ContendDir: Options.ContendDirWorkers)
	contendOps     = 20
)

// counting is a store that counts the runs of its Updates' functions
// past the first (retries after conflicts), which the cases report.
type counting struct {
	store.Store
	updates, runs atomic.Int64
}

func (c *counting) Update(ctx context.Context, fn func(store.Tx) error) error {
	c.updates.Add(1)
	return c.Store.Update(ctx, func(tx store.Tx) error {
		c.runs.Add(1)
		return fn(tx)
	})
}

// contend formats a fresh store and runs work on workers goroutines of
// each of contendClients clients (w numbers the worker across clients),
// failing t with the errors they return. It returns the first client.
func contend(t *testing.T, ns newStoreFunc, workers int, prepare func(c *meta.Session), work func(c *meta.Session, w int) error) *meta.Session {
	t.Helper()
	st := &counting{Store: openStore(t, ns)}
	format(t, st, testFormat())
	clients := make([]*meta.Session, contendClients)
	for i := range clients {
		clients[i] = newClient(t, st, meta.Config{})
	}
	prepare(clients[0])
	updates, runs := st.updates.Load(), st.runs.Load()
	var wg sync.WaitGroup
	errs := make(chan error, contendClients*workers)
	for i, c := range clients {
		for j := range workers {
			wg.Go(func() {
				if err := work(c, i*workers+j); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d updates, %d retried after a conflict", st.updates.Load()-updates, st.runs.Load()-st.updates.Load()-(runs-updates))
	return clients[0]
}

// testContendFile: workers of two clients commit slices to one file at
// once, each to a region of its own (in both chunks of the file) and to
// a region they all overwrite. Every commit succeeds, and each block of
// the file then reads from the last slice that some worker committed
// over it: nothing committed later is lost under an earlier one.
func testContendFile(t *testing.T, ns newStoreFunc) {
	const block = 4096
	const shared = 4 // blocks at the start of chunk 0 every worker writes
	var ino meta.Ino
	// last[w][idx][blk]: the id of the last slice worker w committed
	// over block blk of chunk idx.
	workers := contendClients * contendWorkers
	last := make([]map[[2]uint32]uint64, workers)
	c := contend(t, ns, contendWorkers, func(c *meta.Session) {
		ino = mkfile(t, c, meta.RootIno, "f").Ino
	}, func(c *meta.Session, w int) error {
		last[w] = map[[2]uint32]uint64{}
		for i := range contendOps {
			var idx, pos, n uint32
			if i%2 == 0 { // its own block, in chunk w%2, past the shared ones
				idx, pos, n = uint32(w%2), (shared+uint32(w))*block, block
			} else { // two of the shared blocks, shifting
				idx, pos, n = 0, uint32(i/2%(shared-1))*block, 2*block
			}
			id, err := c.NewSliceID(root)
			if err != nil {
				return fmt.Errorf("worker %d: slice id: %w", w, err)
			}
			s := meta.Slice{Id: id, Size: n, Pos: pos, Len: n}
			if _, err := Write(root, c, ino, idx, s); err != nil {
				return fmt.Errorf("worker %d: commit %d of %d bytes at %d of chunk %d: %w", w, i, n, pos, idx, err)
			}
			for b := pos / block; b < (pos+n)/block; b++ {
				last[w][[2]uint32{idx, b}] = id
			}
		}
		return nil
	})
	for idx := uint32(0); idx < 2; idx++ {
		list, err := c.ReadChunk(root, ino, idx)
		if err != nil {
			t.Fatalf("read chunk %d: %v", idx, err)
		}
		for _, g := range meta.Visible(list, 0, (shared+uint32(workers))*block) {
			for b := g.Start / block; b < (g.End+block-1)/block; b++ {
				var want []uint64 // the last slice over b of each worker that wrote it
				for w := range last {
					if id, ok := last[w][[2]uint32{idx, b}]; ok {
						want = append(want, id)
					}
				}
				var got uint64
				if g.Slice != nil {
					got = g.Slice.Id
				}
				if len(want) > 0 && !slices.Contains(want, got) || len(want) == 0 && got != 0 {
					t.Errorf("chunk %d block %d reads slice %d, want the last of some worker over it: one of %v", idx, b, got, want)
				}
			}
		}
	}
	a, err := c.GetAttr(root, ino)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(meta.ChunkSize) + (shared+uint64(workers))*block; a.Length != want {
		t.Errorf("length %d, want %d", a.Length, want)
	}
}

// testContendDir: workers of two clients create, rename and unlink
// names in one directory at once. Every call succeeds, and the
// directory then holds exactly the names left.
func testContendDir(t *testing.T, ns newStoreFunc, workers int) {
	var dir meta.Ino
	file := meta.NewNode{Type: store.TypeFile, Mode: 0o644}
	c := contend(t, ns, workers, func(c *meta.Session) {
		dir = mkdir(t, c, meta.RootIno, "d").Ino
	}, func(c *meta.Session, w int) error {
		for i := range contendOps {
			name := fmt.Sprintf("w%02d-%02d", w, i)
			if _, err := c.Mknod(root, dir, []byte(name), file); err != nil {
				return fmt.Errorf("create %s: %w", name, err)
			}
			if err := c.Rename(root, dir, []byte(name), dir, []byte(name+".r"), 0); err != nil {
				return fmt.Errorf("rename %s: %w", name, err)
			}
			if i%2 == 0 {
				if err := c.Unlink(root, dir, []byte(name+".r")); err != nil {
					return fmt.Errorf("unlink %s.r: %w", name, err)
				}
			}
		}
		return nil
	})
	var want []string
	for w := range contendClients * workers {
		for i := 1; i < contendOps; i += 2 {
			want = append(want, fmt.Sprintf("w%02d-%02d.r", w, i))
		}
	}
	es, err := c.ReadDir(root, dir, nil, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		if n := string(e.Name); n != "." && n != ".." {
			got = append(got, n)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("directory holds %d names %v, want %d", len(got), got, len(want))
	}
}
