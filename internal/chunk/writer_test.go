package chunk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/object"
)

// op is one write of a scripted test: n bytes of fresh data at off,
// optionally followed by a Flush.
type op struct {
	off   uint64
	n     int
	flush bool
}

// seq returns the ops that write total bytes from off in pieces of piece.
func seq(off uint64, total, piece int) []op {
	var ops []op
	for done := 0; done < total; done += piece {
		ops = append(ops, op{off: off + uint64(done), n: min(piece, total-done)})
	}
	return ops
}

func cat(parts ...[]op) []op {
	var out []op
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestWriteRoundTrip(t *testing.T) {
	const bs = testBlockSize
	tests := []struct {
		name string
		ops  []op
		// slices is the number of slices committed to chunk 0, or -1 to
		// not check it.
		slices int
	}{
		{"sequential 3 MiB in 128 KiB pieces", seq(0, 3<<20, 128<<10), 1},
		{"sequential in unaligned pieces", seq(0, 1<<20+333, 100_000), 1},
		{"one byte", []op{{off: 0, n: 1}}, 1},
		{"exactly one block", []op{{off: 0, n: bs}}, 1},
		{"block plus one", []op{{off: 0, n: bs + 1}}, 1},
		{"unaligned start", []op{{off: 12345, n: 3*bs + 7}}, 1},
		{"overwrite in the middle after flush",
			[]op{{off: 0, n: 1 << 20, flush: true}, {off: 300_000, n: 200_000}}, 2},
		{"overwrite before flush in the same slice", // nothing uploaded yet
			[]op{{off: 0, n: 40_000}, {off: 10_000, n: 10_000}}, 1},
		{"rewrite the unuploaded tail of a slice", // block 0 is uploading, block 1 is not
			[]op{{off: 0, n: 100_000}, {off: 70_000, n: 20_000}}, 1},
		{"overwrite an uploaded block before flush",
			append(seq(0, 10*bs, bs), op{off: 2*bs + 100, n: 1000}), 2},
		{"overwrite spanning uploaded and buffered blocks",
			append(seq(0, 3*bs+500, bs), op{off: 2*bs + 100, n: bs}), 2},
		{"append after flush", cat(seq(0, 300_000, 50_000), []op{{off: 300_000, n: 10, flush: true}},
			seq(300_010, 200_000, 30_000)), 2},
		{"backwards writes", []op{{off: 4 * bs, n: bs}, {off: 3 * bs, n: bs}, {off: 2*bs + 7, n: bs},
			{off: 0, n: bs + 100}}, 4},
		{"gap then fill", []op{{off: 0, n: 1000}, {off: 5000, n: 1000}, {off: 1000, n: 4000}}, 2}, // the fill continues the first
		{"fill over a newer slice", []op{{off: 0, n: 1000}, {off: 5000, n: 1000}, {off: 1000, n: 4500}}, 3},
		{"buffered slices covered by a later write",
			[]op{{off: 100, n: 1000}, {off: 5000, n: 1000}, {off: 3000, n: 500}, {off: 0, n: 8000}, {off: 20, n: 30}}, 1},
		{"covered after an upload began", // the first slice's block 0 is uploading: it stays
			[]op{{off: 0, n: bs + 10}, {off: 2 * bs, n: 10}, {off: 0, n: 3 * bs}}, 2},
		{"many flushes", []op{{off: 0, n: 10, flush: true}, {off: 10, n: 10, flush: true},
			{off: 5, n: 10, flush: true}, {off: 0, n: 1, flush: true}}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil, Config{})
			ino := e.newFile(t, "f")
			w := e.s.NewWriter(ino, e.c)
			var m fileModel
			for i, o := range tt.ops {
				e.write(t, w, &m, pattern(uint64(i+1), o.n), o.off)
				if o.flush {
					e.flush(t, w)
					e.check(t, nil, ino, &m) // committed alone
				}
				if len(tt.ops) <= 30 {
					e.check(t, w, ino, &m) // buffered writes seen through Read
				}
			}
			if last := tt.ops[len(tt.ops)-1]; !last.flush && (!w.Dirty() || w.PendingEnd() == 0) {
				t.Errorf("before Flush: Dirty = %v, PendingEnd = %d", w.Dirty(), w.PendingEnd())
			}
			e.flush(t, w)
			if w.Dirty() || w.PendingEnd() != 0 {
				t.Errorf("after Flush: Dirty = %v, PendingEnd = %d", w.Dirty(), w.PendingEnd())
			}
			e.check(t, nil, ino, &m)
			e.check(t, w, ino, &m)
			if got := e.length(t, ino); got != m.size {
				t.Errorf("length = %d, want %d", got, m.size)
			}
			if ss := e.slices(t, ino, 0); tt.slices >= 0 && len(ss) != tt.slices {
				t.Errorf("committed %d slices, want %d: %+v", len(ss), tt.slices, ss)
			}
			// A second reader with a cold cache sees the same.
			e2 := *e
			e2.s = New(e.obj, Config{BlockSize: testBlockSize})
			e2.check(t, nil, ino, &m)
		})
	}
}

