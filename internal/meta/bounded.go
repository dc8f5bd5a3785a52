package meta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	return bounded{Store: st, d: d}
}

// bound is Bound with outages watched (see outage), as a Client's store
// is, and log told of them. A command working on a volume without a
// client makes its transactions one after the other: each waits its own
// bound.
func bound(st store.Store, d time.Duration, log *slog.Logger) store.Store {
	st = Bound(st, d)
	b, ok := st.(bounded)
	if !ok {
		return st
	}
	raw := b.Store
	o := &outage{name: st.Name(), bound: d, log: log, probe: func(ctx context.Context) error {
		return raw.View(ctx, func(tx store.Tx) error {
			_, err := tx.Setting()
			return err
		})
	}}
	b.o = o
	return b
}

// bounded is a store whose transactions each end within d, retries
// included: an engine that stops answering (a server stopped, a network
// partitioned with no reset) fails the operation, which reaches the
// application as EIO, instead of hanging it. Engines bound their own
// waits differently or not at all (a SQL query waits for its server as
// long as the connection lives), so the bound is kept here, once, with
// what follows from it: a transaction that could not reach the engine is
// tried again until the bound, and once an operation has waited the
// whole bound, the outage is known and the next fail at once (see
// outage).
type bounded struct {
	store.Store
	d time.Duration
	o *outage // nil: outages are not watched (Bound)
}

func (b bounded) Update(ctx context.Context, fn func(store.Tx) error) error {
	return b.guard(ctx, func(ctx context.Context) error { return b.Store.Update(ctx, fn) }, func(err error) bool {
		return unreachable(err) || errors.Is(err, store.ErrNotApplied) && transport(err)
	})
}

func (b bounded) View(ctx context.Context, fn func(store.Tx) error) error {
	return b.guard(ctx, func(ctx context.Context) error { return b.Store.View(ctx, fn) }, transport)
}

// guard runs call, one exchange with the engine, within the bound: at
// once with an error while an outage lasts; again, after a short wait,
// while it fails with an error for which again is true and the bound has
// not passed; and it starts an outage when call waited the bound, or
// could not reach the engine, or the engine's driver timed out.
func (b bounded) guard(ctx context.Context, call func(context.Context) error, again func(error) bool) error {
	if err := b.o.check(); err != nil {
		return err
	}
	bctx, release := withDeadline(ctx, time.Now().Add(b.d))
	defer release()
	var err error
	for i := 0; ; i++ {
		err = call(bctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if bctx.Err() != nil || !again(err) {
			break
		}
		end, _ := bctx.Deadline()
		wait := min(retryUnreachable<<min(i, 5), time.Until(end))
		if wait <= 0 {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done(): // the caller gave up: a cancelled request
			t.Stop()
			return err
		}
	}
	expired := bctx.Err() != nil
	if expired || unreachable(err) || timedOut(err) {
		b.o.failed(err)
	}
	if !expired {
		return err
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		// Keep the driver's words, and make the cause the deadline (a
		// driver may report it as a cancellation, which means EINTR).
		err = fmt.Errorf("%v: %w", err, context.DeadlineExceeded) //lint:nowrap the bound is the cause, not the driver's error
	}
	return fmt.Errorf("metadata engine %s did not answer within %v: %w", b.Name(), b.d, err)
}

// retryUnreachable is the first wait before a transaction that could not
// reach the engine runs again; it doubles with each try, up to 32 times.
const retryUnreachable = 25 * time.Millisecond

var _ store.Limiter = bounded{}

// Limits forwards the engine's bounds (see store.LimitsOf).
func (b bounded) Limits() store.Limits { return store.LimitsOf(b.Store) }

// Unwrap returns the engine under the bound, so that optional
// interfaces the bound cannot forward truthfully (store.BulkWriter, whose
// atomicity depends on the engine) are found on the engine itself.
func (b bounded) Unwrap() store.Store { return b.Store }
