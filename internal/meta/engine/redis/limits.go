package redis

import "github.com/sluicefs/sluice/internal/meta/store"

// Limits declares that a View reads no snapshot (see store.Limits).
func (d *DB) Limits() store.Limits { return store.Limits{NoSnapshot: true} }

var _ store.CacheDisabler = (*DB)(nil)

// DisableCache stops the client-side cache and its tracking stream: the
// handle reads from the server from then on (see store.CacheDisabler).
func (d *DB) DisableCache() {
	if d.watch != nil {
		d.watch.Close()
		d.watch, d.cache, d.stream = nil, nil, nil
	}
}
