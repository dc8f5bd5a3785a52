package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore/kvtest"
	"github.com/sluicefs/sluice/internal/meta/store/storetest"
	"github.com/sluicefs/sluice/internal/testserver"
)

// servers are the two server kinds every server test runs on.
var servers = []struct{ name, env string }{
	{"single", testserver.Redis},
	{"cluster", testserver.RedisCluster},
}

// freshURL returns the test server's URL with a new random prefix, and
// deletes every key under that prefix when t ends.
func freshURL(t testing.TB, env string) string {
	t.Helper()
	u, err := url.Parse(testserver.URL(t, env))
	if err != nil {
		t.Fatalf("%s: %v", env, err)
	}
	b := make([]byte, 8)
	rand.Read(b)
	q := u.Query()
	q.Set("prefix", "sluicetest-"+hex.EncodeToString(b))
	u.RawQuery = q.Encode()
	raw := u.String()
	t.Cleanup(func() { dropAll(t, raw) })
	return raw
}

// dropAll deletes every key of the namespace rawURL names.
func dropAll(t testing.TB, raw string) {
	t.Helper()
	ctx := context.Background()
	d, err := Open(ctx, raw, false)
	if err != nil {
		t.Errorf("clean up %s: %v", raw, err)
		return
	}
	defer d.Close()
	node, err := nodeOf(ctx, d)
	if err != nil {
		t.Errorf("clean up %s: %v", raw, err)
		return
	}
	iter := node.Scan(ctx, 0, d.ns+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("clean up %s: %v", raw, err)
		return
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := node.Del(ctx, keys[:n]...).Err(); err != nil {
			t.Errorf("clean up %s: %v", raw, err)
			return
		}
		keys = keys[n:]
	}
}

// nodeOf returns the server holding d's namespace.
func nodeOf(ctx context.Context, d *DB) (*redis.Client, error) {
	switch c := d.c.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, d.anchorKey())
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("unexpected client %T", d.c)
}

func openDB(t testing.TB, raw string) *DB {
	t.Helper()
	d, err := Open(context.Background(), raw, true)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return d
}

func TestSuite(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			testserver.URL(t, s.env) // skip once, not in every case
			metatest.RunOptions(t, func(t *testing.T) store.Store {
				return kvstore.New(openDB(t, freshURL(t, s.env)))
			}, metatest.Options{ModelOps: 500})
		})
	}
}

// TestStore runs the store contract. Whole-family scans use SCAN, which
// may return a key twice.
func TestStore(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			testserver.URL(t, s.env)
			storetest.Run(t, func(t *testing.T) store.Store {
				return kvstore.New(openDB(t, freshURL(t, s.env)))
			}, storetest.Options{ScanRepeats: true})
		})
	}
}

// TestRaces runs two handles of one volume.
func TestRaces(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			u := freshURL(t, s.env)
			st1, st2 := kvstore.New(openDB(t, u)), kvstore.New(openDB(t, u))
			defer st1.Close()
			defer st2.Close()
			storetest.Races(t, st1, st2)
		})
	}
}

// TestKV runs the adapter contract. View reads each call afresh (no
// snapshot); scanned ranges are checked at commit, so phantoms conflict.
func TestKV(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			testserver.URL(t, s.env)
			kvtest.Run(t, func(t *testing.T) kvstore.DB {
				d := openDB(t, freshURL(t, s.env))
				t.Cleanup(func() { d.Close() })
				return d
			}, kvtest.Options{Blind: true})
		})
	}
}

// TestTwoHandles runs two clients, each on its own handle, creating files
// in one directory at the same time.
func TestTwoHandles(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) { testTwoHandles(t, freshURL(t, s.env)) })
	}
}

func testTwoHandles(t *testing.T, raw string) {
	st1 := kvstore.New(openDB(t, raw))
	defer st1.Close()
	metatest.TwoClients(t, st1, func() store.Store {
		st2 := kvstore.New(openDB(t, raw))
		t.Cleanup(func() { st2.Close() })
		return st2
	})
}

// TestTransactions checks the optimistic transactions directly: conflicts
// on keys read and on scanned ranges, none on blind writes, and reads that
// merge buffered writes.
func TestTransactions(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) { testTransactions(t, freshURL(t, s.env)) })
	}
}

// dirKey returns the key of entry name in directory 7.
func dirKey(name string) []byte { return append([]byte("A\x00\x00\x00\x00\x00\x00\x00\x07D"), name...) }

