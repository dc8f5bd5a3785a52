package redis

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/meta/store/storetest"
	"github.com/sluicefs/sluice/internal/testserver"
)

// BenchmarkMeta runs the meta API benchmarks every engine runs, on each
// server.
func BenchmarkMeta(b *testing.B) {
	for _, s := range servers {
		b.Run(s.name, func(b *testing.B) {
			metatest.Bench(b, func(tb testing.TB) store.Store {
				return kvstore.New(openDB(tb, freshURL(tb, s.env)))
			})
		})
	}
}

// BenchmarkBatch compares batched reads and bulk writes with their
// per-record fallbacks, on each server, with and without the client-side
// cache (a dump reads every key once, so it finds none cached).
func BenchmarkBatch(b *testing.B) {
	for _, s := range servers {
		for _, cached := range []bool{false, true} {
			name := s.name + "/nocache"
			if cached {
				name = s.name + "/cache"
			}
			b.Run(name, func(b *testing.B) {
				testserver.URL(b, s.env)
				storetest.BenchBatch(b, func(tb testing.TB) store.Store {
					var st store.Store
					if cached {
						st = kvstore.New(openDB(tb, freshURL(tb, s.env)))
					} else {
						st = kvstore.New(openDBNoCache(tb, freshURL(tb, s.env)))
					}
					tb.Cleanup(func() { st.Close() })
					return st
				})
			})
		}
	}
}

// BenchmarkOps measures create, lookup and unlink of files in one
// directory through meta.Client, one operation at a time, on each server,
// and reports the round trips per operation.
func BenchmarkOps(b *testing.B) {
	for _, s := range servers {
		b.Run(s.name, func(b *testing.B) {
			c, d, dir := newBenchClient(b, s.env)
			trips, ctx := countTrips(b, context.Background(), d)
			report := func(b *testing.B, before int64) {
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
				b.ReportMetric(float64(trips.n.Load()-before)/float64(b.N), "trips/op")
			}
			name := func(i int) []byte { return fmt.Appendf(nil, "file-%08d", i) }
			created := 0 // files 0..created-1 exist
			create := func(b *testing.B, i int) {
				if _, err := c.Mknod(ctx, dir, name(i), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("create", func(b *testing.B) {
				before := trips.n.Load()
				for b.Loop() {
					create(b, created)
					created++
				}
				report(b, before)
			})
			b.Run("lookup", func(b *testing.B) {
				if created == 0 {
					create(b, 0)
					created++
				}
				i := 0
				before := trips.n.Load()
				for b.Loop() {
					if _, err := c.Lookup(ctx, dir, name(i%created)); err != nil {
						b.Fatal(err)
					}
					i++
				}
				report(b, before)
			})
			b.Run("unlink", func(b *testing.B) {
				for created < b.N {
					create(b, created)
					created++
				}
				b.ResetTimer()
				before := trips.n.Load()
				for i := range b.N {
					if err := c.Unlink(ctx, dir, name(created-1-i)); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				created -= b.N
				report(b, before)
			})
		})
	}
}
