// Package chunk stores file data: it maps a file's byte ranges to chunks of
// meta.ChunkSize bytes, chunks to slices (one contiguous write each, with a
// volume-wide id), and slices to immutable blocks of the volume's block
// size, kept as objects under the keys of the object-layout spec.
//
// A FileWriter buffers the writes of one open file per chunk and uploads
// them as slices: all blocks of a slice are stored before the slice is
// committed to metadata, so metadata never names missing data. Reads
// replay a chunk's slice list (later slices cover earlier ones, uncovered
// ranges are zeros) and fetch blocks through an in-memory block cache.
package chunk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"

	"github.com/sluicefs/sluice/internal/chunk/cache"
	"github.com/sluicefs/sluice/internal/object"
)

// Config tunes a Store.
type Config struct {
	// BlockSize is the volume's block size in bytes.
	BlockSize int
	// HashPrefix spreads block keys over 256 prefixes.
	HashPrefix bool
	// MaxUploads bounds concurrent block uploads.
	MaxUploads int
	// BufferSize bounds the bytes buffered by all writers of a mount;
	// writers flush and wait when it is exceeded.
	BufferSize int64
	// CacheSize bounds the in-memory block cache, in bytes.
	CacheSize int64
	// MaxReadahead bounds the readahead window of one sequential stream,
	// in bytes; 0 disables readahead.
	MaxReadahead int64
	// Prefetch is the number of blocks fetched concurrently in the
	// background (readahead); 0 disables whole-block prefetch of random
	// reads. Negative means the default.
	Prefetch int
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.BlockSize == 0 {
		c.BlockSize = 4 << 20
	}
	if c.MaxUploads <= 0 {
		c.MaxUploads = 20
	}
	if c.BufferSize <= 0 {
		c.BufferSize = 300 << 20
	}
	if c.CacheSize <= 0 {
		c.CacheSize = 256 << 20
	}
	if c.MaxReadahead < 0 {
		c.MaxReadahead = 0
	}
	if c.Prefetch < 0 {
		c.Prefetch = 4
	}
}

// Store reads and writes slices as blocks in an object store.
type Store struct {
	obj      object.Store
	conf     Config
	cache    *cache.Memory
	fetches  singleflight.Group
	uploads  chan struct{} // semaphore of MaxUploads
	buffers  *budget
	prefetch *prefetcher
}

// New returns a Store over obj, which already applies the volume's prefix
// and compression.
func New(obj object.Store, conf Config) *Store {
	conf.Defaults()
	s := &Store{
		obj:     obj,
		conf:    conf,
		cache:   cache.NewMemory(conf.CacheSize),
		uploads: make(chan struct{}, conf.MaxUploads),
		buffers: newBudget(conf.BufferSize),
	}
	s.prefetch = newPrefetcher(s, min(conf.BufferSize, conf.CacheSize/2), readaheadConcurrency)
	return s
}

// BlockSize returns the block size in bytes.
func (s *Store) BlockSize() int { return s.conf.BlockSize }

// BlockKey returns the object key of block index of slice id, whose
// length is blockLen, as the object-layout spec defines it.
func BlockKey(id uint64, index, blockLen int, hashPrefix bool) string {
	if hashPrefix {
		return fmt.Sprintf("chunks/%02X/%d/%d/%d_%d_%d", id%256, id/1000_000, id/1000, id, index, blockLen)
	}
	return fmt.Sprintf("chunks/%d/%d/%d_%d_%d", id/1000_000, id/1000, id, index, blockLen)
}

// blockLen returns the length of block index of a slice of size bytes.
func (s *Store) blockLen(size uint32, index int) int {
	bs := s.conf.BlockSize
	return min(bs, int(size)-index*bs)
}

func (s *Store) key(id uint64, size uint32, index int) string {
	return BlockKey(id, index, s.blockLen(size, index), s.conf.HashPrefix)
}

// putBlock uploads block index of slice id, holding an upload slot. Every
// block but a slice's last is full, so the key follows from len(data).
func (s *Store) putBlock(ctx context.Context, id uint64, index int, data []byte) error {
	select {
	case s.uploads <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.uploads }()
	key := BlockKey(id, index, len(data), s.conf.HashPrefix)
	if err := s.obj.Put(ctx, key, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("upload block %s: %w", key, err)
	}
	return nil
}

// block returns the whole of block index of slice id, from the cache or
// the object store.
func (s *Store) block(ctx context.Context, id uint64, size uint32, index int) ([]byte, error) {
	key := s.key(id, size, index)
	if b, ok := s.cache.Get(key); ok {
		return b, nil
	}
	v, err, _ := s.fetches.Do(key, func() (any, error) {
		if b, ok := s.cache.Get(key); ok {
			return b, nil
		}
		r, err := s.obj.Get(ctx, key, 0, -1)
		if err != nil {
			return nil, fmt.Errorf("read block %s: %w", key, err)
		}
		defer r.Close()
		want := s.blockLen(size, index)
		b := make([]byte, want)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("read block %s: short or failed read: %w", key, err)
		}
		s.cache.Put(key, b)
		return b, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// ReadSlice fills p with the bytes of slice id (size bytes long) starting
// at offset off.
func (s *Store) ReadSlice(ctx context.Context, id uint64, size uint32, off uint32, p []byte) error {
	if uint64(off)+uint64(len(p)) > uint64(size) {
		return fmt.Errorf("read of slice %d past its end (%d+%d > %d)", id, off, len(p), size)
	}
	bs := s.conf.BlockSize
	for len(p) > 0 {
		index := int(off) / bs
		inBlock := int(off) % bs
		b, err := s.block(ctx, id, size, index)
		if err != nil {
			return err
		}
		n := copy(p, b[inBlock:])
		p = p[n:]
		off += uint32(n)
	}
	return nil
}

// Delete removes all blocks of slice id of size bytes. Missing blocks are
// not an error, so a deletion may be repeated.
func (s *Store) Delete(ctx context.Context, id uint64, size uint32) error {
	n := (int(size) + s.conf.BlockSize - 1) / s.conf.BlockSize
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.conf.MaxUploads)
	for i := 0; i < n; i++ {
		key := s.key(id, size, i)
		s.cache.Remove(key)
		g.Go(func() error {
			if err := s.obj.Delete(gctx, key); err != nil && !errors.Is(err, object.ErrNotFound) {
				return fmt.Errorf("delete block %s: %w", key, err)
			}
			return nil
		})
	}
	return g.Wait()
}