func testTransactions(t *testing.T, raw string) {
	ctx := context.Background()
	d1, d2 := openDB(t, raw), openDB(t, raw)
	defer d1.Close()
	defer d2.Close()
	set := func(d *DB, k []byte, v string) error {
		return d.Update(ctx, func(tx kvstore.Txn) error { tx.Set(k, []byte(v)); return nil })
	}
	for _, n := range []string{"a", "c", "e"} {
		if err := set(d1, dirKey(n), n); err != nil {
			t.Fatal(err)
		}
	}

	// A key read and then changed by another handle is a conflict.
	err := d1.Update(ctx, func(tx kvstore.Txn) error {
		if _, err := tx.Get(dirKey("a")); err != nil {
			return err
		}
		if err := set(d2, dirKey("a"), "a2"); err != nil {
			return err
		}
		tx.Set([]byte("Cx"), []byte("1"))
		return nil
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("update after a concurrent change of a read key: %v, want a conflict", err)
	}
	// So is a read-only transaction, and a read of a missing key.
	err = d1.Update(ctx, func(tx kvstore.Txn) error {
		if v, err := tx.Get([]byte("Cmissing")); err != nil || v != nil {
			return fmt.Errorf("get missing: %q, %v", v, err)
		}
		return set(d2, []byte("Cmissing"), "now")
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("read-only update after a concurrent create: %v, want a conflict", err)
	}
	// A key added inside a scanned range is a conflict.
	err = d1.Update(ctx, func(tx kvstore.Txn) error {
		if _, err := tx.Scan(dirKey(""), dirKey("\xff"), 0); err != nil {
			return err
		}
		if err := set(d2, dirKey("b"), "b"); err != nil {
			return err
		}
		tx.Set(dirKey("z"), []byte("z"))
		return nil
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("update after a concurrent insert into a scanned range: %v, want a conflict", err)
	}
	// Blind writes into one directory do not conflict.
	err = d1.Update(ctx, func(tx kvstore.Txn) error {
		tx.Set(dirKey("f"), []byte("f"))
		return set(d2, dirKey("g"), "g")
	})
	if err != nil {
		t.Fatalf("blind writes: %v", err)
	}

	// Reads see buffered writes; Scan merges them and honours the limit.
	err = d1.Update(ctx, func(tx kvstore.Txn) error {
		tx.Delete(dirKey("a"))
		tx.Delete(dirKey("b"))
		tx.Set(dirKey("bb"), []byte("new"))
		tx.Set(dirKey("c"), []byte("c2"))
		if v, err := tx.Get(dirKey("c")); err != nil || string(v) != "c2" {
			return fmt.Errorf("get buffered: %q, %v", v, err)
		}
		vs, err := tx.GetMany([][]byte{dirKey("a"), dirKey("e"), dirKey("bb"), dirKey("e")})
		if err != nil || vs[0] != nil || string(vs[1]) != "e" || string(vs[2]) != "new" || string(vs[3]) != "e" {
			return fmt.Errorf("get many: %q, %v", vs, err)
		}
		for limit, want := range map[int]string{0: "bb=new c=c2 e=e f=f g=g", 2: "bb=new c=c2", 3: "bb=new c=c2 e=e"} {
			got, err := scanString(tx, dirKey(""), dirKey("\xff"), limit)
			if err != nil || got != want {
				return fmt.Errorf("scan limit %d: %q, %v; want %q", limit, got, err, want)
			}
		}
		got, err := scanString(tx, dirKey("c\x00"), dirKey("f"), 0)
		if err != nil || got != "e=e" {
			return fmt.Errorf("scan [c\\0, f): %q, %v", got, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = d2.View(ctx, func(tx kvstore.Txn) error {
		got, err := scanString(tx, dirKey(""), dirKey("\xff"), 0)
		if err != nil || got != "bb=new c=c2 e=e f=f g=g" {
			return fmt.Errorf("scan after commit: %q, %v", got, err)
		}
		if v, err := tx.Get(dirKey("a")); err != nil || v != nil {
			return fmt.Errorf("deleted key: %q, %v", v, err)
		}
		_, err = tx.Scan([]byte("A"), []byte("B"), 0)
		if err == nil {
			return errors.New("a scan across groups succeeded")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A failed callback writes nothing.
	boom := errors.New("boom")
	err = d1.Update(ctx, func(tx kvstore.Txn) error {
		tx.Set(dirKey("h"), []byte("h"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("failing update: %v", err)
	}
	err = d1.View(ctx, func(tx kvstore.Txn) error {
		if got, err := scanString(tx, dirKey(""), dirKey("\xff"), 0); err != nil || strings.Contains(got, "h=") {
			return fmt.Errorf("after a failed update: %q, %v", got, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// scanString renders a scan of directory 7 as "name=value ...".
func scanString(tx kvstore.Txn, begin, end []byte, limit int) (string, error) {
	ps, err := tx.Scan(begin, end, limit)
	var parts []string
	for _, p := range ps {
		parts = append(parts, string(p.Key[len(dirKey("")):])+"="+string(p.Value))
	}
	return strings.Join(parts, " "), err
}

// TestEvictionPolicy checks that Open refuses a server that may evict keys.
func TestEvictionPolicy(t *testing.T) {
	raw := freshURL(t, testserver.Redis)
	ctx := context.Background()
	d := openDB(t, raw)
	node, err := nodeOf(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	// A client of its own, since d closes before the cleanup runs.
	node = redis.NewClient(node.Options())
	d.Close()
	defer node.Close()
	old, err := node.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		testserver.Missing(t, fmt.Sprintf("CONFIG GET on the test server (%v)", err), "the test changes maxmemory-policy; use a server that allows CONFIG")
	}
	defer func() {
		if err := node.ConfigSet(ctx, "maxmemory-policy", old["maxmemory-policy"]).Err(); err != nil {
			t.Errorf("restore maxmemory-policy: %v", err)
		}
	}()
	for policy, refused := range map[string]bool{"allkeys-lru": true, "allkeys-random": true, "volatile-lru": false, "noeviction": false} {
		if err := node.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
		d, err := Open(ctx, raw, false)
		if err == nil {
			d.Close()
		}
		switch {
		case refused && (err == nil || !strings.Contains(err.Error(), "maxmemory-policy "+policy)):
			t.Errorf("open with %s: %v, want a refusal naming the policy", policy, err)
		case !refused && err != nil:
			t.Errorf("open with %s: %v", policy, err)
		}
	}
}

// TestOpenErrors checks that each kind of bad URL or server gives a clear
// one-line error that never shows the password.
func TestOpenErrors(t *testing.T) {
	const secret = "s3cr3t-pw"
	cases := []struct{ url, want string }{
		{"redis://", "no host"},
		{"127.0.0.1:6379", "expected redis://"},
		{"redis://:" + secret + "@/0", "no host"},
		{"redis:///1", "no host"},
		{"http://127.0.0.1:6379/0", "not redis or rediss"},
		{"redis://:" + secret + "@127.0.0.1:notaport/0", "malformed Redis URL"},
		{"redis://:" + secret + "@127.0.0.1:6379/x", `bad database number "x"`},
		{"redis://127.0.0.1:6379/-1", `bad database number "-1"`},
		{"redis://127.0.0.1:6379/1/2", `bad database number "1/2"`},
		{"redis://127.0.0.1:1,127.0.0.1:2/3", "Redis Cluster has only database 0"},
		{"redis://127.0.0.1:6379/0?prefix=a{b}", "bad prefix"},
		{"redis://127.0.0.1:6379/0?prefix=", "bad prefix"},
		{"redis://127.0.0.1:6379/0?pool=3", `unknown Redis URL parameter "pool"`},
		{"redis://127.0.0.1:6379/0?prefix=%zz", "malformed Redis URL query"},
	}
	// A closed port refuses connections at once.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	cases = append(cases, struct{ url, want string }{"redis://:" + secret + "@" + closed + "/0", "cannot reach Redis at " + closed + ": dial tcp"})
	// A server that accepts but never answers must not hang Open.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	go func() {
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	cases = append(cases, struct{ url, want string }{"redis://" + mute.Addr().String() + "/0", "cannot reach Redis at " + mute.Addr().String() + ": no answer"})

	defer func(old time.Duration) { openTimeout = old }(openTimeout)
	openTimeout = time.Second
	check := func(t *testing.T, raw, want string) {
		t.Helper()
		start := time.Now()
		d, err := Open(context.Background(), raw, false)
		if err == nil {
			d.Close()
			t.Fatalf("open %s succeeded", raw)
		}
		msg := err.Error()
		if !strings.Contains(msg, want) || strings.Contains(msg, "\n") || strings.Contains(msg, secret) {
			t.Fatalf("open %s:\n got %q\nwant one line containing %q and not the password", raw, msg, want)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("open %s took %v", raw, time.Since(start))
		}
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) { check(t, c.url, c.want) })
	}

	t.Run("server", func(t *testing.T) {
		u, err := url.Parse(testserver.URL(t, testserver.Redis))
		if err != nil {
			t.Fatal(err)
		}
		hostURL := func(user *url.Userinfo, path string) string {
			v := *u
			v.User, v.Path = user, path
			return v.String()
		}
		check(t, hostURL(url.UserPassword("nobody", secret), "/0"), "authentication to Redis")
		// Without a password in the URL, REDIS_PASSWORD is used.
		t.Setenv("REDIS_PASSWORD", secret)
		check(t, hostURL(url.User("nobody"), "/0"), "authentication to Redis")
		t.Setenv("REDIS_PASSWORD", "")
		check(t, hostURL(u.User, "/100000"), "bad database number 100000")
	})
	t.Run("cluster", func(t *testing.T) {
		u, err := url.Parse(testserver.URL(t, testserver.RedisCluster))
		if err != nil {
			t.Fatal(err)
		}
		one, _, _ := strings.Cut(u.Host, ",")
		v := *u
		v.Host, v.Path = one, "/1"
		check(t, v.String(), "Redis Cluster has only database 0")
		// One address of a cluster node opens the whole cluster.
		v.Path = "/0"
		d, err := Open(context.Background(), v.String(), false)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if _, ok := d.c.(*redis.ClusterClient); !ok {
			t.Fatalf("one cluster node opened as %T", d.c)
		}
	})
}

func TestName(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://u:pw@h:1/2?prefix=v":          "redis://u@h:1/2?prefix=v",
		"rediss://:pw@h/0":                     "rediss://h:6379/0",
		"redis://a:1,b:2,[::1]:3":              "redis://a:1,b:2,[::1]:3/0",
		"redis://[::1]/3?prefix=sluice":        "redis://[::1]:6379/3",
		"redis://h:7/0?prefix=vol%2Ftwo":       "redis://h:7/0?prefix=vol%2Ftwo",
		"redis://user@h:7/0?prefix=a&prefix=b": "redis://user@h:7/0?prefix=b",
	} {
		o, err := parseURL(raw)
		if err != nil {
			t.Errorf("parse %s: %v", raw, err)
			continue
		}
		if got := o.String(); got != want {
			t.Errorf("name of %s: %s, want %s", raw, got, want)
		}
	}
}

func TestScanGroup(t *testing.T) {
	ino := "\x00\x00\x00\x00\x00\x00\x01\x02"
	sid := "\x00\x00\x00\x00\x00\x00\x00\x09"
	cases := []struct{ key, group string }{
		{"A" + ino + "D", "A" + ino + "D"},
		{"A" + ino + "Dname", "A" + ino + "D"},
		{"A" + ino + "D" + "\xff\x00", "A" + ino + "D"},
		{"A" + ino + "Xuser.mime", "A" + ino + "X"},
		{"A" + ino + "C\x00\x00\x00\x05", "A" + ino + "C"},
		{"A" + ino + "F" + sid + ino, "A" + ino + "F"},
		{"A" + ino + "P" + sid + ino, "A" + ino + "P"},
		{"A" + ino + "I", ""},
		{"A" + ino + "S", ""},
		{"A" + ino, ""},
		{"A", ""},
		{"N", "N"},
		{"N" + sid, "N"},
		{"O" + sid, "O" + sid},
		{"O" + sid + ino, "O" + sid},
		{"O\x00", ""},
		{"Q" + sid, "Q" + sid},
		{"Q" + sid + ino, "Q" + sid},
		{"Q", ""},
		{"D", "D"},
		{"D" + ino + "\x00\x00\x00\x00\x00\x00\x10\x00", "D"},
		{"L" + ino + "\x00\x00\x10\x00", "L"},
		{"K" + ino + "\x00\x00\x10\x00", ""},
		{"Z" + ino, "Z"}, // an unknown family is indexed as a whole
		{"CnextInode", ""},
		{"S", ""},
		{"", ""},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%q", c.key), func(t *testing.T) {
			if got := string(scanGroup([]byte(c.key))); got != c.group {
				t.Fatalf("scanGroup(%q) = %q, want %q", c.key, got, c.group)
			}
		})
	}
	for g, end := range map[string]string{"N": "O", "A" + ino + "D": "A" + ino + "E", "O\x00\xff\xff": "O\x01"} {
		if got := string(groupEnd([]byte(g))); got != end {
			t.Errorf("groupEnd(%q) = %q, want %q", g, got, end)
		}
	}
}

// openDBNoCache opens a handle without the cache (package kvcache), for
// tests of what the handle does without it: the round trips it makes
// through the pool, the guesses it starts transactions from.
func openDBNoCache(t testing.TB, raw string) *DB {
	t.Helper()
	d := openDB(t, raw)
	d.DisableCache()
	return d
}
