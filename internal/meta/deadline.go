package meta

import (
	"context"
	"sync"
	"time"
)

// deadlineCtx is context.WithDeadline made lazy: it makes the
// WithDeadline context, with its timer and its registration with the
// parent, only when someone asks for Done (a driver waiting, or a context
// derived from this one), and answers Err and Value itself until then.
// Every metadata transaction is bounded (see bounded), and on an embedded
// engine nothing ever waits on the bound: the engine checks Err between
// statements and runs them on a context that cannot be cancelled. A timer
// per transaction and the FUSE request's watch of it were 4 % of a
// mount's CPU in a create loop on SQLite, and a third of the allocations
// of a lookup. A network engine's driver asks for Done, and from then on
// every method is the WithDeadline context's.
//
// Err and Done agree whichever is asked first: a deadline already past,
// a parent already ended or a release already run make the WithDeadline
// context ended from the start.
type deadlineCtx struct {
	context.Context // the parent
	deadline        time.Time

	mu       sync.Mutex
	inner    context.Context // WithDeadline(parent, deadline), made by the first Done
	cancel   context.CancelFunc
	released bool
}

// withDeadline returns a context derived from parent that ends at d, and
// the function that releases it, as context.WithDeadline does.
func withDeadline(parent context.Context, d time.Time) (*deadlineCtx, func()) {
	if pd, ok := parent.Deadline(); ok && pd.Before(d) {
		d = pd
	}
	c := &deadlineCtx{Context: parent, deadline: d}
	return c, c.release
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *deadlineCtx) Done() <-chan struct{} { return c.started().Done() }

// Err reports context.DeadlineExceeded once the deadline has passed, the
// parent's error once it has ended, or context.Canceled after release.
func (c *deadlineCtx) Err() error {
	c.mu.Lock()
	inner, released := c.inner, c.released
	c.mu.Unlock()
	switch {
	case inner != nil:
		return inner.Err()
	case released:
		return context.Canceled
	case !time.Now().Before(c.deadline):
		return context.DeadlineExceeded
	}
	return c.Context.Err()
}

// Value is the parent's, or once started the WithDeadline context's, so
// that a derived context finds it (and context.Cause its cause). An ended
// context starts it, for context.Cause to agree with Err.
func (c *deadlineCtx) Value(key any) any {
	c.mu.Lock()
	inner := c.inner
	c.mu.Unlock()
	if inner == nil && c.Err() != nil {
		inner = c.started()
	}
	if inner != nil {
		return inner.Value(key)
	}
	return c.Context.Value(key)
}

// started returns the WithDeadline context, making it on the first call.
func (c *deadlineCtx) started() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner == nil {
		c.inner, c.cancel = context.WithDeadline(c.Context, c.deadline)
		if c.released {
			c.cancel()
		}
	}
	return c.inner
}

// release ends the context, as WithDeadline's cancel function does.
func (c *deadlineCtx) release() {
	c.mu.Lock()
	c.released = true
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}