func TestWriteAcrossChunkBoundary(t *testing.T) {
	e := newEnv(t, nil, Config{})
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	var m fileModel
	const off = meta.ChunkSize - 1000
	e.write(t, w, &m, pattern(1, 5000), off)
	if got := w.PendingEnd(); got != meta.ChunkSize+4000 {
		t.Errorf("PendingEnd = %d, want %d", got, meta.ChunkSize+4000)
	}
	e.checkRange(t, w, ino, &m, off-3000, 10_000)
	e.flush(t, w)
	e.checkRange(t, nil, ino, &m, off-3000, 10_000)
	e.check(t, nil, ino, &m)
	if got := e.length(t, ino); got != meta.ChunkSize+4000 {
		t.Errorf("length = %d, want %d", got, meta.ChunkSize+4000)
	}
	for idx, want := range map[uint32]meta.Slice{0: {Pos: off, Len: 1000, Size: 1000}, 1: {Pos: 0, Len: 4000, Size: 4000}} {
		ss := e.slices(t, ino, idx)
		if len(ss) != 1 {
			t.Fatalf("chunk %d has slices %+v, want one", idx, ss)
		}
		got := ss[0]
		got.Id = 0
		if got != want {
			t.Errorf("chunk %d: slice %+v, want %+v", idx, got, want)
		}
	}
	// A read across the boundary of a file written in one piece.
	e.write(t, w, &m, pattern(2, 3*testBlockSize), meta.ChunkSize-testBlockSize-5)
	e.checkRange(t, w, ino, &m, meta.ChunkSize-2*testBlockSize, 4*testBlockSize)
	e.flush(t, w)
	e.checkRange(t, nil, ino, &m, meta.ChunkSize-2*testBlockSize, 4*testBlockSize)
}

// gateStore holds every Put until release is closed and reports on
// entered that a Put has started.
type gateStore struct {
	object.Store
	entered chan string
	release chan struct{}
}

func (g *gateStore) Put(ctx context.Context, key string, r io.Reader) error {
	g.entered <- key
	<-g.release
	return g.Store.Put(ctx, key, r)
}

