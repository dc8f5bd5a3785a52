package chunk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// Warming the block cache (sluice warmup). A caller lists the blocks a
// file's chunks need (SliceBlocks over the visible ranges of each slice
// list) and asks, block by block, to fetch them into the local cache
// (Warm), to tell whether they are there (Cached), or to drop them
// (Evict). The cache tiers are the Store's:
//
//   - with a disk cache, Warm fills the disk cache, where blocks outlive
//     the process; a fetch also passes through the memory cache, as a
//     read's does;
//   - with memory only, Warm fills the memory cache, which holds at most
//     its capacity: warming more evicts what was warmed first, and all of
//     it goes when the mount ends.
//
// Either tier drops its least recently used blocks to take new ones
// (--cache-size, --free-space-ratio), so warming more than the cache
// holds keeps only the last part. Blocks staged by writeback are local
// until uploaded: they count as cached and Evict leaves them.

// ErrNotCached is wrapped by the error of Warm when the disk cache would
// not take a block (it is closing).
var ErrNotCached = errors.New("the disk cache did not take the block")

// SliceBlocks returns the blocks of slice id (size bytes long) that hold
// its bytes [off, off+n), in order: the objects a read of that range
// needs. A range past the slice's end is cut at it.
func (s *Store) SliceBlocks(id uint64, size, off, n uint32) []BlockRef {
	end := min(uint64(off)+uint64(n), uint64(size))
	if id == 0 || uint64(off) >= end {
		return nil
	}
	bs := uint64(s.conf.BlockSize)
	first, last := int(uint64(off)/bs), int((end-1)/bs)
	out := make([]BlockRef, 0, last-first+1)
	for i := first; i <= last; i++ {
		out = append(out, BlockRef{ID: id, Index: i, Len: s.blockLen(size, i), HashPrefix: s.conf.HashPrefix})
	}
	return out
}

// CacheTiers names the block cache tiers of the Store, fastest first:
// "memory", and "disk" when it has a disk cache.
func (s *Store) CacheTiers() []string {
	if s.disk == nil {
		return []string{"memory"}
	}
	return []string{"memory", "disk"}
}

// Warm makes sure block b is in the local cache: the disk cache when the
// Store has one, else the memory cache. In a cache group, a block another
// member owns is warmed there instead (reported as fetched), unless the
// owner cannot, so that each block of the group is cached once. It fetches the block from the
// object store unless a cache holds it already, and reports whether it
// did. A block of a slice deleted meanwhile fails with an error wrapping
// object.ErrNotFound.
//
// Disk cache writes are queued: the block is written in the background
// (FlushCache waits for it), and may still be dropped there when the
// cache's file system runs out of room.
func (s *Store) Warm(ctx context.Context, b BlockRef) (fetched bool, err error) {
	defer s.readers.leave(s.readers.enter())
	key := s.blockKey(b)
	inMem := s.inMemory(key, b.Len)
	if s.disk == nil && inMem || s.disk != nil && s.onDisk(key) {
		return false, nil
	}
	if p := s.peersFor(ctx); p != nil && p.Remote(key) && p.Warm(ctx, key) {
		return true, nil // on its owner, where the group reads it
	}
	// s.block serves the block from memory or fetches it (joining a
	// fetch under way), which fills the caches.
	data, err := s.block(ctx, b.ID, s.sliceSizeFor(b), b.Index)
	if err != nil {
		return false, fmt.Errorf("warm block %s: %w", key, err)
	}
	if s.disk == nil {
		return !inMem, nil
	}
	if !s.onDisk(key) {
		if s.fetched != nil {
			// The disk cache writes it later, when the memory cache
			// may have let go of the buffer for reuse.
			data = bytes.Clone(data)
		}
		s.disk.PutWait(key, data) // queued, or written already
	}
	if !s.onDisk(key) {
		return !inMem, fmt.Errorf("warm block %s: %w", key, ErrNotCached)
	}
	return !inMem, nil
}

// Cached reports whether block b is in the local cache: in memory, on
// disk (written or queued for writing) or staged for upload.
func (s *Store) Cached(b BlockRef) bool {
	key := s.blockKey(b)
	return s.inMemory(key, b.Len) || s.disk != nil && s.onDisk(key)
}

// Evict drops block b from the memory and disk caches and reports
// whether a cache held it. A block staged for upload stays staged.
func (s *Store) Evict(b BlockRef) bool {
	key := s.blockKey(b)
	was := s.Cached(b)
	s.cache.Remove(key)
	return was
}

// FlushCache waits until the blocks queued for the disk cache so far are
// written (or dropped); it returns at once without a disk cache.
func (s *Store) FlushCache() {
	if s.disk != nil {
		s.disk.Flush()
	}
}

// blockKey returns the key of b as this Store names blocks.
func (s *Store) blockKey(b BlockRef) string {
	return BlockKey(b.ID, b.Index, b.Len, s.conf.HashPrefix)
}

// sliceSizeFor returns a slice size whose block b.Index has length b.Len,
// for the methods that derive a block's length from its slice's size.
func (s *Store) sliceSizeFor(b BlockRef) uint32 {
	return uint32(b.Index*s.conf.BlockSize + b.Len)
}

// inMemory reports whether the memory cache holds block key of length n.
func (s *Store) inMemory(key string, n int) bool {
	data, ok := s.mem.Get(key)
	return ok && len(data) == n
}

// onDisk reports whether the disk cache holds block key, reading one byte
// of it (which checks the page it lies in).
func (s *Store) onDisk(key string) bool {
	var p [1]byte
	return s.disk.ReadAt(key, p[:], 0)
}
