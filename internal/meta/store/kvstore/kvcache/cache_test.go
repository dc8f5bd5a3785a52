package kvcache

import (
	"testing"
	"time"
)

// readBatch is the most keys a test takes to read at once.
const readBatch = 256

// newTestCache returns a live cache of 16 values per generation, with
// directories "A" ino "D" (ino 8 bytes) and no other groups.
func newTestCache() *Cache {
	c := New(16, Layout{
		Group: func(k string) string {
			if len(k) > 10 && k[0] == 'A' && k[9] == 'D' {
				return k[:10]
			}
			return ""
		},
		Dir: func(k string) (string, bool) {
			if len(k) > 10 && k[0] == 'A' && k[9] == 'D' {
				return k[:10], true
			}
			return "", false
		},
	})
	c.Up(time.Now())
	return c
}

// TestCacheRefetchWaits checks that a reported change makes the value
// unusable at once, and that its read again waits for Due rather than
// going out with the next command.
func TestCacheRefetchWaits(t *testing.T) {
	c := newTestCache()
	armed := 0
	c.SetOnLater(func() { armed++ })
	c.Committed(c.Seq(), map[string][]byte{"k": []byte("v")}, nil, false)
	if v, ok := c.Get("k"); !ok || string(v) != "v" {
		t.Fatalf("get after commit = %q, %v; want v, true", v, ok)
	}
	c.Invalidated([]string{"k"})
	if _, ok := c.Get("k"); ok {
		t.Fatal("value used after its invalidation")
	}
	if keys, _ := c.Take(readBatch); len(keys) != 0 {
		t.Fatalf("take before due = %q; want nothing", keys)
	}
	if armed != 1 {
		t.Fatalf("the delayed read armed the timer %d times; want 1", armed)
	}
	c.Invalidated([]string{"k"})
	if armed != 1 {
		t.Fatalf("a second report of a delayed key armed the timer again (%d times)", armed)
	}
	c.Due()
	keys, seq := c.Take(readBatch)
	if len(keys) != 1 || keys[0] != "k" {
		t.Fatalf("take after due = %q; want [k]", keys)
	}
	c.Filled(seq, keys, [][]byte{[]byte("w")})
	if v, ok := c.Get("k"); !ok || string(v) != "w" {
		t.Fatalf("get after read = %q, %v; want w, true", v, ok)
	}
}

// TestCachePoolReadIsNewer checks that a value the handle read through
// the pool is never followed by an older one from the cache. A cache read
// sent before the pool read may have run on the server before it, and
// its reply may come before or after the pool read returns (the
// invalidation of the write in between is still on its way); neither
// reply may be served.
func TestCachePoolReadIsNewer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		replyFirst bool // the old reply arrives before want
	}{
		{"reply after the pool read", false},
		{"reply before want", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCache()
			c.Want([]string{"k"}, [][]byte{[]byte("v0")})
			keys, seq := c.Take(readBatch) // runs on the server before the write of v1
			if len(keys) != 1 {
				t.Fatalf("take = %q; want [k]", keys)
			}
			old := [][]byte{[]byte("v0")}
			if tc.replyFirst {
				c.Filled(seq, keys, old)
			}
			c.Want([]string{"k"}, [][]byte{[]byte("v1")}) // the pool read saw v1
			if !tc.replyFirst {
				c.Filled(seq, keys, old)
			}
			if v, ok := c.Get("k"); ok {
				t.Fatalf("get = %q from the cache after the pool read returned v1", v)
			}
			keys, seq = c.Take(readBatch)
			if len(keys) != 1 {
				t.Fatalf("no read of k sent after the pool read: take = %q", keys)
			}
			c.Filled(seq, keys, [][]byte{[]byte("v1")})
			if v, ok := c.Get("k"); !ok || string(v) != "v1" {
				t.Fatalf("get = %q, %v; want v1, true", v, ok)
			}
		})
	}
}

// TestCacheScanFence checks that after a range read through the pool,
// the keys of its scan group are not served from the cache until the
// fence sent after it is answered, and that other keys still are.
func TestCacheScanFence(t *testing.T) {
	dir := "A\x00\x00\x00\x00\x00\x00\x00\x07D"
	c := newTestCache()
	c.Listed(c.Seq(), dir, []string{dir + "a"})
	c.Committed(c.Seq(), map[string][]byte{dir + "a": []byte("1"), "k": []byte("v")}, nil, false)
	c.Fence(dir)
	for _, k := range []string{dir + "a", dir + "b"} {
		if v, ok := c.Get(k); ok {
			t.Errorf("get %q = %q from a fenced group", k, v)
		}
	}
	if v, ok := c.Get("k"); !ok || string(v) != "v" {
		t.Errorf("get of a key outside the group = %q, %v; want v, true", v, ok)
	}
	marks := c.TakeFences()
	if len(marks) != 1 || marks[0] != dir {
		t.Fatalf("fences to send = %q; want the group", marks)
	}
	c.Unfence(dir)
	if v, ok := c.Get(dir + "a"); !ok || string(v) != "1" {
		t.Errorf("get after the fence = %q, %v; want 1, true", v, ok)
	}
	if _, ok := c.Get(dir + "b"); !ok {
		t.Error("a missing name of the known directory is not answered after the fence")
	}
}

