package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"
)

// RetryFor bounds the retries of a transaction that keeps conflicting
// when its context has no deadline. A context's deadline is the bound
// otherwise: a meta.Client gives each transaction one, Config.OpTimeout.
const RetryFor = 30 * time.Second

// Backoff bounds: the first wait after a conflict is about minBackoff,
// and each doubles, up to maxBackoff.
const (
	minBackoff = 100 * time.Microsecond
	maxBackoff = 20 * time.Millisecond
)

// Retry runs attempt until it returns an error that is not ErrConflict,
// waiting between attempts a backoff that doubles each time, from about
// 100µs up to 20ms, jittered so that rivals spread out.
//
// What bounds the retries is time, not a count: a conflict is not a
// failure of the engine but a race lost, which a later attempt wins, and
// a write that a local file system accepts must not fail because others
// wrote the same file meanwhile (issue 51: 50 quick attempts, about
// 0.6 s, were all lost while a database's writers kept committing to one
// file). So Retry goes on until the context ends, or until the next wait
// would pass its deadline, or, for a context without one, for RetryFor,
// and then returns the last conflict. The cap on the backoff keeps a
// loser trying often enough to win against rivals that do not wait.
func Retry(ctx context.Context, attempt func() error) error {
	start := time.Now()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = start.Add(RetryFor)
	}
	for i := 0; ; i++ {
		err := attempt()
		if !errors.Is(err, ErrConflict) {
			return err
		}
		wait := backoff(i)
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("still conflicting after %d attempts in %v: %w", i+1, time.Since(start).Round(time.Millisecond), err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("retry after %d conflicts: %w", i+1, ctx.Err())
		case <-t.C:
		}
	}
}

// backoff returns the wait after the conflict of attempt i (from 0): a
// random duration in [d/2, d), where d doubles from minBackoff with each
// attempt up to maxBackoff.
func backoff(i int) time.Duration {
	d := maxBackoff
	if i < 16 && minBackoff<<i < maxBackoff {
		d = minBackoff << i
	}
	return d/2 + rand.N(d/2)
}

// ErrNotApplied marks the failure of a write transaction that the engine
// did not apply, because it failed before its commit was sent (see
// NotApplied).
var ErrNotApplied = errors.New("transaction not applied")

// ErrDisconnected marks a failure of the connection to the engine that
// its driver reports in its own terms (a gRPC status Unavailable), not an
// answer of the engine: a read that failed so may run again, and a write
// transaction only if it is also marked ErrNotApplied.
var ErrDisconnected = errors.New("connection to the engine failed")

// NotApplied returns err marked with ErrNotApplied; nil stays nil. An
// engine marks so the failures of a write transaction before its commit
// (a broken connection at BEGIN or at a read), so that the caller may run
// it again after a failure of the connection: only a failure of the
// commit itself leaves unknown whether it was applied.
//
// An errno is the core's answer (EAGAIN for a lock held elsewhere, ENOENT),
// which callers compare directly, not a failure of the connection: it is
// returned as it is.
func NotApplied(err error) error {
	var errno syscall.Errno
	if err == nil || errors.Is(err, ErrNotApplied) || errors.As(err, &errno) || errors.Is(err, ErrConflict) {
		return err
	}
	return notApplied{err}
}

type notApplied struct{ err error }

func (e notApplied) Error() string   { return e.err.Error() }
func (e notApplied) Unwrap() []error { return []error{e.err, ErrNotApplied} }
