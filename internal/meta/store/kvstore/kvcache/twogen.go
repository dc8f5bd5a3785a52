package kvcache

// TwoGen is a map that keeps at most about 2*max records without
// tracking their use one by one: records go into the current generation;
// when it holds max records it becomes the old one, and the old one is
// dropped. A record is thus kept for at least max later insertions, and
// longer when it is used (Use moves it to the current generation). It is
// not safe for concurrent use.
type TwoGen[K comparable, V any] struct {
	max      int
	cur, old map[K]V
}

// NewTwoGen returns an empty map of n records per generation (at least
// one).
func NewTwoGen[K comparable, V any](n int) *TwoGen[K, V] {
	return &TwoGen[K, V]{max: max(n, 1), cur: map[K]V{}}
}

// Get returns the value of k, from either generation, leaving it there.
func (m *TwoGen[K, V]) Get(k K) (V, bool) {
	if v, ok := m.cur[k]; ok {
		return v, true
	}
	v, ok := m.old[k]
	return v, ok
}

// Use returns the value of k and moves it to the current generation,
// which may drop the old one (see Put).
func (m *TwoGen[K, V]) Use(k K) (v V, ok bool, dropped map[K]V) {
	if v, ok := m.cur[k]; ok {
		return v, true, nil
	}
	if v, ok = m.old[k]; !ok {
		return v, false, nil
	}
	delete(m.old, k)
	return v, true, m.Put(k, v)
}

// Put sets the value of k in the current generation. When that drops the
// old generation, it returns the records dropped (a map that is not
// empty); otherwise nil.
func (m *TwoGen[K, V]) Put(k K, v V) (dropped map[K]V) {
	if _, ok := m.cur[k]; !ok {
		delete(m.old, k)
		if len(m.cur) >= m.max {
			dropped = m.old
			if len(dropped) == 0 {
				dropped = map[K]V{} // a rotation that dropped nothing
			}
			m.old, m.cur = m.cur, make(map[K]V, m.max)
		}
	}
	m.cur[k] = v
	return dropped
}

// Delete forgets k.
func (m *TwoGen[K, V]) Delete(k K) {
	delete(m.cur, k)
	delete(m.old, k)
}

// Len returns the number of records held.
func (m *TwoGen[K, V]) Len() int { return len(m.cur) + len(m.old) }

// Clear forgets every record.
func (m *TwoGen[K, V]) Clear() { m.cur, m.old = map[K]V{}, nil }
