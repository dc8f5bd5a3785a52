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
	mu   sync.Mutex
	keys []string
}

func (g *getLog) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	g.mu.Lock()
	g.keys = append(g.keys, key)
	g.mu.Unlock()
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