// TestOverwriteUploadingBlock overwrites a block while its upload is in
// flight: the write must go to a new slice and leave the uploading block
// (blocks are immutable) alone.
func TestOverwriteUploadingBlock(t *testing.T) {
	const bs = testBlockSize
	g := &gateStore{Store: newMemStore(), entered: make(chan string, 100), release: make(chan struct{})}
	e := newEnv(t, g, Config{})
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	var m fileModel
	for i := range 10 {
		e.write(t, w, &m, pattern(1, 10*bs)[i*bs:(i+1)*bs], uint64(i*bs))
	}
	orig := m.bytes(0, 10*bs)
	for range 10 {
		<-g.entered // every full block's upload has started and is held
	}
	e.write(t, w, &m, pattern(2, 1000), 2*bs+100)
	e.check(t, w, ino, &m)
	close(g.release)
	e.flush(t, w)
	e.check(t, nil, ino, &m)

	ss := e.slices(t, ino, 0)
	if len(ss) != 2 || ss[0].Len != 10*bs || ss[1].Pos != 2*bs+100 || ss[1].Len != 1000 {
		t.Fatalf("slices = %+v, want the 10-block slice, then the 1000-byte overwrite", ss)
	}
	r, err := e.obj.Get(e.ctx, BlockKey(ss[0].Id, 2, bs, false), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	stored, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	assertBytes(t, stored, orig[2*bs:3*bs], 2*bs)
}

func TestRandomWrites(t *testing.T) {
	tests := []struct {
		seed      uint64
		flushProb float64
	}{{1, 0}, {2, 0.05}, {3, 0.2}}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("seed=%d,flush=%v", tt.seed, tt.flushProb), func(t *testing.T) {
			e := newEnv(t, nil, Config{})
			ino := e.newFile(t, "f")
			w := e.s.NewWriter(ino, e.c)
			r := rand.New(rand.NewPCG(tt.seed, 0))
			var m fileModel
			for i := range 300 {
				off := r.Uint64N(4 << 20)
				n := 1 + r.IntN(200<<10)
				e.write(t, w, &m, pattern(tt.seed<<32|uint64(i), n), off)
				if r.Float64() < tt.flushProb {
					e.flush(t, w)
				}
				if i%30 == 29 {
					off := r.Uint64N(m.size)
					e.checkRange(t, w, ino, &m, off, int(min(m.size-off, 1<<20)))
				}
			}
			e.check(t, w, ino, &m)
			e.flush(t, w)
			e.check(t, nil, ino, &m)
			if got := e.length(t, ino); got != m.size {
				t.Errorf("length = %d, want %d", got, m.size)
			}
		})
	}
}

func TestTruncateThenExtend(t *testing.T) {
	tests := []struct {
		name           string
		off            uint64 // of the first write
		n              int
		cut            uint64
		extendAt       uint64
		flushBeforeCut bool
	}{
		{"inside a block", 0, 1 << 20, 300_000, 800_000, true},
		{"at a block boundary", 0, 1 << 20, 2 * testBlockSize, 1<<20 + 50, true},
		{"to zero", 0, 1 << 20, 0, 500_000, true},
		{"then write inside the cut range", 0, 1 << 20, 100_000, 200_000, true},
		{"across chunks", meta.ChunkSize - 3000, 6000, 1000, meta.ChunkSize + 500, true},
		{"into the previous chunk", meta.ChunkSize - 3000, 6000, meta.ChunkSize - 2000, meta.ChunkSize + 100, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil, Config{})
			ino := e.newFile(t, "f")
			w := e.s.NewWriter(ino, e.c)
			var m fileModel
			e.write(t, w, &m, pattern(1, tt.n), tt.off)
			e.flush(t, w)
			if _, err := e.c.SetAttr(e.ctx, ino, meta.SetSize, &meta.Attr{Length: tt.cut}); err != nil {
				t.Fatalf("truncate to %d: %v", tt.cut, err)
			}
			m.truncate(tt.cut)
			if got := e.length(t, ino); got != tt.cut {
				t.Errorf("length after truncate = %d, want %d", got, tt.cut)
			}
			e.write(t, w, &m, pattern(2, 100), tt.extendAt)
			e.check(t, w, ino, &m)
			e.flush(t, w)
			e.check(t, nil, ino, &m)
			// The whole cut region reads as zeros.
			lo, hi := tt.cut, min(tt.off+uint64(tt.n), tt.extendAt)
			if hi > lo {
				if got := e.read(t, nil, ino, lo, int(hi-lo)); firstNonZero(got) >= 0 {
					t.Errorf("byte %d of the cut region is not zero", lo+uint64(firstNonZero(got)))
				}
			}
			if got := e.length(t, ino); got != tt.extendAt+100 {
				t.Errorf("length = %d, want %d", got, tt.extendAt+100)
			}
		})
	}
}

// failCommitter refuses every commit.
type failCommitter struct {
	*meta.Session
	mu      sync.Mutex
	refused []uint64
}

