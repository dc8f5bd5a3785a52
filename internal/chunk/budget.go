package chunk

import (
	"sync"
	"time"
)

// budget bounds the bytes held by write buffers of a mount. acquire
// blocks while the budget is exhausted, so writers slow down rather than
// grow memory.
type budget struct {
	limit int64
	mu    sync.Mutex
	cond  *sync.Cond
	used  int64
}

func newBudget(limit int64) *budget {
	b := &budget{limit: limit}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// over reports whether the budget is exhausted.
func (b *budget) over() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used >= b.limit
}

// add takes n bytes without waiting.
func (b *budget) add(n int64) {
	b.mu.Lock()
	b.used += n
	b.mu.Unlock()
}

// waitBelow blocks until less than the limit is in use.
func (b *budget) waitBelow() {
	b.mu.Lock()
	for b.used >= b.limit {
		b.cond.Wait()
	}
	b.mu.Unlock()
}

// waitBelowFor is waitBelow for at most d; it reports whether less than
// the limit is in use.
func (b *budget) waitBelowFor(d time.Duration) bool {
	deadline := time.Now().Add(d)
	t := time.AfterFunc(d, func() {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	})
	defer t.Stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.used >= b.limit {
		if !time.Now().Before(deadline) {
			return false
		}
		b.cond.Wait()
	}
	return true
}

// release returns n bytes.
func (b *budget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.cond.Broadcast()
	b.mu.Unlock()
}

// inUse returns the bytes taken.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
