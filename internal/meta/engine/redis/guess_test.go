package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// TestGuesses checks the values an Update takes from what its handle read
// recently: a stale one fails the commit, or the function's own error,
// with a conflict, and the retry reads the server.
func TestGuesses(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) { testGuesses(t, freshURL(t, s.env)) })
	}
}

func testGuesses(t *testing.T, raw string) {
	ctx := context.Background()
	d1, d2 := openDBNoCache(t, raw), openDBNoCache(t, raw)
	defer d1.Close()
	defer d2.Close()
	trips, tctx := countTrips(t, ctx, d1)
	set := func(d *DB, k []byte, v string) {
		t.Helper()
		if err := d.Update(ctx, func(tx kvstore.Txn) error { tx.Set(k, []byte(v)); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	view := func(k []byte) {
		t.Helper()
		if err := d1.View(tctx, func(tx kvstore.Txn) error { _, err := tx.Get(k); return err }); err != nil {
			t.Fatal(err)
		}
	}
	// update reads k and, when it holds old, replaces it with new; it
	// returns the round trips it took.
	update := func(k []byte, old, new string) (int64, error) {
		before := trips.n.Load()
		err := d1.Update(tctx, func(tx kvstore.Txn) error {
			v, err := tx.Get(k)
			if err != nil {
				return err
			}
			if string(v) != old {
				return fmt.Errorf("read %q, want %q: %w", v, old, syscall.ESTALE)
			}
			tx.Set(k, []byte(new))
			return nil
		})
		return trips.n.Load() - before, err
	}
	big := string(bytes.Repeat([]byte("x"), 3*hashAbove)) // checked by its hash

	for _, v := range []string{"v1", big} {
		k := dirKey("k-" + v[:1])
		set(d1, k, v)
		// A fresh guess saves the read: the commit is the only round trip.
		view(k)
		if n, err := update(k, v, v+"2"); err != nil || n != 1 {
			t.Fatalf("update after a view: %d round trips, %v; want 1, nil", n, err)
		}
		// A guess made stale by another handle fails the commit.
		view(k)
		set(d2, k, v+"3")
		if _, err := update(k, v+"2", v+"4"); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("update from a stale guess: %v, want a conflict", err)
		}
		// The retry reads the server.
		if n, err := update(k, v+"3", v+"4"); err != nil || n != 2 {
			t.Fatalf("update after a conflict: %d round trips, %v; want 2, nil", n, err)
		}
		// An error decided on a stale guess becomes a conflict too...
		view(k)
		set(d2, k, v+"5")
		if _, err := update(k, v+"4", v+"6"); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("update that would have succeeded but for a stale guess: %v, want a conflict", err)
		}
		view(k)
		set(d2, k, v+"4")
		if _, err := update(k, v+"4", v+"6"); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("error decided on a stale guess: %v, want a conflict", err)
		}
		// ...while one decided on a current guess stays the caller's.
		view(k)
		if _, err := update(k, "other", v+"6"); !errors.Is(err, syscall.ESTALE) {
			t.Fatalf("error decided on a current guess: %v, want ESTALE", err)
		}
	}
}

// TestFollow checks GetFollow: reading a directory entry and the node
// record it names takes one round trip, and the node counts as a read of
// the transaction, checked at commit.
func TestFollow(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) { testFollow(t, freshURL(t, s.env)) })
	}
}

