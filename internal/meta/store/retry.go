package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// MaxAttempts bounds the runs of a transaction that keeps conflicting.
const MaxAttempts = 50

// Retry runs attempt until it returns an error that is not ErrConflict, at
// most MaxAttempts times, waiting a jittered backoff that grows with each
// attempt. Engines implement Store.Update with it.
func Retry(ctx context.Context, attempt func() error) error {
	var err error
	for i := 0; i < MaxAttempts; i++ {
		err = attempt()
		if !errors.Is(err, ErrConflict) {
			return err
		}
		backoff := time.Duration(rand.Int64N(int64(time.Millisecond)*int64(i+1))) + 50*time.Microsecond
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
	return fmt.Errorf("gave up after %d attempts: %w", MaxAttempts, err)
}

// ErrNotApplied marks the failure of a write transaction that the engine
// did not apply, because it failed before its commit was sent (see
// NotApplied).
var ErrNotApplied = errors.New("transaction not applied")

// NotApplied returns err marked with ErrNotApplied; nil stays nil. An
// engine marks so the failures of a write transaction before its commit
// (a broken connection at BEGIN or at a read), so that the caller may run
// it again after a failure of the connection: only a failure of the
// commit itself leaves unknown whether it was applied.
func NotApplied(err error) error {
	if err == nil || errors.Is(err, ErrNotApplied) {
		return err
	}
	return notApplied{err}
}

type notApplied struct{ err error }

func (e notApplied) Error() string   { return e.err.Error() }
func (e notApplied) Unwrap() []error { return []error{e.err, ErrNotApplied} }
