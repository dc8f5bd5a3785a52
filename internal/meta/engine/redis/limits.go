package redis

import "github.com/sluicefs/sluice/internal/meta/store"

// Limits declares that a View reads no snapshot (see store.Limits).
func (d *DB) Limits() store.Limits { return store.Limits{NoSnapshot: true} }
