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