func (f *failCommitter) Commit(ctx context.Context, ino meta.Ino, idx uint32, s meta.Slice, _ bool) (*meta.Attr, error) {
	f.mu.Lock()
	f.refused = append(f.refused, s.Id)
	f.mu.Unlock()
	return nil, errInjected
}

// TestFlushFaults makes uploads or commits fail: Flush reports the error,
// the slice is not committed (metadata never names missing blocks), and
// the writer keeps failing afterwards.
func TestFlushFaults(t *testing.T) {
	const size = 10*testBlockSize + 123
	tests := []struct {
		name       string
		failPut    func(key string, n int) bool
		failCommit bool
		// second writes a first slice that commits, then an overwrite
		// whose upload fails.
		second bool
	}{
		{name: "third put", failPut: func(_ string, n int) bool { return n == 3 }},
		{name: "block 5", failPut: func(key string, _ int) bool { return parseKeyLoose(key).Index == 5 }},
		{name: "short last block", failPut: func(key string, _ int) bool { return parseKeyLoose(key).Len == 123 }},
		{name: "every put", failPut: func(string, int) bool { return true }},
		{name: "commit", failCommit: true},
		{name: "overwrite after a good slice", second: true,
			failPut: func(key string, _ int) bool { return parseKeyLoose(key).Len == 1000 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &faultStore{Store: newMemStore()}
			e := newEnv(t, f, Config{})
			ino := e.newFile(t, "f")
			var c Committer = e.c
			fc := &failCommitter{Session: e.c.Session}
			if tt.failCommit {
				c = fc
			}
			w := e.s.NewWriter(ino, c)
			var good fileModel
			if tt.second {
				e.write(t, w, &good, pattern(1, size), 0)
				e.flush(t, w) // no upload runs from here on
			}
			f.failPut = tt.failPut
			if tt.second {
				e.write(t, w, nil, pattern(2, 1000), 100)
			} else {
				data := pattern(1, size)
				for _, o := range seq(0, size, 32<<10) {
					e.write(t, w, nil, data[o.off:o.off+uint64(o.n)], o.off)
				}
			}

			err := w.Flush(e.ctx)
			if !errors.Is(err, errInjected) {
				t.Fatalf("Flush = %v, want the injected error", err)
			}
			failed := map[uint64]bool{}
			for _, key := range f.failedKeys() {
				failed[parseKey(t, key, false).ID] = true
			}
			fc.mu.Lock()
			for _, id := range fc.refused {
				failed[id] = true
			}
			fc.mu.Unlock()
			if len(failed) == 0 {
				t.Fatal("no upload or commit failed")
			}
			ss := e.slices(t, ino, 0)
			for _, s := range ss {
				if failed[s.Id] {
					t.Errorf("slice %d is committed although storing it failed", s.Id)
				}
			}
			if tt.second {
				if len(ss) != 1 {
					t.Errorf("slices = %+v, want only the first", ss)
				}
				e.check(t, nil, ino, &good)
			} else if len(ss) != 0 || e.length(t, ino) != 0 {
				t.Errorf("after a failed flush: slices %+v, length %d; want none, 0", ss, e.length(t, ino))
			}
			// The failure sticks: the data it lost is never silently dropped.
			f.failPut = nil
			if err := w.Flush(e.ctx); !errors.Is(err, errInjected) {
				t.Errorf("second Flush = %v, want the injected error", err)
			}
			if err := w.Write(e.ctx, []byte("x"), 0); !errors.Is(err, errInjected) {
				t.Errorf("Write after a failure = %v, want the injected error", err)
			}
			if used := budgetUsed(e.s); used != 0 {
				t.Errorf("%d buffer bytes still accounted after the failed slices finished", used)
			}
		})
	}
}

// parseKeyLoose parses a block key without a *testing.T, for use inside
// fault predicates; other keys parse as index and length -1.
func parseKeyLoose(key string) BlockRef {
	ref, err := ParseBlockKey(key)
	if err != nil {
		return BlockRef{Index: -1, Len: -1}
	}
	return ref
}

