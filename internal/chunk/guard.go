package chunk

import (
	"context"
	"sync"
)

// readGuard lets the deletion of a slice wait for the reads of this mount
// that may still use it. A read enters the guard before it looks at any
// slice list and leaves it when it is done; a deletion waits until every
// read that entered before the deletion began has left. A compaction drops
// the lists this mount cached before it deletes what it replaced, so a
// read that enters later finds the new list, and one that entered earlier
// finishes on blocks that are still there. Reads on other mounts are not
// covered: they find a block missing, read the list again and retry.
type readGuard struct {
	mu      sync.Mutex
	next    uint64              // ticket of the next read
	active  map[uint64]struct{} // tickets of reads under way
	waiters []guardWaiter
}

// guardWaiter is a deletion waiting for the reads with tickets below t.
type guardWaiter struct {
	t  uint64
	ch chan struct{}
}

func newReadGuard() *readGuard {
	return &readGuard{active: map[uint64]struct{}{}}
}

// enter registers a read and returns its ticket, for leave.
func (g *readGuard) enter() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.next
	g.next++
	g.active[t] = struct{}{}
	return t
}

// leave ends the read with ticket t.
func (g *readGuard) leave(t uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.active, t)
	if len(g.waiters) == 0 {
		return
	}
	low := g.oldestLocked()
	kept := g.waiters[:0]
	for _, w := range g.waiters {
		if low >= w.t {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	clear(g.waiters[len(kept):])
	g.waiters = kept
}

// oldestLocked returns the lowest active ticket, or next when no read is
// under way.
func (g *readGuard) oldestLocked() uint64 {
	low := g.next
	for t := range g.active {
		low = min(low, t)
	}
	return low
}

// wait returns once every read that entered before the call has left, or
// with ctx's error.
func (g *readGuard) wait(ctx context.Context) error {
	g.mu.Lock()
	t := g.next
	if g.oldestLocked() >= t {
		g.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	g.waiters = append(g.waiters, guardWaiter{t: t, ch: ch})
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// mark returns the ticket the next read will get: the reads that may use
// what a caller is about to let go of have lower tickets.
func (g *readGuard) mark() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.next
}

// passed reports whether every read with a ticket below t has left.
func (g *readGuard) passed(t uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.oldestLocked() >= t
}
