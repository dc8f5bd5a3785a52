package cache

import "testing"

func TestMemoryEvictsLeastRecentlyUsed(t *testing.T) {
	m := NewMemory(30)
	m.Put("a", make([]byte, 10))
	m.Put("b", make([]byte, 10))
	m.Put("c", make([]byte, 10))
	if _, ok := m.Get("a"); !ok { // a becomes most recent
		t.Fatal("a missing")
	}
	m.Put("d", make([]byte, 10)) // evicts b
	for key, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		if _, ok := m.Get(key); ok != want {
			t.Errorf("Get(%q) present = %v, want %v", key, ok, want)
		}
	}
	if got := m.Used(); got != 30 {
		t.Errorf("Used = %d, want 30", got)
	}
	m.Put("huge", make([]byte, 31))
	if _, ok := m.Get("huge"); ok {
		t.Error("a block larger than the cache was kept")
	}
	m.Remove("a")
	if got := m.Used(); got != 20 {
		t.Errorf("Used after Remove = %d, want 20", got)
	}
}

// TestMemoryOnDrop checks that every block leaving the cache is reported
// once, and a block put again under its key is not.
func TestMemoryOnDrop(t *testing.T) {
	m := NewMemory(30)
	var dropped []byte
	m.OnDrop(func(b []byte) { dropped = append(dropped, b[0]) })
	block := func(c byte) []byte { b := make([]byte, 10); b[0] = c; return b }
	a, b := block('a'), block('b')
	m.Put("a", a)
	m.Put("b", b)
	m.Put("c", block('c'))
	m.Put("a", a)          // the same block again: still cached, not dropped
	m.Put("b", block('B')) // replaced: b is dropped
	m.Put("d", block('d')) // evicts the least recently used, c
	m.Remove("a")
	m.Remove("a") // gone already: nothing
	m.Put("huge", append(block('h'), make([]byte, 30)...))
	if got, want := string(dropped), "bcah"; got != want {
		t.Errorf("dropped %q, want %q", got, want)
	}
}