// TestCacheStaleReplies checks that replies to commands sent before the
// handle read a key elsewhere (Want), or before the cache forgot what it
// knew (a rotation of its generations, a Reset), are not served.
func TestCacheStaleReplies(t *testing.T) {
	t.Run("commit sent before a read elsewhere", func(t *testing.T) {
		c := newTestCache()
		seq := c.Seq()                                                    // the commit writes v1 and is sent
		c.Want([]string{"k"}, [][]byte{[]byte("v2")})                     // a read elsewhere saw a later write
		c.Committed(seq, nil, map[string][]byte{"k": []byte("v1")}, true) // its reply arrives
		if v, ok := c.Get("k"); ok {
			t.Fatalf("get = %q from a commit sent before the read elsewhere returned v2", v)
		}
	})
	t.Run("read sent before a rotation", func(t *testing.T) {
		c := newTestCache()
		c.Want([]string{"k"}, [][]byte{[]byte("v0")})
		keys, seq := c.Take(readBatch) // runs before the write of v1
		// Enough other keys to drop k's entry, and what Want told it.
		for i := range 40 {
			c.Want([]string{string(rune('a' + i))}, [][]byte{nil})
		}
		c.Want([]string{"k"}, [][]byte{[]byte("v1")}) // a new entry
		c.Filled(seq, keys, [][]byte{[]byte("v0")})
		if v, ok := c.Get("k"); ok {
			t.Fatalf("get = %q from a read sent before the entry was forgotten", v)
		}
	})
	t.Run("read sent before a reset", func(t *testing.T) {
		c := newTestCache()
		c.Want([]string{"k"}, [][]byte{[]byte("v0")})
		keys, seq := c.Take(readBatch)
		c.Reset(false)
		c.Want([]string{"k"}, [][]byte{[]byte("v1")})
		c.Filled(seq, keys, [][]byte{[]byte("v0")})
		if v, ok := c.Get("k"); ok {
			t.Fatalf("get = %q from a read sent before the reset", v)
		}
	})
}

// TestCacheFenceAcrossReset checks that a fence taken after a Reset of a
// live stream is not ended by the barrier of one taken before.
func TestCacheFenceAcrossReset(t *testing.T) {
	dir := "A\x00\x00\x00\x00\x00\x00\x00\x07D"
	c := newTestCache()
	c.Fence(dir)
	c.TakeFences()
	c.Reset(false)
	c.Committed(c.Seq(), map[string][]byte{dir + "a": []byte("1")}, nil, false)
	c.Fence(dir)
	c.Unfence(dir) // the first fence's barrier
	if v, ok := c.Get(dir + "a"); ok {
		t.Fatalf("get = %q while the second fence is in flight", v)
	}
	c.Unfence(dir)
	if _, ok := c.Get(dir + "a"); !ok {
		t.Fatal("not served after both fences")
	}
}

// TestCacheForgottenEntryOfKnownDirectory checks that a name of a known
// directory that the handle read elsewhere is not answered as missing
// from the directory's names once the generations forgot its entry.
func TestCacheForgottenEntryOfKnownDirectory(t *testing.T) {
	dir := "A\x00\x00\x00\x00\x00\x00\x00\x07D"
	c := newTestCache()
	c.Listed(c.Seq(), dir, nil) // the directory is empty
	// A read elsewhere saw a new name, whose report has not arrived.
	c.Want([]string{dir + "new"}, [][]byte{[]byte("1")})
	for i := range 40 { // drop the entry of the name
		c.Want([]string{string(rune('a' + i))}, [][]byte{[]byte("x")})
	}
	if v, ok := c.Get(dir + "new"); ok {
		t.Fatalf("get = %q, %v for a name read elsewhere", v, ok)
	}
	// A reply tells its value again.
	c.Want([]string{dir + "new"}, [][]byte{[]byte("1")})
	for {
		keys, seq := c.Take(readBatch)
		if len(keys) == 0 {
			break
		}
		vals := make([][]byte, len(keys))
		for i, k := range keys {
			if k == dir+"new" {
				vals[i] = []byte("1")
			}
		}
		c.Filled(seq, keys, vals)
	}
	if v, ok := c.Get(dir + "new"); !ok || string(v) != "1" {
		t.Fatalf("get after the reply = %q, %v; want 1", v, ok)
	}
}

