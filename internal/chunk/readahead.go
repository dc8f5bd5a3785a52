package chunk

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicefs/sluice/internal/chunk/readahead"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/object"
)

// readaheadConcurrency bounds the background block fetches of a mount's
// readahead.
const readaheadConcurrency = 16

// fetchTimeout bounds one background block fetch, so that a stuck object
// store does not pin readahead slots forever.
const fetchTimeout = 2 * time.Minute

// prefetcher runs the background block fetches of readahead and of
// whole-block prefetch: each block is fetched once (the Store's
// singleflight joins concurrent readers) into the block cache, and the
// bytes in flight are bounded.
type prefetcher struct {
	s        *Store
	limit    int64         // bytes of readahead in flight at most
	inflight atomic.Int64  // bytes being fetched now
	slots    chan struct{} // concurrent readahead fetches
	wholes   chan struct{} // concurrent whole-block prefetches (Config.Prefetch)

	mu   sync.Mutex
	keys map[string]bool // blocks being fetched
}

func newPrefetcher(s *Store, limit int64, concurrency, prefetch int) *prefetcher {
	return &prefetcher{s: s, limit: limit, slots: make(chan struct{}, max(concurrency, 1)),
		wholes: make(chan struct{}, max(prefetch, 1)), keys: map[string]bool{}}
}

// room returns the bytes readahead may start now.
func (p *prefetcher) room() int64 { return p.limit - p.inflight.Load() }

// busy reports whether block key is being fetched in the background, so
// that a reader had better wait for it than fetch the block again.
func (p *prefetcher) busy(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keys[key]
}

// claim marks key as being fetched; false when it already is.
func (p *prefetcher) claim(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.keys[key] {
		return false
	}
	p.keys[key] = true
	return true
}

func (p *prefetcher) release(key string) {
	p.mu.Lock()
	delete(p.keys, key)
	p.mu.Unlock()
}

// fetch loads block index of slice id (size bytes) into the cache in the
// background, unless it is cached or being fetched. It reports false when
// the store is busy with as much readahead as allowed, and the block was
// left out.
func (p *prefetcher) fetch(id uint64, size uint32, index int) bool {
	key := p.s.key(id, size, index)
	if _, ok := p.s.mem.Get(key); ok {
		return true
	}
	n := int64(p.s.blockLen(size, index))
	if p.inflight.Add(n) > p.limit {
		p.inflight.Add(-n)
		return false
	}
	if !p.claim(key) {
		p.inflight.Add(-n)
		return true
	}
	go func() {
		defer p.inflight.Add(-n)
		defer p.release(key)
		p.slots <- struct{}{}
		defer func() { <-p.slots }()
		p.load(id, size, index, true)
	}()
	return true
}

// whole starts a background fetch of a whole block after a small read of
// it, when fewer than Config.Prefetch such fetches are running.
func (p *prefetcher) whole(id uint64, size uint32, index int) {
	select {
	case p.wholes <- struct{}{}:
	default:
		return
	}
	key := p.s.key(id, size, index)
	if !p.claim(key) {
		<-p.wholes
		return
	}
	go func() {
		defer func() { <-p.wholes }()
		defer p.release(key)
		p.load(id, size, index, false)
	}()
}

// load fetches a block into the caches. A failure is not an error: the
// reader fetches the block itself and reports what goes wrong then. A
// block fetched ahead of a sequential reader is fetched under
// object.ReadAhead: it is read once and the caches hold it, so the
// bucket need not cache it too.
func (p *prefetcher) load(id uint64, size uint32, index int, ahead bool) {
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	if ahead {
		ctx = object.ReadAhead(ctx)
	}
	_, _ = p.s.block(ctx, id, size, index)
}

// FileReader is the read state of one open file: its readahead sessions.
// It is safe for concurrent use.
type FileReader struct {
	s   *Store
	ino meta.Ino

	mu     sync.Mutex
	policy *readahead.Policy
}

// NewReader returns the read state of an open file ino.
func (s *Store) NewReader(ino meta.Ino) *FileReader {
	return &FileReader{s: s, ino: ino, policy: readahead.New(readahead.Config{
		Unit: int64(s.conf.BlockSize),
		Min:  int64(s.conf.BlockSize),
		Max:  s.conf.MaxReadahead,
	})}
}

// Reset forgets the file's read pattern, after a change of its content.
func (r *FileReader) Reset() {
	r.mu.Lock()
	r.policy.Reset()
	r.mu.Unlock()
}

// Readahead records a read of n bytes at off of a file of length bytes and
// starts fetching, in the background, the committed blocks the file's
// readahead policy expects to be read next. It returns at once.
func (r *FileReader) Readahead(ctx context.Context, src SliceSource, off, n, length uint64) {
	if r.s.conf.MaxReadahead <= 0 {
		return
	}
	p := r.s.prefetch
	r.mu.Lock()
	rg := r.policy.Read(int64(off), int64(n), int64(length), p.room())
	r.mu.Unlock()
	if rg.Empty() {
		return
	}
	if upto := r.fetchRange(ctx, src, uint64(rg.Start), uint64(rg.End)); upto < uint64(rg.End) {
		r.mu.Lock()
		r.policy.Shortfall(int64(upto))
		r.mu.Unlock()
	}
}

// fetchRange starts fetches of the blocks holding the file's bytes in
// [start, end). Slice lists come from src (an open file caches them). It
// returns end, or where it stopped: the file offset of the first block it
// could not start, or of the chunk whose slice list failed to load.
func (r *FileReader) fetchRange(ctx context.Context, src SliceSource, start, end uint64) uint64 {
	bs := uint32(r.s.conf.BlockSize)
	for off := start; off < end; {
		idx := uint32(off / meta.ChunkSize)
		base := uint64(idx) * meta.ChunkSize
		cs := uint32(off % meta.ChunkSize)
		ce := uint32(min(end-base, meta.ChunkSize))
		slices, err := src.ReadChunk(ctx, r.ino, idx)
		if err != nil {
			return off
		}
		for _, g := range meta.Visible(slices, cs, ce) {
			if g.Slice == nil || g.Slice.Id == 0 {
				continue
			}
			from := g.SliceOff()
			to := from + (g.End - g.Start)
			for b := from / bs; b*bs < to; b++ {
				if !r.s.prefetch.fetch(g.Slice.Id, g.Slice.Size, int(b)) {
					// The file offset where block b of the slice starts,
					// or the visible part's start when b begins before it.
					return base + uint64(g.Start) + uint64(max(b*bs, from)-from)
				}
			}
		}
		off = base + uint64(ce)
	}
	return end
}
