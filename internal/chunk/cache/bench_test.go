package cache

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkDisk measures the disk cache with 4 MiB blocks: whole-block
// reads (checksums of the whole block), 4 KiB range reads at random
// offsets (only the pages read are checked), and durable staging (two
// fsyncs per block).
func BenchmarkDisk(b *testing.B) {
	const bs, n = 4 << 20, 16
	d := openDisk(b, []string{b.TempDir()}, DiskConfig{})
	key := func(i int) string { return fmt.Sprintf("chunks/0/0/%d_0_%d", i, bs) }
	for i := range n {
		d.Put(key(i), randomBytes(uint64(i), bs))
		d.Flush()
	}
	if d.Used() < n*bs {
		b.Fatalf("%d bytes cached, want %d", d.Used(), n*bs)
	}
	r := rand.New(rand.NewPCG(3, 4))
	b.Run("Get4MiB", func(b *testing.B) {
		b.SetBytes(bs)
		for b.Loop() {
			if _, ok := d.Get(key(r.IntN(n))); !ok {
				b.Fatal("miss")
			}
		}
	})
	b.Run("ReadAt4KiB", func(b *testing.B) {
		p := make([]byte, 4096)
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			if !d.ReadAt(key(r.IntN(n)), p, int64(r.IntN(bs-len(p)))) {
				b.Fatal("miss")
			}
		}
	})
	b.Run("Stage4MiB", func(b *testing.B) {
		data := randomBytes(9, bs)
		b.SetBytes(bs)
		i := 1000
		for b.Loop() {
			i++
			if err := d.Stage(key(i), data); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			d.Unstage(key(i))
			b.StartTimer()
		}
	})
}
