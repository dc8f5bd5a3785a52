package chunk

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	objmem "github.com/sluicefs/sluice/internal/object/mem"
)

// TestReadCounts: each read of a block's bytes counts once, as a miss
// when it waited for the object store and as a hit of the tier that
// served it otherwise; readahead does not count.
func TestReadCounts(t *testing.T) {
	ctx := context.Background()
	obj := objmem.New("counts")
	data := bytes.Repeat([]byte("0123456789abcdef"), testBlockSize/16)
	s := openStore(t, obj, filepath.Join(t.TempDir(), "cache"), Config{MemoryCacheSize: 4 * testBlockSize})
	const id = 7
	if err := obj.Put(ctx, s.key(id, uint32(len(data)), 0), bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	read := func(off, n int) {
		t.Helper()
		p := make([]byte, n)
		if err := s.ReadSlice(ctx, id, uint32(len(data)), uint32(off), p); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p, data[off:off+n]) {
			t.Fatalf("read %d bytes at %d: wrong bytes", n, off)
		}
	}
	want := func(what string, mem, disk, miss uint64) {
		t.Helper()
		st := s.CacheStats()
		if st.MemoryHits != mem || st.DiskHits != disk || st.Misses != miss {
			t.Errorf("%s: memory hits %d, disk hits %d, misses %d; want %d, %d, %d",
				what, st.MemoryHits, st.DiskHits, st.Misses, mem, disk, miss)
		}
	}
	read(0, len(data)) // fetched whole, cached in memory and on disk
	want("first read", 0, 0, 1)
	read(100, 50)
	read(0, len(data))
	want("two reads from memory", 2, 0, 1)
	s.mem.Remove(s.key(id, uint32(len(data)), 0))
	s.disk.Flush()
	read(100, 50) // a part, from the disk cache
	want("a part from disk", 2, 1, 1)
	read(0, len(data)) // whole, from disk, then in memory again
	read(10, 10)
	want("whole from disk, then memory", 3, 2, 1)
	s.prefetch.fetch(id, uint32(len(data)), 0) // cached already: nothing counts
	want("readahead", 3, 2, 1)
}
