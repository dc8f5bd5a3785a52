package cache

import "testing"

// wantStats fails t unless got equals want.
func wantStats(t *testing.T, what string, got, want Stats) {
	t.Helper()
	if got != want {
		t.Errorf("%s: Stats = %+v, want %+v", what, got, want)
	}
}

// TestMemoryStats counts each eviction of a memory cache exactly;
// replacing a block and Remove are not evictions.
func TestMemoryStats(t *testing.T) {
	m := NewMemory(30)
	wantStats(t, "new cache", m.Stats(), Stats{})
	m.Put("a", make([]byte, 10))
	m.Put("b", make([]byte, 10))
	m.Get("a")                   // hit; b is now the least recently used
	m.Get("x")                   // miss
	m.Put("a", make([]byte, 10)) // replaced, not evicted
	wantStats(t, "two blocks", m.Stats(), Stats{Bytes: 20, Blocks: 2})
	m.Put("c", make([]byte, 10))
	m.Put("d", make([]byte, 15)) // evicts b, then a
	wantStats(t, "after evictions", m.Stats(), Stats{Evictions: 2, Bytes: 25, Blocks: 2})
	for key, hit := range map[string]bool{"a": false, "b": false, "c": true, "d": true} {
		if _, ok := m.Get(key); ok != hit {
			t.Fatalf("Get(%q) hit = %v, want %v", key, ok, hit)
		}
	}
	m.Remove("c")
	m.Put("huge", make([]byte, 31)) // not kept, evicts nothing
	wantStats(t, "after Remove", m.Stats(), Stats{Evictions: 2, Bytes: 15, Blocks: 1})
}

// TestDiskStats counts the evictions of a disk cache exactly: blocks
// evicted by the capacity or the free-space floor when a new block is
// written, not by Remove.
func TestDiskStats(t *testing.T) {
	size := func(i int) int64 { return encodedSize(len(blockData(i))) }
	for _, tc := range []struct {
		name     string
		capacity int64
		// space returns the file system's state (avail, total) to
		// report before block 2 is written; zero is unknown.
		space func() (avail, total uint64)
	}{
		{"capacity", size(0) + size(1) + size(2) - 1, func() (uint64, uint64) { return 0, 0 }},
		// The floor is 10% of 1 MB: writing block 2 must free the size
		// of block 0, the least recently used.
		{"free space", 1 << 30, func() (uint64, uint64) { return 100_000 + uint64(size(2)-size(0)), 1_000_000 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := &fakeSpace{}
			d := openDisk(t, []string{t.TempDir()}, DiskConfig{Capacity: tc.capacity, FreeSpaceRatio: 0.1, Statfs: sp.statfs})
			d.WaitScanned()
			wantStats(t, "new cache", d.Stats(), Stats{})
			for i := range 2 {
				d.Put(blockKey(i), blockData(i))
				d.Flush()
			}
			wantHit(t, d, 1)
			wantHit(t, d, 0) // 1 is now the least recently used
			wantHit(t, d, 1) // and 0 is
			wantMiss(t, d, 7)
			p := make([]byte, 100)
			if !d.ReadAt(blockKey(0), p, 10) {
				t.Fatal("ReadAt of a cached block missed")
			}
			if d.ReadAt(blockKey(8), p, 0) {
				t.Fatal("ReadAt of an uncached block hit")
			}
			d.Get(blockKey(1)) // leaves 0 the least recently used
			want := Stats{Bytes: size(0) + size(1), Blocks: 2}
			wantStats(t, "two blocks", d.Stats(), want)

			sp.set(tc.space())
			d.Put(blockKey(2), blockData(2))
			d.Flush()
			want.Evictions, want.Bytes = 1, size(1)+size(2)
			wantStats(t, "after writing a third block", d.Stats(), want)
			wantMiss(t, d, 0)
			wantHit(t, d, 2)

			sp.set(0, 0)
			d.Remove(blockKey(1))
			want.Bytes, want.Blocks = size(2), 1
			wantStats(t, "after Remove", d.Stats(), want)
		})
	}
}
