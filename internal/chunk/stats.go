package chunk

import (
	"sync/atomic"

	"github.com/sluicefs/sluice/internal/chunk/cache"
)

// CacheStats are the figures of a Store's block caches and write
// buffers, for metrics.
type CacheStats struct {
	// Memory is the memory cache.
	Memory cache.Stats
	// Disk is the disk cache; zero when the Store has none.
	Disk cache.Stats
	// MemoryHits and DiskHits count the block reads of applications
	// (readahead and warmup aside) that the memory and the disk cache
	// served; Misses those that waited for the object store, PeerHits
	// those a member of the cache group served.
	MemoryHits, DiskHits, Misses, PeerHits uint64
	// BufferUsed is the bytes the write buffers of all open files hold;
	// BufferSize is their limit (Config.BufferSize), beyond which
	// writers push their slices out and wait.
	BufferUsed, BufferSize int64
}

// CacheStats returns the figures of the block caches and write buffers.
// Each is read atomically, but not all at one instant.
func (s *Store) CacheStats() CacheStats {
	st := CacheStats{Memory: s.mem.Stats(), BufferUsed: s.buffers.inUse(), BufferSize: s.buffers.limit,
		MemoryHits: s.reads.memory.Load(), DiskHits: s.reads.disk.Load(), Misses: s.reads.objects.Load(), PeerHits: s.reads.peer.Load()}
	if s.disk != nil {
		st.Disk = s.disk.Stats()
	}
	return st
}

// readCounts count where block reads were served, one per read of a
// block's bytes.
type readCounts struct {
	memory, disk, objects, peer atomic.Uint64
}

func (r *readCounts) add(src source) {
	switch src {
	case fromMemory:
		r.memory.Add(1)
	case fromDisk:
		r.disk.Add(1)
	case fromPeer:
		r.peer.Add(1)
	default:
		r.objects.Add(1)
	}
}
