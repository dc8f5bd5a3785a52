package redis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore/kvcache"
	"github.com/sluicefs/sluice/internal/testserver"
)

// cachedHandles opens two handles on one fresh volume namespace of a
// single server and waits until the first one's cache is live.
func cachedHandles(t *testing.T) (d1, d2 *DB) {
	t.Helper()
	return cachedHandlesOn(t, testserver.Redis)
}

// cachedHandlesOn is cachedHandles on the server named by env.
func cachedHandlesOn(t *testing.T, env string) (d1, d2 *DB) {
	t.Helper()
	raw := freshURL(t, env)
	d1, d2 = openDB(t, raw), openDB(t, raw)
	t.Cleanup(func() { d1.Close(); d2.Close() })
	if d1.cache == nil {
		t.Fatal("no cache")
	}
	waitFor(t, "cache live", func() bool { return live(d1) })
	return d1, d2
}

// live reports whether the cache of d is in use.
func live(d *DB) bool {
	return d.cache.Live()
}

// waitFor polls cond for up to two seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func get(t *testing.T, d *DB, k string) string {
	t.Helper()
	var v []byte
	err := d.View(context.Background(), func(tx kvstore.Txn) error {
		var err error
		v, err = tx.Get([]byte(k))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if v == nil {
		return "<missing>"
	}
	return string(v)
}

func set(t *testing.T, d *DB, k, v string) {
	t.Helper()
	err := d.Update(context.Background(), func(tx kvstore.Txn) error {
		if _, err := tx.Get([]byte(k)); err != nil {
			return err
		}
		if v == "" {
			tx.Delete([]byte(k))
		} else {
			tx.Set([]byte(k), []byte(v))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// cached reports whether the cache of d serves k now.
func cached(d *DB, k string) bool {
	_, ok := d.cache.Get(k)
	return ok
}

// TestCacheOwnWrites: a handle reads what it committed, at once, from
// the cache, through a long run of changes to one key.
func TestCacheOwnWrites(t *testing.T) {
	d1, _ := cachedHandles(t)
	k := "Cown"
	for i := range 300 {
		want := fmt.Sprint("v", i)
		set(t, d1, k, want)
		if got := get(t, d1, k); got != want {
			t.Fatalf("step %d: read %q after writing %q", i, got, want)
		}
	}
	// The server reports the handle's own commits too (see kvcache.RefetchDelay),
	// folded with any other write of the same keys in the same event-loop
	// turn, so the value is read again before the cache serves it.
	waitFor(t, "the last value written to be cached", func() bool { return cached(d1, k) })
	if got := get(t, d1, k); got != "v299" {
		t.Fatalf("read %q from the cache, want v299", got)
	}
}

// TestCacheOtherWrites: a value cached by one handle and changed by
// another is not served once the change is reported, and the new value
// is cached in its place.
func TestCacheOtherWrites(t *testing.T) {
	d1, d2 := cachedHandles(t)
	k := "Cother"
	set(t, d2, k, "old")
	if got := get(t, d1, k); got != "old" {
		t.Fatalf("read %q, want old", got)
	}
	waitFor(t, "the value to be cached", func() bool { return cached(d1, k) })
	for i := range 50 {
		want := fmt.Sprint("new", i)
		set(t, d2, k, want)
		// The change reaches d1 through its tracking connection a moment
		// after d2's commit returns; from then on d1 never serves the
		// old value.
		waitFor(t, "the change to be seen", func() bool { return get(t, d1, k) == want })
		for range 20 {
			if got := get(t, d1, k); got != want {
				t.Fatalf("step %d: read %q after having read %q", i, got, want)
			}
		}
	}
	waitFor(t, "the new value to be cached", func() bool { return cached(d1, k) })
	set(t, d2, k, "")
	waitFor(t, "the deletion to be seen", func() bool { return get(t, d1, k) == "<missing>" })
}

// TestCacheKnownDirectory: after a miss, a directory's names are listed,
// and names missing from it are answered by the cache; names another
// handle adds or removes are seen.
func TestCacheKnownDirectory(t *testing.T) {
	d1, d2 := cachedHandles(t)
	dir := "A\x00\x00\x00\x00\x00\x00\x00\x07D"
	set(t, d2, dir+"a", "\x01\x00\x00\x00\x00\x00\x00\x00\x08")
	if got := get(t, d1, dir+"b"); got != "<missing>" {
		t.Fatalf("read %q for a missing name", got)
	}
	waitFor(t, "the directory to be listed", func() bool { return cached(d1, dir+"zzz") })
	if cached(d1, dir+"a") && get(t, d1, dir+"a") == "<missing>" {
		t.Fatal("an existing name is served as missing")
	}
	set(t, d2, dir+"c", "\x01\x00\x00\x00\x00\x00\x00\x00\x09")
	waitFor(t, "the new name to be seen", func() bool { return get(t, d1, dir+"c") != "<missing>" })
	set(t, d2, dir+"a", "")
	waitFor(t, "the removed name to be seen", func() bool { return get(t, d1, dir+"a") == "<missing>" })
	if got := get(t, d1, dir+"c"); got == "<missing>" {
		t.Fatal("a name seen before is served as missing")
	}
}

// TestCacheListedDirectory: the entries of a directory a read lists
// whole from the server come to be served by the cache, so that removing
// or opening each listed name needs no read of its own; a partial
// listing (a page that may not be the last) is left alone, and the
// listed names follow another handle's changes.
func TestCacheListedDirectory(t *testing.T) {
	d1, d2 := cachedHandles(t)
	scan := func(dir string, limit int) int {
		t.Helper()
		var n int
		err := d1.View(context.Background(), func(tx kvstore.Txn) error {
			pairs, err := tx.Scan([]byte(dir), []byte(dir+"\xff"), limit)
			n = len(pairs)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	whole := "A\x00\x00\x00\x00\x00\x00\x00\x21D"
	paged := "A\x00\x00\x00\x00\x00\x00\x00\x22D"
	for i := range 5 {
		set(t, d2, fmt.Sprintf("%sf%d", whole, i), fmt.Sprint("\x01\x00\x00\x00\x00\x00\x00\x01", i))
		set(t, d2, fmt.Sprintf("%sf%d", paged, i), fmt.Sprint("\x01\x00\x00\x00\x00\x00\x00\x02", i))
	}
	if n := scan(whole, 0); n != 5 {
		t.Fatalf("listed %d entries, want 5", n)
	}
	if n := scan(paged, 3); n != 3 {
		t.Fatalf("listed %d entries of a page of 3, want 3", n)
	}
	waitFor(t, "the listed entries to be cached", func() bool {
		for i := range 5 {
			if !cached(d1, fmt.Sprintf("%sf%d", whole, i)) {
				return false
			}
		}
		return true
	})
	// The cache reads on its own connection; give it the time it took for
	// the whole listing before looking at the page.
	time.Sleep(50 * time.Millisecond)
	for i := range 5 {
		if cached(d1, fmt.Sprintf("%sf%d", paged, i)) {
			t.Errorf("entry f%d of a partial listing is cached", i)
		}
	}
	k := whole + "f2"
	set(t, d2, k, "")
	waitFor(t, "the removed name to be seen", func() bool { return get(t, d1, k) == "<missing>" })
}

// TestCacheConnectionLost: when the tracking connection is killed, the
// cache stops serving values, commits go on, and the cache comes back
// after reconnecting.
func TestCacheConnectionLost(t *testing.T) {
	d1, d2 := cachedHandles(t)
	k := "Clost"
	set(t, d2, k, "one")
	get(t, d1, k)
	waitFor(t, "the value to be cached", func() bool { return cached(d1, k) })

	c := redis.NewClient(&redis.Options{Addr: d1.stream.o.addrs[0], Password: d1.stream.o.password})
	defer c.Close()
	list, err := c.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	addr := d1.stream.localAddr()
	killed := 0
	for _, line := range strings.Split(list, "\n") {
		if !strings.Contains(line, " addr="+addr+" ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if id, ok := strings.CutPrefix(f, "id="); ok {
				if err := c.Do(context.Background(), "CLIENT", "KILL", "ID", id).Err(); err == nil {
					killed++
				}
			}
		}
	}
	if killed == 0 {
		t.Fatal("no tracking connection found")
	}
	set(t, d1, k, "one") // its commit may meet the dead connection
	waitFor(t, "the cache to stop", func() bool { return !cached(d1, k) })
	set(t, d2, k, "two")
	if got := get(t, d1, k); got != "two" {
		t.Fatalf("read %q after the connection was lost, want two", got)
	}
	waitFor(t, "the cache to come back", func() bool { get(t, d1, k); return cached(d1, k) })
	if got := get(t, d1, k); got != "two" {
		t.Fatalf("read %q from the cache, want two", got)
	}
}

// TestCacheClusterSlotMoved: on a Redis Cluster the cache runs on the
// master of the volume's slot. When the slot moves to another master,
// the old value is not served for longer than the cache's lease, and the
// cache comes back on the new master.
func TestCacheClusterSlotMoved(t *testing.T) {
	d1, d2 := cachedHandlesOn(t, testserver.RedisCluster)
	ctx := context.Background()
	k := "Cmoved"
	set(t, d2, k, "one")
	get(t, d1, k)
	waitFor(t, "the value to be cached", func() bool { return cached(d1, k) })
	set(t, d2, k, "two")
	waitFor(t, "the change to be seen", func() bool { return get(t, d1, k) == "two" })
	waitFor(t, "the new value to be cached", func() bool { return cached(d1, k) })

	from, err := d1.locate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	to := moveSlot(t, d1, from)
	t.Logf("moved the volume's slot from %s to %s", from, to)

	set(t, d2, k, "three") // goes to the new master, which d1 does not watch yet
	deadline := time.Now().Add(kvcache.Lease + 2*kvcache.PingEvery + time.Second)
	for get(t, d1, k) != "three" {
		if time.Now().After(deadline) {
			t.Fatalf("still read the old value %s after the slot moved", kvcache.Lease+2*kvcache.PingEvery+time.Second)
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitFor(t, "the cache to come back", func() bool { get(t, d1, k); return live(d1) && cached(d1, k) })
	set(t, d2, k, "four")
	waitFor(t, "a change on the new master to be seen", func() bool { return get(t, d1, k) == "four" })
}

// moveSlot moves the slot of d's volume from master from to another
// master, with its keys, and returns the new master's address.
func moveSlot(t *testing.T, d *DB, from string) string {
	t.Helper()
	ctx := context.Background()
	cc := d.c.(*redis.ClusterClient)
	slot, err := cc.ClusterKeySlot(ctx, d.ns+"w").Result()
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*redis.Client{} // address -> client
	ids := map[string]string{}          // address -> node id
	var mu sync.Mutex                   // ForEachMaster calls concurrently
	err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		id, err := c.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		nodes[c.Options().Addr], ids[c.Options().Addr] = c, id
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	to := ""
	for a := range nodes {
		if a != from {
			to = a
			break
		}
	}
	if to == "" || nodes[from] == nil {
		t.Fatalf("masters %v: no other master than %s", ids, from)
	}
	src, dst := nodes[from], nodes[to]
	host, port, _ := strings.Cut(to, ":")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from]).Err())
	must(src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to]).Err())
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
		must(err)
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(src.Do(ctx, args...).Err())
	}
	for _, c := range nodes {
		must(c.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", ids[to]).Err())
	}
	return to
}
