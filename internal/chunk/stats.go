package chunk

import "github.com/sluicefs/sluice/internal/chunk/cache"

// CacheStats are the figures of a Store's block caches and write
// buffers, for metrics.
type CacheStats struct {
	// Memory is the memory cache.
	Memory cache.Stats
	// Disk is the disk cache; zero when the Store has none.
	Disk cache.Stats
	// BufferUsed is the bytes the write buffers of all open files hold;
	// BufferSize is their limit (Config.BufferSize), beyond which
	// writers push their slices out and wait.
	BufferUsed, BufferSize int64
}

// CacheStats returns the figures of the block caches and write buffers.
// Each is read atomically, but not all at one instant.
func (s *Store) CacheStats() CacheStats {
	st := CacheStats{Memory: s.mem.Stats(), BufferUsed: s.buffers.inUse(), BufferSize: s.buffers.limit}
	if s.disk != nil {
		st.Disk = s.disk.Stats()
	}
	return st
}
