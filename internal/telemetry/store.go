package telemetry

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// WrapStore returns st reporting each transaction to m: its duration,
// retries included, by kind ("read" for View, "write" for Update), and
// how often the engine ran it again.
func (m *Mount) WrapStore(st store.Store) store.Store {
	return &observedStore{Store: st,
		read:         m.txs.WithLabelValues("read"),
		write:        m.txs.WithLabelValues("write"),
		readRestart:  m.txRestarts.WithLabelValues("read"),
		writeRestart: m.txRestarts.WithLabelValues("write"),
	}
}

// observedStore times the transactions of the Store it wraps.
type observedStore struct {
	store.Store
	read, write               prometheus.Observer
	readRestart, writeRestart prometheus.Counter
}

var (
	_ store.Limiter   = (*observedStore)(nil)
	_ store.Unwrapper = (*observedStore)(nil)
)

func (s *observedStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.run(ctx, fn, s.Store.Update, s.write, s.writeRestart)
}

func (s *observedStore) View(ctx context.Context, fn func(store.Tx) error) error {
	return s.run(ctx, fn, s.Store.View, s.read, s.readRestart)
}

func (s *observedStore) run(ctx context.Context, fn func(store.Tx) error,
	tx func(context.Context, func(store.Tx) error) error, o prometheus.Observer, restarts prometheus.Counter) error {
	start := time.Now()
	runs := 0
	err := tx(ctx, func(t store.Tx) error {
		runs++
		return fn(t)
	})
	o.Observe(time.Since(start).Seconds())
	if runs > 1 {
		restarts.Add(float64(runs - 1))
	}
	return err
}

// Limits forwards the engine's bounds (see store.LimitsOf).
func (s *observedStore) Limits() store.Limits { return store.LimitsOf(s.Store) }

// Unwrap returns the engine, so that optional interfaces are found on it.
func (s *observedStore) Unwrap() store.Store { return s.Store }
