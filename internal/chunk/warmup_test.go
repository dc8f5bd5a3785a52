package chunk

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/object"
	objmem "github.com/sluicefs/sluice/internal/object/mem"
)

func TestSliceBlocks(t *testing.T) {
	const bs = testBlockSize
	tests := []struct {
		name         string
		id           uint64
		size, off, n uint32
		want         []BlockRef // HashPrefix false
	}{
		{"whole slice", 7, 3*bs + 10, 0, 3*bs + 10,
			[]BlockRef{{7, 0, bs, false}, {7, 1, bs, false}, {7, 2, bs, false}, {7, 3, 10, false}}},
		{"one byte of the second block", 7, 3 * bs, bs, 1, []BlockRef{{7, 1, bs, false}}},
		{"across a boundary", 7, 3 * bs, bs - 1, 2, []BlockRef{{7, 0, bs, false}, {7, 1, bs, false}}},
		{"cut at the end", 7, 2*bs + 5, 2 * bs, 1 << 30, []BlockRef{{7, 2, 5, false}}},
		{"ends on a boundary", 7, 3 * bs, 0, bs, []BlockRef{{7, 0, bs, false}}},
		{"past the end", 7, bs, bs, 1, nil},
		{"empty range", 7, bs, 0, 0, nil},
		{"a hole", 0, bs, 0, bs, nil},
	}
	s := New(objmem.New("x"), Config{BlockSize: bs})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := s.SliceBlocks(tt.id, tt.size, tt.off, tt.n)
			if !slices.Equal(got, tt.want) {
				t.Errorf("SliceBlocks(%d, %d, %d, %d) = %v, want %v", tt.id, tt.size, tt.off, tt.n, got, tt.want)
			}
		})
	}
	hashed := New(objmem.New("x"), Config{BlockSize: bs, HashPrefix: true})
	got := hashed.SliceBlocks(300, 10, 0, 10)
	if len(got) != 1 || got[0].Key() != BlockKey(300, 0, 10, true) {
		t.Errorf("with a hash prefix: %v, want the hashed key %s", got, BlockKey(300, 0, 10, true))
	}
}

// writtenBlocks writes n bytes to a new file of e, uncached (the env
// must have CachePartialOnly), and returns the file and the blocks of its
// slices.
func writtenBlocks(t *testing.T, e *env, n int) (meta.Ino, []BlockRef) {
	t.Helper()
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	e.write(t, w, nil, pattern(3, n), 0)
	e.flush(t, w)
	var out []BlockRef
	for _, s := range e.slices(t, ino, 0) {
		out = append(out, e.s.SliceBlocks(s.Id, s.Size, s.Off, s.Len)...)
	}
	if want := (n + testBlockSize - 1) / testBlockSize; len(out) != want {
		t.Fatalf("the file has %d blocks, want %d", len(out), want)
	}
	return ino, out
}

// wantCached checks what Cached reports for each block.
func wantCached(t *testing.T, s *Store, blocks []BlockRef, want bool) {
	t.Helper()
	for _, b := range blocks {
		if got := s.Cached(b); got != want {
			t.Errorf("Cached(%s) = %v, want %v", b.Key(), got, want)
		}
	}
}

