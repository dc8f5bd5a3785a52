package redis

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// BenchmarkOps measures create, lookup and unlink of files in one
// directory through meta.Client, one operation at a time, on each server.
func BenchmarkOps(b *testing.B) {
	for _, s := range servers {
		b.Run(s.name, func(b *testing.B) {
			ctx := context.Background()
			st := kvstore.New(openDB(b, freshURL(b, s.env)))
			defer st.Close()
			if _, err := meta.FormatVolume(ctx, st, &meta.Format{Name: "bench", UUID: "u", Storage: "mem", Bucket: "x", BlockSize: 4096}); err != nil {
				b.Fatal(err)
			}
			c, err := meta.NewClient(ctx, st, meta.Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(ctx)
			dir, err := c.Mknod(ctx, meta.RootIno, []byte("bench"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
			if err != nil {
				b.Fatal(err)
			}
			name := func(i int) []byte { return fmt.Appendf(nil, "file-%08d", i) }
			created := 0 // files 0..created-1 exist
			create := func(b *testing.B, i int) {
				if _, err := c.Mknod(ctx, dir.Ino, name(i), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("create", func(b *testing.B) {
				for b.Loop() {
					create(b, created)
					created++
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			})
			b.Run("lookup", func(b *testing.B) {
				if created == 0 {
					create(b, 0)
					created++
				}
				i := 0
				for b.Loop() {
					if _, err := c.Lookup(ctx, dir.Ino, name(i%created)); err != nil {
						b.Fatal(err)
					}
					i++
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			})
			b.Run("unlink", func(b *testing.B) {
				for created < b.N {
					create(b, created)
					created++
				}
				b.ResetTimer()
				for i := range b.N {
					if err := c.Unlink(ctx, dir.Ino, name(created-1-i)); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				created -= b.N
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			})
		})
	}
}
