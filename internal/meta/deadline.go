package meta

import (
	"context"
	"sync"
	"time"
)

// deadlineCtx is context.WithDeadline made lazy: it starts no timer and
// registers nothing with its parent until someone asks for Done (or
// derives a context from it). Every metadata transaction is bounded (see
// bounded), and on an embedded engine nothing ever waits on the bound's
// channel: the engine checks Err between statements and runs them on a
// context that cannot be cancelled. A timer per transaction and the
// parent's watch of it were 4 % of a mount's CPU in a create loop on
// SQLite, and a third of the allocations of a lookup. A network engine's
// driver asks for Done, and then the context behaves as WithDeadline's.
//
// The context package's contract holds: Err is nil until Done is (or
// would be) closed, and once Err has reported the deadline, the parent's
// error or the release, Done is closed or made closed.
type deadlineCtx struct {
	context.Context // the parent
	deadline        time.Time

	mu     sync.Mutex
	err    error         // set once: the deadline passed, the parent ended or release ran
	done   chan struct{} // made by the first Done
	timer  *time.Timer
	stopP  func() bool // stops the parent's watch
	after  map[int]func()
	nextID int
}

// withDeadline returns a context derived from parent that ends at d, and
// the function that releases it, as context.WithDeadline does.
func withDeadline(parent context.Context, d time.Time) (*deadlineCtx, func()) {
	if pd, ok := parent.Deadline(); ok && pd.Before(d) {
		d = pd
	}
	c := &deadlineCtx{Context: parent, deadline: d}
	return c, func() { c.end(context.Canceled) }
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Done makes the channel, closed already when the context has ended, or
// else closed by a timer at the deadline or when the parent ends.
func (c *deadlineCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.doneLocked()
}

func (c *deadlineCtx) doneLocked() chan struct{} {
	if c.done != nil {
		return c.done
	}
	c.done = make(chan struct{})
	if c.err == nil {
		c.err = c.check()
	}
	if c.err != nil {
		close(c.done)
		return c.done
	}
	c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.end(context.DeadlineExceeded) })
	if c.Context.Done() != nil {
		c.stopP = context.AfterFunc(c.Context, func() { c.end(c.Context.Err()) })
	}
	return c.done
}

// Err reports context.DeadlineExceeded once the deadline has passed, the
// parent's error once it has ended, or context.Canceled after release.
func (c *deadlineCtx) Err() error {
	c.mu.Lock()
	if c.err != nil {
		defer c.mu.Unlock()
		return c.err
	}
	err := c.check()
	c.mu.Unlock()
	if err != nil {
		c.end(err)
		return c.Err()
	}
	return nil
}

// check returns why the context has ended, if it has.
func (c *deadlineCtx) check() error {
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return c.Context.Err()
}

// AfterFunc arranges for f to run in its own goroutine once the context
// ends, as context.AfterFunc does; the context package uses it for the
// contexts derived from this one, instead of a goroutine each.
func (c *deadlineCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.doneLocked()
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	if c.after == nil {
		c.after = map[int]func(){}
	}
	id := c.nextID
	c.nextID++
	c.after[id] = f
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.after[id]
		delete(c.after, id)
		return ok
	}
}

// end ends the context with err, unless it has ended, and stops the
// timer and the parent's watch.
func (c *deadlineCtx) end(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	if c.done != nil {
		select {
		case <-c.done:
		default:
			close(c.done)
		}
	}
	t, stop, after := c.timer, c.stopP, c.after
	c.timer, c.stopP, c.after = nil, nil, nil
	c.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	if stop != nil {
		stop()
	}
	for _, f := range after {
		go f()
	}
}
