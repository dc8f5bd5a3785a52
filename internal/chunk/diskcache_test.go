package chunk

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
)

// countStore counts the Gets of each key.
type countStore struct {
	faultStore
	mu   sync.Mutex
	gets map[string]int
}

func (c *countStore) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	c.mu.Lock()
	c.gets[key]++
	c.mu.Unlock()
	return c.faultStore.Get(ctx, key, off, limit)
}

func (c *countStore) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gets[key]
}

// TestDiskCacheCorruptBlock damages a block in the disk cache: the read
// drops it, fetches the block from the object store, returns the right
// bytes and caches a good copy again.
func TestDiskCacheCorruptBlock(t *testing.T) {
	for _, damage := range []string{"flip", "truncate"} {
		t.Run(damage, func(t *testing.T) {
			obj := &countStore{faultStore: faultStore{Store: newFileStore(t)}, gets: map[string]int{}}
			e := newEnv(t, obj, Config{})
			dir := t.TempDir()
			e.s = openStore(t, obj, dir, Config{CacheLargeWrite: true})
			ino := e.newFile(t, "f")
			w := e.s.NewWriter(ino, e.c)
			var m fileModel
			e.write(t, w, &m, pattern(8, 3*testBlockSize), 0)
			e.flush(t, w)
			e.s.disk.Flush() // written blocks are in the disk cache
			keys := e.blockKeys(t, ino)
			e.check(t, nil, ino, &m)
			for _, key := range keys {
				if n := obj.count(key); n != 0 {
					t.Fatalf("block %s fetched %d times: the disk cache did not serve it", key, n)
				}
			}

			victim := keys[1]
			path := filepath.Join(dir, testVolumeUUID, "raw", filepath.FromSlash(victim))
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if damage == "flip" {
				b[testBlockSize/2] ^= 1
			} else {
				b = b[:len(b)-9]
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			e.check(t, nil, ino, &m)
			if n := obj.count(victim); n != 1 {
				t.Errorf("damaged block %s fetched %d times, want once", victim, n)
			}
			e.s.disk.Flush()
			e.check(t, nil, ino, &m) // the refetched copy is cached again
			if n := obj.count(victim); n != 1 {
				t.Errorf("after the refetch, block %s fetched %d times, want once", victim, n)
			}
		})
	}
}

// TestDiskCacheRestart reads a file through a new store on the same cache
// directory while the object store fails every read.
func TestDiskCacheRestart(t *testing.T) {
	f := &faultStore{Store: newFileStore(t)}
	e := newEnv(t, f, Config{})
	dir := t.TempDir()
	s1, err := Open(f, Config{BlockSize: testBlockSize, CacheDirs: []string{dir}, VolumeUUID: testVolumeUUID,
		CacheLargeWrite: true})
	if err != nil {
		t.Fatal(err)
	}
	e.s = s1
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	var m fileModel
	e.write(t, w, &m, pattern(9, 4*testBlockSize+3), 0)
	e.flush(t, w)
	if err := s1.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	f.failGet = func(string) bool { return true }
	e.s = openStore(t, f, dir, Config{})
	e.check(t, nil, ino, &m) // possibly while the restart scan runs
	e.s.disk.WaitScanned()
	e.check(t, nil, ino, &m)
}

// BenchmarkDiskCacheRead reads 4 KiB at random offsets of 4 MiB blocks
// cached on disk, with no memory cache in front: whole-block reads through
// the Store (as block() does) and ranged reads (Disk.ReadAt).
func BenchmarkDiskCacheRead(b *testing.B) {
	const bs, nblocks = 4 << 20, 16
	s, err := Open(newMemStore(), Config{BlockSize: bs, CacheDirs: []string{b.TempDir()},
		VolumeUUID: testVolumeUUID, MemoryCacheSize: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx := context.Background()
	const size = nblocks * bs
	for i := range nblocks {
		if err := s.putBlock(ctx, 1, i, pattern(uint64(i), bs)); err != nil {
			b.Fatal(err)
		}
	}
	s.disk.Flush()
	if s.disk.Used() < size {
		b.Fatalf("%d bytes cached, want the %d of the blocks", s.disk.Used(), size)
	}
	p := make([]byte, 4096)
	r := rand.New(rand.NewPCG(1, 2))
	b.Run("block", func(b *testing.B) {
		b.SetBytes(4096)
		for b.Loop() {
			off := r.Uint32N(size - 4096)
			if err := s.ReadSlice(ctx, 1, size, off, p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("range", func(b *testing.B) {
		b.SetBytes(4096)
		for b.Loop() {
			index, off := r.IntN(nblocks), r.IntN(bs-4096)
			if !s.disk.ReadAt(s.key(1, size, index), p, int64(off)) {
				b.Fatal("ReadAt missed")
			}
		}
	})
}

// TestCacheWrittenBlocks checks which written blocks go into the caches:
// by default only those shorter than a block, with CacheLargeWrite all,
// with CachePartialOnly none. The pooled buffer of a block the caches
// keep must not be reused for another (its bytes would change under the
// cache), so the file is written twice and the first copy read back.
func TestCacheWrittenBlocks(t *testing.T) {
	for _, tc := range []struct {
		name        string
		conf        Config
		full, short bool // whether the full blocks and the short last one are cached
	}{
		{"default", Config{}, false, true},
		{"CacheLargeWrite", Config{CacheLargeWrite: true}, true, true},
		{"CachePartialOnly", Config{CachePartialOnly: true, CacheLargeWrite: true}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := newFileStore(t)
			e := newEnv(t, obj, Config{})
			tc.conf.MemoryCacheSize = 64 << 20
			e.s = openStore(t, obj, t.TempDir(), tc.conf)
			var inos [2]meta.Ino
			var models [2]fileModel
			for i := range inos {
				inos[i] = e.newFile(t, fmt.Sprintf("f%d", i))
				w := e.s.NewWriter(inos[i], e.c)
				e.write(t, w, &models[i], pattern(uint64(10+i), 2*testBlockSize+testBlockSize/2), 0)
				e.flush(t, w)
			}
			e.s.disk.Flush()
			keys := e.blockKeys(t, inos[0])
			if len(keys) != 3 {
				t.Fatalf("%d blocks, want 3", len(keys))
			}
			for i, key := range keys {
				want := tc.full
				if i == 2 {
					want = tc.short
				}
				_, inMem := e.s.mem.Get(key)
				_, onDisk := e.s.disk.Get(key)
				if inMem != want || onDisk != want {
					t.Errorf("block %d: in memory %v, on disk %v; want %v", i, inMem, onDisk, want)
				}
			}
			e.check(t, nil, inos[0], &models[0])
			e.check(t, nil, inos[1], &models[1])
		})
	}
}

// TestFetchToMemory checks where a block fetched from the object store is
// cached: in memory and on disk by default, in memory alone with
// FetchToMemory; Warm writes it to the disk cache either way.
func TestFetchToMemory(t *testing.T) {
	for _, tc := range []struct {
		name   string
		conf   Config
		onDisk bool
	}{
		{"default", Config{CachePartialOnly: true}, true},
		{"FetchToMemory", Config{CachePartialOnly: true, FetchToMemory: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := newFileStore(t)
			e := newEnv(t, obj, Config{})
			tc.conf.MemoryCacheSize = 64 << 20
			e.s = openStore(t, obj, t.TempDir(), tc.conf)
			ino := e.newFile(t, "f")
			w := e.s.NewWriter(ino, e.c)
			var m fileModel
			e.write(t, w, &m, pattern(12, 2*testBlockSize), 0)
			e.flush(t, w)
			keys := e.blockKeys(t, ino)
			for _, key := range keys {
				if _, ok := e.s.cache.Get(key); ok {
					t.Fatalf("block %s cached on writing, with CachePartialOnly", key)
				}
			}
			e.check(t, nil, ino, &m) // fetches both blocks
			e.s.disk.Flush()
			for _, key := range keys {
				_, inMem := e.s.mem.Get(key)
				_, onDisk := e.s.disk.Get(key)
				if !inMem || onDisk != tc.onDisk {
					t.Errorf("fetched block %s: in memory %v, on disk %v; want true, %v", key, inMem, onDisk, tc.onDisk)
				}
			}
			refs := e.s.SliceBlocks(e.slices(t, ino, 0)[0].Id, 2*testBlockSize, 0, 2*testBlockSize)
			if _, err := e.s.Warm(e.ctx, refs[0]); err != nil {
				t.Fatal(err)
			}
			if _, onDisk := e.s.disk.Get(keys[0]); !onDisk {
				t.Error("Warm did not write the block to the disk cache")
			}
		})
	}
}
