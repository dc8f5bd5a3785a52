package cache

// Cache holds immutable blocks by object key. Implementations are safe for
// concurrent use and never fail: a block that cannot be kept is simply not
// kept, and a block that cannot be read back is a miss.
type Cache interface {
	// Get returns the block cached under key.
	Get(key string) ([]byte, bool)
	// Put offers data as the block of key. The cache may keep a reference
	// to data, so the caller must not modify it afterwards.
	Put(key string, data []byte)
	// Remove drops key.
	Remove(key string)
}

var (
	_ Cache = (*Memory)(nil)
	_ Cache = (*Disk)(nil)
	_ Cache = (*Tiered)(nil)
)

// Tiered puts a fast cache in front of a slow one: a hit in the slow cache
// is copied into the fast one, and blocks are offered to both.
type Tiered struct {
	fast, slow Cache
}

// NewTiered returns a cache that looks in fast, then in slow.
func NewTiered(fast, slow Cache) *Tiered {
	return &Tiered{fast: fast, slow: slow}
}

// Get returns the block of key from the fast cache, or from the slow one,
// which then also fills the fast one.
func (t *Tiered) Get(key string) ([]byte, bool) {
	if b, ok := t.fast.Get(key); ok {
		return b, true
	}
	b, ok := t.slow.Get(key)
	if ok {
		t.fast.Put(key, b)
	}
	return b, ok
}

// Put offers data to both caches.
func (t *Tiered) Put(key string, data []byte) {
	t.fast.Put(key, data)
	t.slow.Put(key, data)
}

// Remove drops key from both caches.
func (t *Tiered) Remove(key string) {
	t.fast.Remove(key)
	t.slow.Remove(key)
}