// TestCacheListingBeforeForgetting checks that a listing sent before the
// cache forgot entries does not make its directory known: it may lack a
// name the handle read elsewhere since, whose entry is gone.
func TestCacheListingBeforeForgetting(t *testing.T) {
	dir := "A\x00\x00\x00\x00\x00\x00\x00\x07D"
	c := newTestCache()
	c.Want([]string{dir + "x"}, [][]byte{nil}) // a missing name: list the directory
	dirs, seq := c.TakeLists()
	if len(dirs) != 1 || dirs[0] != dir {
		t.Fatalf("lists = %q, want the directory", dirs)
	}
	// The listing runs; then another client creates "new", which a read
	// elsewhere sees; then the cache forgets that entry.
	c.Want([]string{dir + "new"}, [][]byte{[]byte("1")})
	for i := range 40 {
		c.Want([]string{string(rune('a' + i))}, [][]byte{[]byte("x")})
	}
	c.Listed(seq, dir, nil)
	if v, ok := c.Get(dir + "new"); ok {
		t.Fatalf("get = %q, %v for a name read elsewhere", v, ok)
	}
	// The directory may be listed again at once.
	c.Want([]string{dir + "y"}, [][]byte{nil})
	if dirs, _ := c.TakeLists(); len(dirs) != 1 {
		t.Fatalf("lists after the refused listing = %q, want the directory", dirs)
	}
}

// TestCacheList checks when a known directory's listing is answered from
// the cache: in key order within the range and the limit, and never while
// a name is unsure, a value unknown, a commit of a name in flight, or a
// fence up.
func TestCacheList(t *testing.T) {
	dir := "A\x00\x00\x00\x00\x00\x00\x00\x07D"
	end := "A\x00\x00\x00\x00\x00\x00\x00\x07E"
	setup := func() *Cache {
		c := newTestCache()
		c.Listed(c.Seq(), dir, []string{dir + "b", dir + "a"})
		c.Committed(c.Seq(), map[string][]byte{dir + "a": []byte("1"), dir + "b": []byte("2")}, nil, false)
		c.Committed(c.Seq(), nil, map[string][]byte{dir + "c": []byte("3")}, true)
		return c
	}
	list := func(c *Cache, lo string, limit int) (string, bool) {
		ks, vs, ok := c.List(dir, lo, end, limit)
		var s string
		for i, k := range ks {
			s += k[len(dir):] + "=" + string(vs[i]) + " "
		}
		return s, ok
	}
	for _, tc := range []struct {
		name   string
		change func(c *Cache)
		lo     string
		limit  int
		want   string
		ok     bool
	}{
		{"whole", nil, dir, 0, "a=1 b=2 c=3 ", true},
		{"from a name, limited", nil, dir + "b", 1, "b=2 ", true},
		{"a name removed", func(c *Cache) {
			c.Committed(c.Seq(), nil, map[string][]byte{dir + "b": nil}, true)
		}, dir, 0, "a=1 c=3 ", true},
		{"a name reported changed", func(c *Cache) { c.Invalidated([]string{dir + "a"}) }, dir, 0, "", false},
		{"a commit of a new name in flight", func(c *Cache) { c.BeginWrite([]string{dir + "d"}) }, dir, 0, "", false},
		{"a commit of a listed name in flight", func(c *Cache) { c.BeginWrite([]string{dir + "a"}) }, dir, 0, "", false},
		{"a commit of a key of another group in flight", func(c *Cache) { c.BeginWrite([]string{"k"}) }, dir, 0, "a=1 b=2 c=3 ", true},
		{"a new name committed elsewhere, not read again yet", func(c *Cache) {
			c.BeginWrite([]string{dir + "e"})
			c.EndWrite([]string{dir + "e"})
		}, dir, 0, "", false},
		{"a new name committed elsewhere, read again", func(c *Cache) {
			c.BeginWrite([]string{dir + "e"})
			c.EndWrite([]string{dir + "e"})
			if keys, _ := c.Take(readBatch); len(keys) != 0 {
				t.Fatalf("take before due = %q; want the read delayed", keys)
			}
			c.Due()
			keys, seq := c.Take(readBatch)
			c.Filled(seq, keys, [][]byte{[]byte("5")})
		}, dir, 0, "a=1 b=2 c=3 e=5 ", true},
		{"a name seen elsewhere", func(c *Cache) { c.Want([]string{dir + "f"}, [][]byte{[]byte("6")}) }, dir, 0, "", false},
		{"fenced", func(c *Cache) { c.Fence(dir) }, dir, 0, "", false},
		{"stream down", func(c *Cache) { c.Reset(true) }, dir, 0, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := setup()
			if tc.change != nil {
				tc.change(c)
			}
			got, ok := list(c, tc.lo, tc.limit)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("list = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	// A directory not known whole is not listed.
	c := newTestCache()
	c.Committed(c.Seq(), map[string][]byte{dir + "a": []byte("1")}, nil, false)
	if _, _, ok := c.List(dir, dir, end, 0); ok {
		t.Fatal("a directory never listed was answered from the cache")
	}
}