// budgetUsed returns the bytes the write buffers of s hold.
func budgetUsed(s *Store) int64 {
	s.buffers.mu.Lock()
	defer s.buffers.mu.Unlock()
	return s.buffers.used
}

// within runs f and fails the test if it does not return within d: a
// guard against deadlocked writers that does not sleep.
func within(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(d):
		t.Fatalf("%s did not finish within %v: writers deadlocked waiting for buffer space", what, d)
	}
}

// writeSeq writes total bytes of data from off in pieces of piece.
func writeSeq(ctx context.Context, w *FileWriter, data []byte, off uint64, piece int) error {
	for done := 0; done < len(data); done += piece {
		end := min(done+piece, len(data))
		if err := w.Write(ctx, data[done:end], off+uint64(done)); err != nil {
			return err
		}
	}
	return nil
}

func TestBufferBudget(t *testing.T) {
	e := newEnv(t, nil, Config{BufferSize: 1 << 20})
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	data := pattern(1, 8<<20)
	within(t, 30*time.Second, "writing 8 MiB through a 1 MiB buffer", func() error {
		if err := writeSeq(e.ctx, w, data, 0, 128<<10); err != nil {
			return err
		}
		return w.Flush(e.ctx)
	})
	var m fileModel
	m.write(data, 0)
	e.check(t, nil, ino, &m)
	if ss := e.slices(t, ino, 0); len(ss) < 4 {
		t.Errorf("8 MiB through a 1 MiB buffer committed %d slices; the budget never forced a commit", len(ss))
	}
	if used := budgetUsed(e.s); used != 0 {
		t.Errorf("budget still holds %d bytes after Flush", used)
	}
}

// TestBufferPressureKeepsWholeBlocks writes a file sequentially in pieces
// that do not divide the block size through a budget of a few blocks:
// the budget forces commits, and every committed slice but the last still
// ends on a block boundary, so no block but the file's last is short.
func TestBufferPressureKeepsWholeBlocks(t *testing.T) {
	e := newEnv(t, nil, Config{BufferSize: 4 * testBlockSize, MaxUploads: 2})
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	data := pattern(3, 40*testBlockSize+1000)
	within(t, 30*time.Second, "writing 40 blocks through a 4-block buffer", func() error {
		if err := writeSeq(e.ctx, w, data, 0, 24<<10); err != nil {
			return err
		}
		return w.Flush(e.ctx)
	})
	var m fileModel
	m.write(data, 0)
	e.check(t, nil, ino, &m)
	ss := e.slices(t, ino, 0)
	if len(ss) < 2 {
		t.Fatalf("40 blocks through a 4-block buffer committed %d slices; the budget never forced a commit", len(ss))
	}
	for i, s := range ss[:len(ss)-1] {
		if s.Size%testBlockSize != 0 || s.Pos%testBlockSize != 0 {
			t.Errorf("slice %d of %d at %d: %d bytes, not whole blocks", i, len(ss), s.Pos, s.Size)
		}
	}
	if used := budgetUsed(e.s); used != 0 {
		t.Errorf("budget still holds %d bytes after Flush", used)
	}
}

// TestBufferPressureBelowOneBlock writes through a budget smaller than one
// block, so the block being filled must be frozen for room: the writer
// still gets through, and the file reads back whole.
func TestBufferPressureBelowOneBlock(t *testing.T) {
	e := newEnv(t, nil, Config{BufferSize: testBlockSize / 4})
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	data := pattern(4, 4*testBlockSize)
	within(t, 30*time.Second, "writing 4 blocks through a quarter-block buffer", func() error {
		if err := writeSeq(e.ctx, w, data, 0, 3<<10); err != nil {
			return err
		}
		return w.Flush(e.ctx)
	})
	var m fileModel
	m.write(data, 0)
	e.check(t, nil, ino, &m)
	if used := budgetUsed(e.s); used != 0 {
		t.Errorf("budget still holds %d bytes after Flush", used)
	}
}

