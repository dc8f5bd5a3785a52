package storetest

import (
	"testing"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// perRecordStore hides the optional interfaces of a Store but its
// Limiter, so that store.WriteBulk takes its per-record fallback.
type perRecordStore struct{ store.Store }

func (s perRecordStore) Limits() store.Limits { return store.LimitsOf(s.Store) }

// BenchBatch measures what dump and load cost an engine, through its
// optional interfaces and through their per-record fallbacks:
//
//	Read/{batch,fallback}   the chunks, symlinks and xattrs of 2000 inodes
//	                        (store.ReadChunks, ReadSymlinks, ReadXattrs in
//	                        one View)
//	Write/{bulk,fallback}   store.WriteBulk of 10,000 new records
//
// newStore returns an empty store, closed by the caller's cleanup.
func BenchBatch(b *testing.B, newStore func(tb testing.TB) store.Store) {
	b.Run("Read", func(b *testing.B) {
		st := newStore(b)
		const first, n = 100, 2000
		v := bulkVolume(first, n)
		if err := store.WriteBulk(ctx, st, v); err != nil {
			b.Fatal(err)
		}
		m := newModel()
		m.apply(v)
		keys, inos := m.chunkKeys(), m.inos()
		for _, mode := range []string{"batch", "fallback"} {
			b.Run(mode, func(b *testing.B) {
				for b.Loop() {
					err := st.View(ctx, func(tx store.Tx) error {
						if mode == "fallback" {
							tx = perRecord{tx}
						}
						if _, err := store.ReadChunks(tx, keys); err != nil {
							return err
						}
						if _, err := store.ReadSymlinks(tx, inos); err != nil {
							return err
						}
						_, err := store.ReadXattrs(tx, inos)
						return err
					})
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "inodes/s")
			})
		}
	})
	b.Run("Write", func(b *testing.B) {
		for _, mode := range []string{"bulk", "fallback"} {
			b.Run(mode, func(b *testing.B) {
				var st store.Store = newStore(b)
				if mode == "fallback" {
					st = perRecordStore{st}
				}
				records := 0
				next := store.Ino(100)
				for b.Loop() {
					b.StopTimer()
					v := bulkVolume(next, 2000)
					next += 1 << 20
					bulk10k(v)
					b.StartTimer()
					if err := store.WriteBulk(ctx, st, v); err != nil {
						b.Fatal(err)
					}
					records += v.Len()
				}
				b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
			})
		}
	})
}

// bulk10k trims v, a bulkVolume of 2000 inodes, to 10,000 records by
// dropping xattrs.
func bulk10k(v *store.Bulk) {
	if extra := v.Len() - 10000; extra > 0 && extra <= len(v.Xattrs) {
		v.Xattrs = v.Xattrs[:len(v.Xattrs)-extra]
	}
}
