package cache

import (
	"container/list"
	"sync"
	"sync/atomic"
)

// Memory is an in-memory LRU block cache bounded in bytes.
type Memory struct {
	capacity int64
	counts   counters     // atomic: evictions
	onDrop   func([]byte) // see OnDrop; nil: none

	mu struct {
		sync.Mutex
		used  int64
		lru   *list.List // front = most recent; values are *entry
		index map[string]*list.Element
	}
}

type entry struct {
	key  string
	data []byte
}

// NewMemory returns a cache holding at most capacity bytes of blocks.
func NewMemory(capacity int64) *Memory {
	m := &Memory{capacity: capacity}
	m.mu.lru = list.New()
	m.mu.index = map[string]*list.Element{}
	return m
}

// OnDrop sets f to be called with every block the cache lets go of:
// evicted, removed, replaced by another under its key, or refused by Put
// as larger than the cache. It is called without the cache's lock held,
// and must be set before the cache is used.
func (m *Memory) OnDrop(f func([]byte)) { m.onDrop = f }

// Get returns the cached block key.
func (m *Memory) Get(key string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.mu.index[key]
	if !ok {
		return nil, false
	}
	m.mu.lru.MoveToFront(el)
	return el.Value.(*entry).data, true
}

// Put caches data under key, evicting the least recently used blocks to
// stay within capacity. A block larger than the whole cache is not kept.
func (m *Memory) Put(key string, data []byte) {
	if int64(len(data)) > m.capacity {
		m.dropped(data)
		return
	}
	var drops [][]byte
	m.mu.Lock()
	if el, ok := m.mu.index[key]; ok {
		old := m.removeLocked(el)
		if len(old) == 0 || len(data) == 0 || &old[0] != &data[0] {
			drops = append(drops, old)
		}
	}
	m.mu.index[key] = m.mu.lru.PushFront(&entry{key: key, data: data})
	m.mu.used += int64(len(data))
	for m.mu.used > m.capacity {
		drops = append(drops, m.removeLocked(m.mu.lru.Back()))
		m.counts.evictions.Add(1)
	}
	m.mu.Unlock()
	m.dropped(drops...)
}

// Remove drops key from the cache.
func (m *Memory) Remove(key string) {
	m.mu.Lock()
	el, ok := m.mu.index[key]
	var old []byte
	if ok {
		old = m.removeLocked(el)
	}
	m.mu.Unlock()
	if ok {
		m.dropped(old)
	}
}

// dropped tells the OnDrop function of blocks let go.
func (m *Memory) dropped(blocks ...[]byte) {
	if m.onDrop == nil {
		return
	}
	for _, b := range blocks {
		m.onDrop(b)
	}
}

// Used returns the bytes cached.
func (m *Memory) Used() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.used
}

// Stats returns the cache's counters and what it holds.
func (m *Memory) Stats() Stats {
	m.mu.Lock()
	used, blocks := m.mu.used, int64(len(m.mu.index))
	m.mu.Unlock()
	return m.counts.stats(used, blocks)
}

// removeLocked takes el out of the cache and returns its block.
func (m *Memory) removeLocked(el *list.Element) []byte {
	e := el.Value.(*entry)
	m.mu.lru.Remove(el)
	delete(m.mu.index, e.key)
	m.mu.used -= int64(len(e.data))
	return e.data
}

// Stats are the figures of one cache tier. Evictions count the blocks
// dropped to make room or, on disk, to keep the free-space floor, not
// those removed by Remove. (Hits and misses are counted where reads are
// served, by chunk.Store: a tier cannot tell a read from a re-check.)
type Stats struct {
	Evictions uint64
	// Bytes is what the held blocks take: their lengths in memory, the
	// sizes of their files (checksums included) on disk.
	Bytes int64
	// Blocks is the number of blocks held (on disk: indexed so far;
	// blocks queued for writing and staged blocks are not included).
	Blocks int64
}

// counters are a tier's eviction count, kept outside its lock so that
// counting never waits.
type counters struct {
	evictions atomic.Uint64
}

// stats returns the counts with the tier's contents.
func (c *counters) stats(bytes, blocks int64) Stats {
	return Stats{Evictions: c.evictions.Load(), Bytes: bytes, Blocks: blocks}
}