func testFollow(t *testing.T, raw string) {
	ctx := context.Background()
	d1, d2 := openDBNoCache(t, raw), openDBNoCache(t, raw)
	defer d1.Close()
	defer d2.Close()
	trips, tctx := countTrips(t, ctx, d1)
	ino := "\x00\x00\x00\x00\x00\x00\x00\x2a"
	node := []byte("A" + ino + "I")
	entries := map[string]string{
		"file":  "\x01" + ino, // names node
		"other": "\x01\x00\x00\x00\x00\x00\x00\x00\x63",
		"short": "\x01" + ino[:7], // not an entry's value: nothing to follow
	}
	err := d2.Update(ctx, func(tx kvstore.Txn) error {
		for name, v := range entries {
			tx.Set(dirKey(name), []byte(v))
		}
		tx.Set(node, []byte("node 42"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	getFollow := func(tx kvstore.Txn, entry string) ([]byte, []byte, error) {
		vals, next, err := tx.(kvstore.Follower).GetFollow([][]byte{dirKey(entry)}, []bool{true}, kvstore.EntryFollow)
		if err != nil {
			return nil, nil, err
		}
		return vals[0], next[0], nil
	}
	cases := []struct {
		entry string
		node  string // "" for none
	}{
		{"file", "node 42"},
		{"other", ""}, // followed to a missing node
		{"short", ""},
		{"missing", ""},
	}
	for _, c := range cases {
		t.Run(c.entry, func(t *testing.T) {
			before := trips.n.Load()
			err := d1.View(tctx, func(tx kvstore.Txn) error {
				e, n, err := getFollow(tx, c.entry)
				if err != nil || string(e) != entries[c.entry] || string(n) != c.node {
					return fmt.Errorf("entry %q, node %q, %v; want %q, %q", e, n, err, entries[c.entry], c.node)
				}
				// The node is known to the transaction now.
				if n != nil {
					if again, err := tx.Get(node); err != nil || string(again) != c.node {
						return fmt.Errorf("node read again: %q, %v", again, err)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := trips.n.Load() - before; got != 1 {
				t.Errorf("%d round trips, want 1", got)
			}
		})
	}
	// In an Update, the node followed is checked at commit.
	err = d1.Update(tctx, func(tx kvstore.Txn) error {
		if _, _, err := getFollow(tx, "file"); err != nil {
			return err
		}
		if err := d2.Update(ctx, func(tx kvstore.Txn) error { tx.Set(node, []byte("node 42 changed")); return nil }); err != nil {
			return err
		}
		tx.Set(dirKey("new"), []byte("x"))
		return nil
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("followed node changed before the commit: %v, want a conflict", err)
	}
	// A plain read of an entry follows nothing.
	before := trips.n.Load()
	err = d1.View(tctx, func(tx kvstore.Txn) error {
		if _, err := tx.Get(dirKey("file")); err != nil {
			return err
		}
		_, err := tx.Get(node)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := trips.n.Load() - before; got != 2 {
		t.Errorf("Get of an entry, then of its node: %d round trips, want 2", got)
	}
}

// TestLargeTransaction commits transactions with more keys in each part
// of commitScript than one command of the script takes.
func TestLargeTransaction(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) { testLargeTransaction(t, freshURL(t, s.env)) })
	}
}

func testLargeTransaction(t *testing.T, raw string) {
	ctx := context.Background()
	d1, d2 := openDBNoCache(t, raw), openDBNoCache(t, raw)
	defer d1.Close()
	defer d2.Close()
	const n = 2500
	name := func(p string, i int) []byte { return dirKey(fmt.Sprintf("%s%05d", p, i)) }
	err := d1.Update(ctx, func(tx kvstore.Txn) error { // blind: MULTI/EXEC
		for i := range n {
			tx.Set(name("a", i), []byte{byte(i)})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// move renames every "a" key to a "b" key, after reading them all;
	// meanwhile, if not nil, runs on the way.
	move := func(meanwhile func() error) error {
		return d1.Update(ctx, func(tx kvstore.Txn) error {
			ps, err := tx.Scan(dirKey(""), dirKey("\xff"), 0)
			if err != nil {
				return err
			}
			if len(ps) != n {
				return fmt.Errorf("scanned %d keys, want %d", len(ps), n)
			}
			for i, p := range ps {
				tx.Delete(p.Key)
				tx.Set(name("b", i), p.Value)
			}
			if meanwhile != nil {
				return meanwhile()
			}
			return nil
		})
	}
	// A change of a key past the first 1000 checked is a conflict.
	err = move(func() error {
		return d2.Update(ctx, func(tx kvstore.Txn) error { tx.Set(name("a", n-1), []byte("changed")); return nil })
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("large update after a concurrent change: %v, want a conflict", err)
	}
	if err := move(nil); err != nil {
		t.Fatal(err)
	}
	err = d2.View(ctx, func(tx kvstore.Txn) error {
		ps, err := tx.Scan(dirKey(""), dirKey("\xff"), 0)
		if err != nil {
			return err
		}
		if len(ps) != n || string(ps[0].Key) != string(name("b", 0)) || string(ps[n-1].Value) != "changed" {
			return fmt.Errorf("after the move: %d keys, first %q, last value %q", len(ps), ps[0].Key, ps[len(ps)-1].Value)
		}
		for i := range n {
			if v, err := tx.Get(name("a", i)); err != nil || v != nil {
				return fmt.Errorf("moved key %d: %q, %v", i, v, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