// TestWarmMemory warms the blocks of a file into a memory-only cache:
// each is fetched once, then reads and a second warmup fetch nothing,
// and Evict drops them.
func TestWarmMemory(t *testing.T) {
	obj := &countStore{faultStore: faultStore{Store: newMemStore()}, gets: map[string]int{}}
	e := newEnv(t, obj, Config{CachePartialOnly: true})
	ino, blocks := writtenBlocks(t, e, 3*testBlockSize+100)
	wantCached(t, e.s, blocks, false)
	for round := 0; round < 2; round++ {
		for _, b := range blocks {
			fetched, err := e.s.Warm(e.ctx, b)
			if err != nil {
				t.Fatalf("Warm(%s): %v", b.Key(), err)
			}
			if fetched != (round == 0) {
				t.Errorf("round %d: Warm(%s) fetched = %v", round, b.Key(), fetched)
			}
			if n := obj.count(b.Key()); n != 1 {
				t.Errorf("round %d: block %s fetched %d times, want once", round, b.Key(), n)
			}
		}
		wantCached(t, e.s, blocks, true)
	}
	p := make([]byte, 3*testBlockSize+100)
	if err := e.s.ReadFile(e.ctx, e.c, ino, p, 0); err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if n := obj.count(b.Key()); n != 1 {
			t.Errorf("a read after the warmup fetched block %s again (%d fetches)", b.Key(), n)
		}
	}
	for _, b := range blocks {
		if !e.s.Evict(b) {
			t.Errorf("Evict(%s) found nothing cached", b.Key())
		}
	}
	wantCached(t, e.s, blocks, false)
	if e.s.Evict(blocks[0]) {
		t.Error("a second Evict reports a cached block")
	}
	if got := e.s.CacheTiers(); !slices.Equal(got, []string{"memory"}) {
		t.Errorf("CacheTiers() = %q, want memory only", got)
	}
}

// TestWarmDisk warms more blocks at once than the disk cache's write
// queue holds into a disk cache whose memory tier holds none: every
// block ends up as a file of the cache, and Evict removes the files.
func TestWarmDisk(t *testing.T) {
	obj := &countStore{faultStore: faultStore{Store: newMemStore()}, gets: map[string]int{}}
	e := newEnv(t, obj, Config{CachePartialOnly: true})
	dir := t.TempDir()
	e.s = openStore(t, obj, dir, Config{CachePartialOnly: true})
	_, blocks := writtenBlocks(t, e, 40*testBlockSize)
	wantCached(t, e.s, blocks, false)
	var g errgroup.Group
	for _, b := range blocks {
		g.Go(func() error {
			fetched, err := e.s.Warm(e.ctx, b)
			if err == nil && !fetched {
				t.Errorf("Warm(%s) of an uncached block fetched nothing", b.Key())
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("Warm: %v", err)
	}
	e.s.FlushCache()
	file := func(b BlockRef) string {
		return filepath.Join(dir, testVolumeUUID, "raw", filepath.FromSlash(b.Key()))
	}
	for _, b := range blocks {
		if _, err := os.Stat(file(b)); err != nil {
			t.Errorf("block %s is not in the disk cache: %v", b.Key(), err)
		}
	}
	wantCached(t, e.s, blocks, true)
	for _, b := range blocks {
		if fetched, err := e.s.Warm(e.ctx, b); err != nil || fetched {
			t.Errorf("Warm(%s) of a cached block: fetched %v, %v", b.Key(), fetched, err)
		}
		if n := obj.count(b.Key()); n != 1 {
			t.Errorf("block %s fetched %d times, want once", b.Key(), n)
		}
	}
	for _, b := range blocks {
		if !e.s.Evict(b) {
			t.Errorf("Evict(%s) found nothing cached", b.Key())
		}
		if _, err := os.Stat(file(b)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("block %s still in the disk cache after Evict: %v", b.Key(), err)
		}
	}
	wantCached(t, e.s, blocks, false)
	if got := e.s.CacheTiers(); !slices.Equal(got, []string{"memory", "disk"}) {
		t.Errorf("CacheTiers() = %q, want memory and disk", got)
	}
}

// TestWarmMissingBlock: a block gone from the object store fails Warm
// with object.ErrNotFound and is not cached.
func TestWarmMissingBlock(t *testing.T) {
	for _, disk := range []bool{false, true} {
		e := newEnv(t, nil, Config{})
		if disk {
			e.s = openStore(t, e.obj, t.TempDir(), Config{})
		}
		b := e.s.SliceBlocks(12345, 100, 0, 100)[0]
		_, err := e.s.Warm(e.ctx, b)
		if !errors.Is(err, object.ErrNotFound) {
			t.Errorf("disk %v: Warm of a missing block: %v, want ErrNotFound", disk, err)
		}
		wantCached(t, e.s, []BlockRef{b}, false)
	}
}
