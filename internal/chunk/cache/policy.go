package cache

import "container/list"

// lru indexes the files of one cache directory by recency of use, with
// their sizes. It does no IO; the caller holds a lock.
type lru struct {
	ll    *list.List // front = most recently used; values are *lruEntry
	index map[string]*list.Element
	used  int64
	last  uint64 // the version of the latest add
}

type lruEntry struct {
	key  string
	size int64
	// version changes with every add of key, so that a reader can tell
	// that a key it found was removed and added again meanwhile (its
	// file replaced).
	version uint64
}

func newLRU() *lru {
	return &lru{ll: list.New(), index: map[string]*list.Element{}}
}

// add records key as the most recently used entry, or, with old set, as
// the least recently used one (the restart scan adds files it finds behind
// those used since the start), and returns its new version.
func (l *lru) add(key string, size int64, old bool) uint64 {
	l.last++
	if el, ok := l.index[key]; ok {
		e := el.Value.(*lruEntry)
		l.used += size - e.size
		e.size = size
		e.version = l.last
		if !old {
			l.ll.MoveToFront(el)
		}
		return e.version
	}
	e := &lruEntry{key: key, size: size, version: l.last}
	if old {
		l.index[key] = l.ll.PushBack(e)
	} else {
		l.index[key] = l.ll.PushFront(e)
	}
	l.used += size
	return e.version
}

// has reports whether key is indexed.
func (l *lru) has(key string) bool {
	_, ok := l.index[key]
	return ok
}

// touch marks key as just used and returns its version, 0 when it is not
// indexed.
func (l *lru) touch(key string) uint64 {
	el, ok := l.index[key]
	if !ok {
		return 0
	}
	l.ll.MoveToFront(el)
	return el.Value.(*lruEntry).version
}

// version returns the version of key, 0 when it is not indexed.
func (l *lru) version(key string) uint64 {
	if el, ok := l.index[key]; ok {
		return el.Value.(*lruEntry).version
	}
	return 0
}

// remove drops key and reports whether it was indexed.
func (l *lru) remove(key string) bool {
	el, ok := l.index[key]
	if !ok {
		return false
	}
	l.used -= el.Value.(*lruEntry).size
	l.ll.Remove(el)
	delete(l.index, key)
	return true
}

// evict drops least recently used entries until at least n bytes are
// dropped or the index is empty, and returns their keys.
func (l *lru) evict(n int64) []string {
	var keys []string
	for freed := int64(0); freed < n && l.ll.Len() > 0; {
		e := l.ll.Back().Value.(*lruEntry)
		freed += e.size
		keys = append(keys, e.key)
		l.remove(e.key)
	}
	return keys
}

// space is the state of the file system holding a cache directory: bytes
// available to us and its total size. Zero means unknown.
type space struct {
	avail, total uint64
}

// plan decides how a directory whose files use used bytes of its capacity
// takes a new file of n bytes, keeping at least ratio of its file system
// free: it returns the bytes to evict first and whether to write the file
// at all. The file is skipped when even evicting everything would not make
// room, so a full disk stops caching rather than failing writes.
func plan(used, capacity, n int64, sp space, ratio float64) (evict int64, write bool) {
	if n > capacity {
		return 0, false
	}
	evict = used + n - capacity
	if sp.total > 0 {
		floor := int64(ratio * float64(sp.total))
		if short := floor - (int64(sp.avail) - n); short > evict {
			evict = short
		}
	}
	if evict <= 0 {
		return 0, true
	}
	if evict > used {
		// Not enough of our own to free: do not write, but still free
		// what the floor asks for, so the disk gets space back.
		return max(0, min(evict-n, used)), false
	}
	return evict, true
}

// overFloor reports whether the file system has less than ratio of its
// size free; staging then refuses blocks.
func overFloor(sp space, n int64, ratio float64) bool {
	return sp.total > 0 && int64(sp.avail)-n < int64(ratio*float64(sp.total))
}
