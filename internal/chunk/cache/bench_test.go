package cache

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// BenchmarkDisk measures the disk cache with 4 MiB blocks: whole-block
// reads (checksums of the whole block), 4 KiB range reads at random
// offsets (only the pages read are checked), with and without open files
// kept, and durable staging (two fsyncs per block).
func BenchmarkDisk(b *testing.B) {
	const bs, n = 4 << 20, 16
	d := openDisk(b, []string{b.TempDir()}, DiskConfig{})
	key := func(i int) string { return benchKey(i, bs) }
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
	// 4 KiB reads at random offsets, straddling pages, and at offsets a
	// multiple of 4 KiB, as a FUSE read of a file whose blocks start at
	// multiples of 4 KiB.
	b.Run("ReadAt4KiB", func(b *testing.B) { benchReadAt(b, d, n, bs, false) })
	b.Run("ReadAt4KiBAligned", func(b *testing.B) { benchReadAt(b, d, n, bs, true) })
	b.Run("ReadAt4KiBAlignedParallel", func(b *testing.B) {
		b.SetBytes(4096)
		b.ReportAllocs()
		var seed atomic.Uint64
		keys := make([]string, n)
		for i := range keys {
			keys[i] = key(i)
		}
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			p := make([]byte, 4096)
			r := rand.New(rand.NewPCG(seed.Add(1), 4))
			for pb.Next() {
				if !d.ReadAt(keys[r.IntN(n)], p, int64(r.IntN(bs/len(p))*len(p))) {
					b.Error("miss")
					return
				}
			}
		})
	})
	// Without open files kept: each read opens the file and reads its
	// trailer. (b.Loop in benchReadAt does not time this set-up.)
	b.Run("ReadAt4KiBAlignedNoOpenFiles", func(b *testing.B) {
		d := openDisk(b, []string{b.TempDir()}, DiskConfig{OpenFiles: -1})
		for i := range n {
			d.Put(key(i), randomBytes(uint64(i), bs))
			d.Flush()
		}
		benchReadAt(b, d, n, bs, true)
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

// benchReadAt reads 4 KiB at random offsets of blocks 0 to n-1, bs bytes
// each, cached in d; with aligned set, at multiples of 4 KiB.
func benchReadAt(b *testing.B, d *Disk, n, bs int, aligned bool) {
	r := rand.New(rand.NewPCG(5, 6))
	keys := make([]string, n)
	for i := range keys {
		keys[i] = benchKey(i, bs)
	}
	p := make([]byte, 4096)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		off := r.IntN(bs - len(p))
		if aligned {
			off = r.IntN(bs/len(p)) * len(p)
		}
		if !d.ReadAt(keys[r.IntN(n)], p, int64(off)) {
			b.Fatal("miss")
		}
	}
}

func benchKey(i, bs int) string { return fmt.Sprintf("chunks/0/0/%d_0_%d", i, bs) }