// TestBufferBudgetIdleWriter fills (part of) the shared budget from one
// file that then goes idle without flushing, like an open file nobody
// writes to: the writer of another file must still make progress.
func TestBufferBudgetIdleWriter(t *testing.T) {
	for _, idleBytes := range []int{900 << 10, 1<<20 + 1000} {
		t.Run(fmt.Sprintf("idle=%d", idleBytes), func(t *testing.T) {
			e := newEnv(t, nil, Config{BufferSize: 1 << 20})
			idle := e.s.NewWriter(e.newFile(t, "idle"), e.c)
			var idleModel fileModel
			e.write(t, idle, &idleModel, pattern(1, idleBytes), 0) // not flushed

			ino := e.newFile(t, "busy")
			w := e.s.NewWriter(ino, e.c)
			data := pattern(2, 2<<20)
			within(t, 30*time.Second, "writing a second file while an idle one holds buffers", func() error {
				if err := writeSeq(e.ctx, w, data, 0, 128<<10); err != nil {
					return err
				}
				return w.Flush(e.ctx)
			})
			var m fileModel
			m.write(data, 0)
			e.check(t, nil, ino, &m)
			e.check(t, idle, idle.ino, &idleModel)
			e.flush(t, idle)
			e.check(t, nil, idle.ino, &idleModel)
			if used := budgetUsed(e.s); used != 0 {
				t.Errorf("budget still holds %d bytes after both files flushed", used)
			}
		})
	}
}

func TestConcurrentWriters(t *testing.T) {
	for _, budget := range []int64{0, 1 << 20} {
		t.Run(fmt.Sprintf("budget=%d", budget), func(t *testing.T) {
			e := newEnv(t, nil, Config{BufferSize: budget, MaxUploads: 4})
			const files = 4
			inos := make([]meta.Ino, files)
			models := make([]fileModel, files)
			for i := range inos {
				inos[i] = e.newFile(t, fmt.Sprintf("f%d", i))
			}
			within(t, 30*time.Second, "four concurrent writers", func() error {
				var wg sync.WaitGroup
				errs := make([]error, files)
				for i := range files {
					wg.Add(1)
					go func() {
						defer wg.Done()
						errs[i] = writeRandom(e.ctx, e.s.NewWriter(inos[i], e.c), &models[i], uint64(i+1))
					}()
				}
				wg.Wait()
				return errors.Join(errs...)
			})
			for i := range inos {
				e.check(t, nil, inos[i], &models[i])
			}
		})
	}
}

// writeRandom writes a mix of sequential runs and random overwrites to w,
// applies them to m, and flushes. It runs on its own goroutine, so it
// returns errors instead of failing a test.
func writeRandom(ctx context.Context, w *FileWriter, m *fileModel, seed uint64) error {
	r := rand.New(rand.NewPCG(seed, 99))
	var next uint64
	for i := range 80 {
		var off uint64
		var n int
		if r.IntN(2) == 0 {
			off, n = next, 50_000+r.IntN(100_000)
		} else {
			off, n = r.Uint64N(2<<20), 1+r.IntN(100_000)
		}
		next = off + uint64(n)
		p := pattern(seed<<32|uint64(i), n)
		if err := w.Write(ctx, p, off); err != nil {
			return fmt.Errorf("writer %d: %w", seed, err)
		}
		m.write(p, off)
		if r.IntN(20) == 0 {
			if err := w.Flush(ctx); err != nil {
				return fmt.Errorf("writer %d: %w", seed, err)
			}
		}
	}
	if err := w.Flush(ctx); err != nil {
		return fmt.Errorf("writer %d: %w", seed, err)
	}
	return nil
}

