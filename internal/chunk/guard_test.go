package chunk

import (
	"context"
	"errors"
	"testing"
)

// A wait returns once the reads that entered before it have left, and
// does not wait for reads that entered after it.
func TestReadGuard(t *testing.T) {
	g := newReadGuard()
	if err := g.wait(context.Background()); err != nil {
		t.Fatalf("wait with no reads: %v", err)
	}
	a, b := g.enter(), g.enter()
	done := make(chan error, 1)
	go func() { done <- g.wait(context.Background()) }()
	for { // until the waiter is registered
		g.mu.Lock()
		n := len(g.waiters)
		g.mu.Unlock()
		if n == 1 {
			break
		}
	}
	later := g.enter()
	g.leave(b)
	select {
	case err := <-done:
		t.Fatalf("wait returned (%v) while an earlier read is under way", err)
	default:
	}
	g.leave(a)
	if err := <-done; err != nil {
		t.Fatalf("wait: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait behind a read with a cancelled context: %v", err)
	}
	g.leave(later)
	if err := g.wait(context.Background()); err != nil {
		t.Fatalf("wait after every read left: %v", err)
	}
}
