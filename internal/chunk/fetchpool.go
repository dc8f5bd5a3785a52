package chunk

import "sync"

// fetchPool recycles the buffers of whole blocks fetched into the memory
// cache. A fresh 4 MiB buffer costs a page fault and the zeroing of every
// 4 KiB page on first touch: filling one took five times as long as
// filling a buffer used before, and made up half of a sequential read's
// CPU. A buffer the memory cache lets go of may still be in use by reads
// that found it there (or, through ReadFileVec, by the reply written from
// it), so it is retired with the guard's mark and reused only once every
// read that entered before has left. Buffers the pool did not hand out
// (written blocks, blocks read from the disk cache) are left to the
// collector.
type fetchPool struct {
	size  int // block size: only whole blocks are pooled
	guard *readGuard

	mu      sync.Mutex
	gen     uint64           // of the last buffer handed out
	out     map[*byte]uint64 // buffers handed out and not yet retired, with their generation
	retired []retiredBuf     // in the order of their marks
	free    [][]byte
}

// retiredBuf is a buffer the memory cache let go of; it is free once the
// reads with tickets below after have left.
type retiredBuf struct {
	b     []byte
	after uint64
}

// Bounds on the buffers the pool keeps, beyond the memory cache: 160 MiB
// of 4 MiB blocks at most, and that only while a read holds up their
// reuse; a burst of evictions beyond them goes to the collector.
const (
	maxRetiredBufs = 32
	maxFreeBufs    = 8
)

func newFetchPool(size int, guard *readGuard) *fetchPool {
	return &fetchPool{size: size, guard: guard, out: map[*byte]uint64{}}
}

// get returns a buffer of n bytes, recycled when n is the block size, and
// the generation of this use of it (0 for a buffer outside the pool).
func (p *fetchPool) get(n int) ([]byte, uint64) {
	if n != p.size {
		return make([]byte, n), 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.retired) > 0 && len(p.free) < maxFreeBufs && p.guard.passed(p.retired[0].after) {
		p.free = append(p.free, p.retired[0].b)
		p.retired[0] = retiredBuf{}
		p.retired = p.retired[1:]
	}
	var b []byte
	if k := len(p.free); k > 0 {
		b, p.free[k-1] = p.free[k-1], nil
		p.free = p.free[:k-1]
	} else {
		b = make([]byte, n)
	}
	p.gen++
	p.out[&b[0]] = p.gen
	return b, p.gen
}

// live reports whether b is still the buffer of generation gen, handed out
// by get and not let go of since. A read that was handed a fetched block
// by a fetch it joined may have entered the read guard after the memory
// cache let go of the block (and the buffer may be in use again): it must
// check, and fetch again when the block is no longer live.
func (p *fetchPool) live(b []byte, gen uint64) bool {
	if gen == 0 {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	g, ok := p.out[&b[:1][0]]
	return ok && g == gen
}

// put takes back b, which the memory cache let go of, if the pool handed
// it out; a buffer that never made it into the cache goes back too.
func (p *fetchPool) put(b []byte) {
	if cap(b) != p.size || p.size == 0 {
		return
	}
	b = b[:p.size]
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.out[&b[0]]; !ok {
		return
	}
	delete(p.out, &b[0])
	if len(p.retired) == maxRetiredBufs {
		p.retired[0] = retiredBuf{}
		p.retired = p.retired[1:]
	}
	p.retired = append(p.retired, retiredBuf{b: b, after: p.guard.mark()})
}