// TestReadWhileWriting reads a file through Read while another
// goroutine writes it and the budget forces commits: every byte read is
// either not yet written (zero) or the written byte, never garbage.
func TestReadWhileWriting(t *testing.T) {
	e := newEnv(t, nil, Config{BufferSize: 512 << 10})
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	data := pattern(1, 4<<20)
	for i := range data {
		data[i] |= 1 // never zero, so zero means "not written yet"
	}
	done := make(chan error, 1)
	go func() {
		err := writeSeq(e.ctx, w, data, 0, 64<<10+17)
		if err == nil {
			err = w.Flush(e.ctx)
		}
		done <- err
	}()
	r := rand.New(rand.NewPCG(5, 5))
	for reads := 0; ; reads++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			var m fileModel
			m.write(data, 0)
			e.check(t, nil, ino, &m)
			return
		default:
		}
		off := r.IntN(len(data))
		n := min(1+r.IntN(300<<10), len(data)-off)
		p := make([]byte, n)
		if err := w.Read(e.ctx, e.c, p, uint64(off)); err != nil {
			t.Fatalf("read during writes: %v", err)
		}
		for i, b := range p {
			if b != 0 && b != data[off+i] {
				t.Fatalf("read %d: byte %d is %#x, want 0 or %#x", reads, off+i, b, data[off+i])
			}
		}
	}
}

// gateCommitter holds every commit until release is closed and reports on
// entered that a commit has started.
type gateCommitter struct {
	metatest.Committer
	entered chan meta.Slice
	release chan struct{}
}

func (g *gateCommitter) Commit(ctx context.Context, ino meta.Ino, idx uint32, s meta.Slice, unsynced bool) (*meta.Attr, error) {
	g.entered <- s
	<-g.release
	return g.Committer.Commit(ctx, ino, idx, s, unsynced)
}

// hookSource calls after once, when the first ReadChunk has listed the
// slices.
type hookSource struct {
	SliceSource
	once  *sync.Once
	after func()
}

func (h hookSource) ReadChunk(ctx context.Context, ino meta.Ino, idx uint32) ([]meta.Slice, error) {
	ss, err := h.SliceSource.ReadChunk(ctx, ino, idx)
	h.once.Do(h.after)
	return ss, err
}

// TestReadDuringCommit reads written data the way the vfs does (Read:
// ReadFile, then the buffered writes on top) while the slice holding it
// commits between the two steps.
// The write completed before the read began, so the read must see it.
func TestReadDuringCommit(t *testing.T) {
	e := newEnv(t, nil, Config{})
	ino := e.newFile(t, "f")
	g := &gateCommitter{Committer: e.c, entered: make(chan meta.Slice, 10), release: make(chan struct{})}
	w := e.s.NewWriter(ino, g)
	var m fileModel
	// Ending the chunk makes the slice commit in the background.
	e.write(t, w, &m, pattern(1, 1000), meta.ChunkSize-1000)
	<-g.entered
	src := hookSource{SliceSource: e.c, once: new(sync.Once), after: func() {
		close(g.release)
		if err := w.Flush(e.ctx); err != nil { // the slice is committed and no longer buffered
			t.Error(err)
		}
	}}
	p := make([]byte, 1000)
	if err := w.Read(e.ctx, src, p, meta.ChunkSize-1000); err != nil {
		t.Fatal(err)
	}
	assertBytes(t, p, m.bytes(meta.ChunkSize-1000, 1000), meta.ChunkSize-1000)
}

// TestSmallBuffers checks that block buffers grow with what is written:
// a small file holds a few KiB of the budget, not a block, gaps read as
// zeros, and a buffer that reaches fullBufferAt takes the whole block.
func TestSmallBuffers(t *testing.T) {
	const bs = 4 << 20
	for _, tc := range []struct {
		name   string
		writes [][2]int // offset, length
		held   int64
	}{
		{"10 KB file", [][2]int{{0, 10000}}, 16 << 10},
		{"tar records", [][2]int{{0, 10240}, {10240, 10240}, {20480, 10240}}, 32 << 10},
		{"apart", [][2]int{{0, 100}, {20000, 100}}, 2 * minBuffer},
		{"rewrite", [][2]int{{0, 5000}, {100, 200}, {4000, 3000}}, 8 << 10},
		{"sequential 128 KiB", [][2]int{{0, 128 << 10}}, bs},
		{"grows to a block", [][2]int{{0, 60 << 10}, {60 << 10, 60 << 10}, {120 << 10, 10 << 10}}, bs},
		{"two blocks", [][2]int{{0, bs - 100}, {bs - 100, 200}}, bs + minBuffer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil, Config{BlockSize: bs, BufferSize: 64 << 20})
			ino := e.newFile(t, "f")
			w := e.s.NewWriter(ino, e.c)
			var m fileModel
			for i, wr := range tc.writes {
				data := pattern(uint64(i+1), wr[1])
				if err := w.Write(e.ctx, data, uint64(wr[0])); err != nil {
					t.Fatal(err)
				}
				m.write(data, uint64(wr[0]))
			}
			if used := budgetUsed(e.s); used != tc.held {
				t.Errorf("buffers hold %d bytes, want %d", used, tc.held)
			}
			if err := w.Flush(e.ctx); err != nil {
				t.Fatal(err)
			}
			e.check(t, nil, ino, &m)
			if used := budgetUsed(e.s); used != 0 {
				t.Errorf("budget still holds %d bytes after Flush", used)
			}
		})
	}
}

