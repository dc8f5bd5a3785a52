package meta

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// DefaultOpTimeout is Config.OpTimeout when it is zero.
const DefaultOpTimeout = 30 * time.Second

// Bound returns st with each transaction, its retries included, bounded
// by d, as a Client bounds its own by Config.OpTimeout; d <= 0 returns st
// without a bound. A bound st already has is replaced, not nested.
// Commands that work on a volume without a client (fsck, gc, status)
// use it so that an engine that stops answering fails them instead of
// hanging them.
func Bound(st store.Store, d time.Duration) store.Store {
	if b, ok := st.(bounded); ok {
		st = b.Store
	}
	if d <= 0 {
		return st
	}
	return bounded{st, d}
}

// bounded is a store whose transactions each end within d, retries
// included: an engine that stops answering (a server stopped, a network
// partitioned with no reset) fails the operation, which reaches the
// application as EIO, instead of hanging it. Engines bound their own
// waits differently or not at all (a SQL query waits for its server as
// long as the connection lives), so the bound is kept here, once.
type bounded struct {
	store.Store
	d time.Duration
}

func (b bounded) Update(ctx context.Context, fn func(store.Tx) error) error {
	return b.run(ctx, fn, b.Store.Update)
}

func (b bounded) View(ctx context.Context, fn func(store.Tx) error) error {
	return b.run(ctx, fn, b.Store.View)
}

func (b bounded) run(ctx context.Context, fn func(store.Tx) error, tx func(context.Context, func(store.Tx) error) error) error {
	bctx, release := withDeadline(ctx, time.Now().Add(b.d))
	defer release()
	err := tx(bctx, fn)
	if err == nil || ctx.Err() != nil || bctx.Err() == nil {
		return err
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		// Keep the driver's words, and make the cause the deadline (a
		// driver may report it as a cancellation, which means EINTR).
		err = fmt.Errorf("%v: %w", err, context.DeadlineExceeded)
	}
	return fmt.Errorf("metadata engine %s did not answer within %v: %w", b.Name(), b.d, err)
}

var _ store.Limiter = bounded{}

// Limits forwards the engine's bounds (see store.LimitsOf).
func (b bounded) Limits() store.Limits { return store.LimitsOf(b.Store) }

// Unwrap returns the engine under the bound, so that optional
// interfaces the bound cannot forward truthfully (store.BulkWriter, whose
// atomicity depends on the engine) are found on the engine itself.
func (b bounded) Unwrap() store.Store { return b.Store }
