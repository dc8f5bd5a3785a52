package chunk

import (
	"context"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/object"
)

// getLog records the keys read from the object store it wraps.
type getLog struct {
	object.Store
	mu     sync.Mutex
	keys   []string
	ranges [][2]int64 // offset and limit of each Get
	// cold makes ranged Gets under object.ReportCold report that their
	// bytes came from the disk, as the local directory's do when its
	// file is not in the page cache.
	cold bool
}

func (g *getLog) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	g.mu.Lock()
	g.keys = append(g.keys, key)
	g.ranges = append(g.ranges, [2]int64{off, limit})
	g.mu.Unlock()
	if c := object.ColdReport(ctx); c != nil && g.cold {
		*c = true
	}
	return g.Store.Get(ctx, key, off, limit)
}

func (g *getLog) got() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.keys)
}

func TestReadahead(t *testing.T) {
	const blocks = 16
	e := newEnv(t, nil, Config{})
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	m := &fileModel{}
	e.write(t, w, m, pattern(1, blocks*testBlockSize), 0)
	e.flush(t, w)
	length := e.length(t, ino)
	id := e.slices(t, ino, 0)[0].Id
	key := func(i int) string { return BlockKey(id, i, testBlockSize, false) }

	tests := []struct {
		name         string
		maxReadahead int64
		// wantAhead are blocks that must be fetched although no read asked
		// for them yet.
		wantAhead []int
	}{
		{"off", 0, nil},
		{"4 blocks", 4 * testBlockSize, []int{1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &getLog{Store: e.obj}
			s := New(log, Config{BlockSize: testBlockSize, MaxReadahead: tt.maxReadahead})
			r := s.NewReader(ino)
			const n = 16 << 10
			for off := uint64(0); off < 4*n; off += n {
				r.Readahead(e.ctx, e.c, off, n, length)
				p := make([]byte, n)
				if err := s.ReadFile(e.ctx, e.c, ino, p, off); err != nil {
					t.Fatalf("ReadFile at %d: %v", off, err)
				}
				assertBytes(t, p, m.bytes(off, n), off)
			}
			if tt.wantAhead == nil {
				if got := log.got(); !slices.Equal(got, []string{key(0)}) {
					t.Fatalf("without readahead the reads fetched %q, want only %q", got, key(0))
				}
				return
			}
			deadline := time.Now().Add(10 * time.Second)
			for _, b := range tt.wantAhead {
				for !slices.Contains(log.got(), key(b)) {
					if time.Now().After(deadline) {
						t.Fatalf("block %d was not read ahead; fetched %q", b, log.got())
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			// A block read ahead serves the next read without a new fetch.
			off := uint64(2 * testBlockSize)
			p := make([]byte, testBlockSize)
			if err := s.ReadFile(e.ctx, e.c, ino, p, off); err != nil {
				t.Fatalf("ReadFile at %d: %v", off, err)
			}
			assertBytes(t, p, m.bytes(off, testBlockSize), off)
			fetched := 0
			for _, k := range log.got() {
				if k == key(2) {
					fetched++
				}
			}
			if fetched != 1 {
				t.Fatalf("block 2 was fetched %d times, want once", fetched)
			}
		})
	}
}

func TestSmallReads(t *testing.T) {
	e := newEnv(t, nil, Config{})
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	m := &fileModel{}
	e.write(t, w, m, pattern(2, 2*testBlockSize), 0)
	e.flush(t, w)
	id := e.slices(t, ino, 0)[0].Id
	key := BlockKey(id, 1, testBlockSize, false)
	const off, n = testBlockSize + 1000, 4096

	tests := []struct {
		name string
		conf Config
		cold bool // the store reports reading the disk
		// wantFirst is the (offset, limit) of the read's own Get.
		wantFirst [2]int64
		// wantWhole: a whole-block fetch follows in the background.
		wantWhole bool
	}{
		{"whole block without ranged reads", Config{}, false, [2]int64{0, -1}, false},
		{"ranged read, no prefetch", Config{RangedReads: true}, false, [2]int64{1000, n}, false},
		{"ranged read, then the whole block", Config{RangedReads: true, Prefetch: 1}, false, [2]int64{1000, n}, true},
		{"local bucket, bytes in memory", Config{RangedReads: true, Prefetch: 1, PrefetchCold: true}, false, [2]int64{1000, n}, false},
		{"local bucket, bytes from the disk", Config{RangedReads: true, Prefetch: 1, PrefetchCold: true}, true, [2]int64{1000, n}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &getLog{Store: e.obj, cold: tt.cold}
			tt.conf.BlockSize = testBlockSize
			s := New(log, tt.conf)
			p := make([]byte, n)
			if err := s.ReadFile(e.ctx, e.c, ino, p, off); err != nil {
				t.Fatalf("ReadFile: %v", err)
			}
			assertBytes(t, p, m.bytes(off, n), off)
			// The read's own Get; with prefetch the whole-block Get runs
			// beside it and may reach the store first.
			log.mu.Lock()
			ranges, keys := slices.Clone(log.ranges), slices.Clone(log.keys)
			log.mu.Unlock()
			if !slices.Contains(ranges, tt.wantFirst) || keys[0] != key {
				t.Fatalf("Gets %q %v, want the read's own %s %v", keys, ranges, key, tt.wantFirst)
			}
			if !tt.wantWhole {
				time.Sleep(50 * time.Millisecond) // time for a wrong prefetch to show
				log.mu.Lock()
				keys = slices.Clone(log.keys)
				log.mu.Unlock()
				if len(keys) != 1 {
					t.Fatalf("Gets %q, want only the read's own", keys)
				}
				return
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, ok := s.mem.Get(key); ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the whole block was not prefetched into the cache")
				}
				time.Sleep(5 * time.Millisecond)
			}
			log.mu.Lock()
			ranges = slices.Clone(log.ranges)
			log.mu.Unlock()
			if len(ranges) != 2 || !slices.Contains(ranges, [2]int64{0, -1}) {
				t.Fatalf("Gets %v, want the read's own and one of the whole block", ranges)
			}
		})
	}
}