// TestRecycledBuffers writes files one after another through a store that
// recycles whole-block buffers, with different contents and partial last
// blocks, and reads each back: no byte of one file may show in another.
// By default the short blocks are cached (their buffers, whole-block
// ones when a block is 64 KiB, must not be reused) and the full ones not;
// with CachePartialOnly no written block is.
func TestRecycledBuffers(t *testing.T) {
	const bs = 64 << 10
	for _, conf := range []Config{
		{BlockSize: bs, MemoryCacheSize: 64 << 20},
		{BlockSize: bs, MemoryCacheSize: 64 << 20, CachePartialOnly: true},
	} {
		t.Run(fmt.Sprintf("CachePartialOnly=%v", conf.CachePartialOnly), func(t *testing.T) {
			e := newEnv(t, nil, conf)
			if e.s.blockBufs == nil {
				t.Fatal("store does not recycle buffers")
			}
			type file struct {
				ino meta.Ino
				m   fileModel
			}
			var files []file
			for i, size := range []int{3*bs + 100, bs / 2, 2 * bs, 5*bs - 7, 3*bs - 5000} {
				ino := e.newFile(t, fmt.Sprintf("f%d", i))
				w := e.s.NewWriter(ino, e.c)
				data := pattern(uint64(i+10), size)
				if err := writeSeq(e.ctx, w, data, 0, 8<<10); err != nil {
					t.Fatal(err)
				}
				// An overwrite inside the buffered part, then a short tail.
				if err := w.Write(e.ctx, pattern(uint64(i+50), 300), uint64(size/3)); err != nil {
					t.Fatal(err)
				}
				if err := w.Flush(e.ctx); err != nil {
					t.Fatal(err)
				}
				f := file{ino: ino}
				f.m.write(data, 0)
				f.m.write(pattern(uint64(i+50), 300), uint64(size/3))
				files = append(files, f)
			}
			for _, f := range files {
				e.check(t, nil, f.ino, &f.m)
			}
		})
	}
}

// TestRecycledBuffersSpareCachedBlocks writes a file of one short block,
// whose buffer is a whole-block one (the block size is 64 KiB) and which
// the memory cache keeps, then another file: the second must not reuse
// that buffer, or the first file's cached block changes under it.
func TestRecycledBuffersSpareCachedBlocks(t *testing.T) {
	const bs = 64 << 10
	e := newEnv(t, nil, Config{BlockSize: bs, MemoryCacheSize: 64 << 20})
	var models [2]fileModel
	var inos [2]meta.Ino
	for i, size := range []int{bs - 7, 2 * bs} {
		inos[i] = e.newFile(t, fmt.Sprintf("f%d", i))
		w := e.s.NewWriter(inos[i], e.c)
		data := pattern(uint64(i+1), size)
		if err := writeSeq(e.ctx, w, data, 0, 8<<10); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(e.ctx); err != nil {
			t.Fatal(err)
		}
		models[i].write(data, 0)
	}
	if e.s.mem.Used() == 0 {
		t.Fatal("the short block is not in the memory cache")
	}
	e.check(t, nil, inos[0], &models[0])
	e.check(t, nil, inos[1], &models[1])
}
