package cachegroup

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
)

// The benchmarks spread their reads over benchBlocks blocks of the
// default size, benchBS: 256 MiB, cached on the disk of their owner.
const (
	benchBlocks = 64
	benchBS     = 4 << 20
)

// benchCluster is two members whose blocks are cached on the disk of
// their owner, and, for each, the blocks the other one owns.
func benchCluster(b *testing.B) (c *cluster, ss []slice, own [2][]chunk.BlockRef) {
	// Memory caches of one byte keep nothing: every read goes to a
	// disk cache, the owner's or the reader's.
	c, ss = newClusterWith(b, 2, testKey, false, benchBlocks/3, 1, benchBS)
	for _, s := range ss {
		for i := 0; i*benchBS < len(s.data); i++ {
			ref := chunk.BlockRef{ID: s.id, Index: i, Len: min(benchBS, len(s.data)-i*benchBS)}
			if ref.Len != benchBS {
				continue
			}
			owner := 0
			if c.members[0].group.Remote(ref.Key()) {
				owner = 1
			}
			if _, err := c.members[owner].store.Warm(context.Background(), ref); err != nil {
				b.Fatal(err)
			}
			own[owner] = append(own[owner], ref)
		}
	}
	for _, m := range c.members {
		m.store.FlushCache()
	}
	return c, ss, own
}

// BenchmarkRead compares reads of blocks cached on this member's disk
// (local) with reads of blocks cached on the disk of a peer on loopback
// (peer): random 4 KiB reads, reporting p50 and p99, and whole blocks
// (4 MiB, as readahead fetches them) in order, reporting MB/s. The memory
// caches keep nothing, so every read goes to a disk cache. (Sequential
// 1 MiB reads are measured through a mount by bench/cachegroup.sh: here,
// with no memory cache, each would fetch its whole block.)
func BenchmarkRead(b *testing.B) {
	for _, size := range []int{4 << 10, benchBS} {
		for _, where := range []string{"local", "peer"} {
			b.Run(where+"/"+sizeName(size), func(b *testing.B) {
				c, _, own := benchCluster(b)
				reader := c.members[0].store
				refs := own[0]
				if where == "peer" {
					refs = own[1]
				}
				rng := rand.New(rand.NewPCG(3, 4))
				p := make([]byte, size)
				lat := make([]time.Duration, 0, b.N)
				b.SetBytes(int64(size))
				b.ResetTimer()
				for i := range b.N {
					var ref chunk.BlockRef
					var off int
					if size == 4<<10 {
						ref = refs[rng.IntN(len(refs))]
						off = rng.IntN(benchBS/size) * size
					} else {
						ref = refs[i%len(refs)]
					}
					start := time.Now()
					if err := reader.ReadSlice(context.Background(), ref.ID, uint32(sliceLen), uint32(ref.Index*benchBS+off), p); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				b.StopTimer()
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
				if where == "peer" {
					if st := c.members[0].group.Stats(); st.Hits == 0 || st.Failures != 0 {
						b.Fatalf("peer reads not served by the peer: %+v", st)
					}
				}
			})
		}
	}
}

// sliceLen is the length of the slices benchCluster writes.
const sliceLen = 3*benchBS + benchBS/3

func sizeName(n int) string {
	if n == benchBS {
		return "block"
	}
	return "4KiB"
}
