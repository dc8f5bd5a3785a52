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
