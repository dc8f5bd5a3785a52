package cache

import (
	"slices"
	"testing"
)

func TestPlan(t *testing.T) {
	const GiB = 1 << 30
	tests := []struct {
		name              string
		used, capacity, n int64
		sp                space
		ratio             float64
		wantEvict         int64
		wantWrite         bool
	}{
		{"room", 10, 100, 10, space{}, 0.1, 0, true},
		{"exactly full", 90, 100, 10, space{}, 0.1, 0, true},
		{"over capacity", 95, 100, 10, space{}, 0.1, 5, true},
		{"larger than capacity", 0, 100, 101, space{}, 0.1, 0, false},
		{"disk roomy", 10, 100, 10, space{avail: 50 * GiB, total: 100 * GiB}, 0.1, 0, true},
		{"write would cross the floor", 50, 100, 10, space{avail: 10*GiB + 5, total: 100 * GiB}, 0.1, 5, true},
		{"below the floor, enough of ours to free", 50, 100, 10, space{avail: 10*GiB - 20, total: 100 * GiB}, 0.1, 30, true},
		{"below the floor, not enough of ours", 50, 1000, 10, space{avail: 10*GiB - 100, total: 100 * GiB}, 0.1, 50, false},
		{"below the floor by less than ours, no write", 5, 1000, 10, space{avail: 10*GiB - 3, total: 100 * GiB}, 0.1, 3, false},
		{"capacity and floor: the larger wins", 95, 100, 10, space{avail: 10*GiB - 20, total: 100 * GiB}, 0.1, 30, true},
		{"ratio zero, disk full: free room for the block", 10, 100, 10, space{avail: 0, total: 100 * GiB}, 0, 10, true},
		{"ratio zero, disk roomy", 10, 100, 10, space{avail: 20, total: 100 * GiB}, 0, 0, true},
		{"unknown space ignores the ratio", 10, 100, 10, space{}, 0.5, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evict, write := plan(tt.used, tt.capacity, tt.n, tt.sp, tt.ratio)
			if evict != tt.wantEvict || write != tt.wantWrite {
				t.Errorf("plan(used=%d, cap=%d, n=%d, %+v, %v) = (%d, %v), want (%d, %v)",
					tt.used, tt.capacity, tt.n, tt.sp, tt.ratio, evict, write, tt.wantEvict, tt.wantWrite)
			}
		})
	}
}

func TestOverFloor(t *testing.T) {
	tests := []struct {
		sp    space
		n     int64
		ratio float64
		want  bool
	}{
		{space{}, 1 << 40, 0.5, false},
		{space{avail: 200, total: 1000}, 100, 0.1, false},
		{space{avail: 200, total: 1000}, 101, 0.1, true},
		{space{avail: 50, total: 1000}, 0, 0.1, true},
	}
	for _, tt := range tests {
		if got := overFloor(tt.sp, tt.n, tt.ratio); got != tt.want {
			t.Errorf("overFloor(%+v, %d, %v) = %v, want %v", tt.sp, tt.n, tt.ratio, got, tt.want)
		}
	}
}

func TestLRU(t *testing.T) {
	l := newLRU()
	l.add("a", 10, false)
	l.add("b", 10, false)
	l.add("c", 10, false)
	l.add("old", 5, true) // found by a restart scan: least recent
	l.touch("a")          // order now a c b old
	if got := l.evict(12); !slices.Equal(got, []string{"old", "b"}) {
		t.Errorf("evict(12) = %q, want [old b]", got)
	}
	if l.used != 20 || l.has("b") || !l.has("a") {
		t.Errorf("after evict: used %d, has b %v, has a %v", l.used, l.has("b"), l.has("a"))
	}
	l.add("a", 15, false) // size change
	if l.used != 25 {
		t.Errorf("used = %d after resizing a, want 25", l.used)
	}
	if !l.remove("c") || l.remove("c") {
		t.Error("remove(c) should succeed once")
	}
	if got := l.evict(1 << 20); !slices.Equal(got, []string{"a"}) || l.used != 0 {
		t.Errorf("evict(all) = %q, used %d", got, l.used)
	}
	if got := l.evict(0); got != nil {
		t.Errorf("evict(0) = %q", got)
	}
}

// TestLRUVersion checks that a key's version changes whenever it is added,
// so that a reader can tell a key removed and added again from the one it
// saw.
func TestLRUVersion(t *testing.T) {
	l := newLRU()
	if v := l.touch("a"); v != 0 {
		t.Errorf("touch of a missing key = %d, want 0", v)
	}
	v1 := l.add("a", 10, false)
	if v := l.touch("a"); v == 0 || v != v1 || l.version("a") != v1 {
		t.Errorf("touch = %d, version = %d, want %d from add", v, l.version("a"), v1)
	}
	l.remove("a")
	if v := l.version("a"); v != 0 {
		t.Errorf("version after remove = %d, want 0", v)
	}
	v2 := l.add("a", 10, false)
	v3 := l.add("a", 12, true) // replaced in place
	if v2 == v1 || v3 == v2 || l.version("a") != v3 {
		t.Errorf("versions %d, %d, %d of three adds, now %d: want all different, the last current", v1, v2, v3, l.version("a"))
	}
}
