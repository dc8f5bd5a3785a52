// Package kvtest is the contract test every kvstore.DB adapter runs, below
// the typed transaction: read-your-writes, rollback, writes refused in
// View, and a conflict for every way another transaction can change what
// one read; snapshot reads where the adapter promises them (Options), and
// phantom conflicts unless it declares it misses them
// (store.Limits.MissesPhantoms).
package kvtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// errNoAppend stops the Append test on an adapter without the ability.
var errNoAppend = errors.New("no kvstore.Appender")

// errNoAdd stops the Add test on an adapter without the ability.
var errNoAdd = errors.New("no kvstore.Adder")

// Options says which guarantees beyond the common contract an adapter
// gives (see package store's doc for which engine gives which).
type Options struct {
	// Snapshot: every read of one View sees the same committed state.
	Snapshot bool
	// Blind: the adapter's Txn implements kvstore.Appender and
	// kvstore.Adder. Their tests run only then, and fail when the
	// adapter declares them but its Txn does not have them, or has them
	// without declaring them.
	Blind bool
}

// skipUndeclared skips a case of an ability (name) the adapter does not
// declare, and fails it when the adapter's Txn has the ability all the
// same (has): kvstore would use it untested.
func skipUndeclared(t *testing.T, db kvstore.DB, name string, has func(kvstore.Txn) bool) {
	t.Helper()
	var found bool
	if err := db.View(context.Background(), func(tx kvstore.Txn) error {
		found = has(tx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if found {
		t.Fatalf("the adapter's Txn implements %s but the adapter does not declare it (set Options.Blind)", name)
	}
	t.Skipf("the adapter does not implement %s (Options.Blind is false)", name)
}

// Run checks the adapter contract below kvstore: read-your-writes,
// rollback, writes refused in View, and conflicts for every way another
// transaction can change what one read. Phantoms (a key inserted into a
// scanned range) must conflict unless the DB declares, through
// kvstore.Limiter, that it misses them, and must not otherwise: the
// declaration the core plans with is checked here. A View must read one
// snapshot when opts say so, and appends and adds (kvstore.Appender,
// kvstore.Adder) are checked when opts declare them.
//
// Every key the test uses starts with "t", and every range it scans lies
// inside [t, u): kvstore scans only inside one record family (see the key
// layout), and an adapter may rely on that (redis does).
//
// newDB must return an empty database each time it is called.
func Run(t *testing.T, newDB func(t *testing.T) kvstore.DB, opts Options) {
	ctx := context.Background()
	k := func(s string) []byte { return []byte("t" + s) }
	all := []byte("u") // ends every range of test keys
	set := func(t *testing.T, db kvstore.DB, kvs ...string) {
		t.Helper()
		if err := db.Update(ctx, func(tx kvstore.Txn) error {
			for i := 0; i < len(kvs); i += 2 {
				tx.Set(k(kvs[i]), []byte(kvs[i+1]))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	keys := func(ps []kvstore.Pair) string {
		var b bytes.Buffer
		for _, p := range ps {
			fmt.Fprintf(&b, "%s=%s ", bytes.TrimPrefix(p.Key, []byte("t")), p.Value)
		}
		return b.String()
	}

	// stored checks what a View scans of the test keys, as format shows it.
	stored := func(t *testing.T, db kvstore.DB, format func([]kvstore.Pair) string, want string) {
		t.Helper()
		if err := db.View(ctx, func(tx kvstore.Txn) error {
			ps, err := tx.Scan(k(""), all, 0)
			if got := format(ps); err != nil || got != want {
				return fmt.Errorf("after commit: %s, %v; want %s", got, err, want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("ReadYourWrites", func(t *testing.T) {
		db := newDB(t)
		set(t, db, "a", "1", "b", "2", "c", "3", "e", "")
		err := db.Update(ctx, func(tx kvstore.Txn) error {
			tx.Delete(k("b"))
			tx.Set(k("d"), []byte("4"))
			tx.Set(k("a"), []byte("9"))
			if v, err := tx.Get(k("b")); err != nil || v != nil {
				return fmt.Errorf("deleted b reads %q, %v", v, err)
			}
			if v, err := tx.Get(k("e")); err != nil || v == nil || len(v) != 0 {
				return fmt.Errorf("empty e reads %v, %v", v, err)
			}
			vs, err := tx.GetMany([][]byte{k("a"), k("b"), k("d"), k("x"), k("e")})
			if err != nil || string(vs[0]) != "9" || vs[1] != nil || string(vs[2]) != "4" || vs[3] != nil || vs[4] == nil {
				return fmt.Errorf("GetMany: %q, %v", vs, err)
			}
			ps, err := tx.Scan(k(""), all, 0)
			if got := keys(ps); err != nil || got != "a=9 c=3 d=4 e= " {
				return fmt.Errorf("Scan: %s, %v", got, err)
			}
			ps, err = tx.Scan(k("a"), k("d"), 2)
			if got := keys(ps); err != nil || got != "a=9 c=3 " {
				return fmt.Errorf("Scan with limit: %s, %v", got, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.View(ctx, func(tx kvstore.Txn) error {
			ps, err := tx.Scan(k("a"), all, 0)
			if got := keys(ps); err != nil || got != "a=9 c=3 d=4 e= " {
				return fmt.Errorf("after commit: %s, %v", got, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("RollbackOnError", func(t *testing.T) {
		db := newDB(t)
		boom := errors.New("boom")
		if err := db.Update(ctx, func(tx kvstore.Txn) error { tx.Set(k("a"), []byte("1")); return boom }); !errors.Is(err, boom) {
			t.Fatalf("Update returned %v", err)
		}
		db.View(ctx, func(tx kvstore.Txn) error {
			if v, _ := tx.Get(k("a")); v != nil {
				t.Errorf("failed transaction left a=%q", v)
			}
			return nil
		})
	})

	t.Run("ManyKeys", func(t *testing.T) {
		db := newDB(t)
		var all [][]byte
		for i := range 300 {
			all = append(all, k(fmt.Sprintf("k%04d", i)))
		}
		for i := 0; i < len(all); i += 50 {
			if err := db.Update(ctx, func(tx kvstore.Txn) error {
				for _, key := range all[i : i+50] {
					tx.Set(key, key)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.View(ctx, func(tx kvstore.Txn) error {
			vs, err := tx.GetMany(append(all, k("missing")))
			if err != nil {
				return err
			}
			for i, v := range vs[:len(all)] {
				if !bytes.Equal(v, all[i]) {
					return fmt.Errorf("key %s reads %q", all[i], v)
				}
			}
			if vs[len(all)] != nil {
				return fmt.Errorf("missing key reads %q", vs[len(all)])
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("WriteInView", func(t *testing.T) {
		db := newDB(t)
		if err := db.View(ctx, func(tx kvstore.Txn) error { tx.Set(k("a"), []byte("1")); return nil }); err == nil {
			t.Fatal("a write in View succeeded")
		}
	})

	// Each case runs one transaction (outer) and, in the middle of it,
	// another one (inner) that commits first. The outer one then writes a
	// key nobody else touches, so any conflict comes from what it read.
	// wantConflict tells whether it must fail with store.ErrConflict.
	cases := []struct {
		name         string
		seed         []string
		outer        func(tx kvstore.Txn) error
		inner        func(tx kvstore.Txn)
		wantConflict bool
	}{
		{"ChangedRead", []string{"x", "1"},
			func(tx kvstore.Txn) error { _, err := tx.Get(k("x")); return err },
			func(tx kvstore.Txn) { tx.Set(k("x"), []byte("2")) }, true},
		{"CreatedRead", nil,
			func(tx kvstore.Txn) error { _, err := tx.Get(k("x")); return err },
			func(tx kvstore.Txn) { tx.Set(k("x"), []byte("2")) }, true},
		{"DeletedRead", []string{"x", "1"},
			func(tx kvstore.Txn) error { _, err := tx.GetMany([][]byte{k("w"), k("x")}); return err },
			func(tx kvstore.Txn) { tx.Delete(k("x")) }, true},
		{"Unrelated", []string{"x", "1"},
			func(tx kvstore.Txn) error { _, err := tx.Get(k("x")); return err },
			func(tx kvstore.Txn) { tx.Set(k("y"), []byte("2")) }, false},
		{"Phantom", []string{"d1", "1"},
			func(tx kvstore.Txn) error { _, err := tx.Scan(k("d"), k("e"), 0); return err },
			func(tx kvstore.Txn) { tx.Set(k("d2"), []byte("2")) }, true}, // unless MissesPhantoms
		{"DeletedInScan", []string{"d1", "1", "d2", "2"},
			func(tx kvstore.Txn) error { _, err := tx.Scan(k("d"), k("e"), 0); return err },
			func(tx kvstore.Txn) { tx.Delete(k("d2")) }, true},
		{"BeyondScanLimit", []string{"d1", "1", "d2", "2"},
			func(tx kvstore.Txn) error { _, err := tx.Scan(k("d"), k("e"), 1); return err },
			func(tx kvstore.Txn) { tx.Set(k("d3"), []byte("3")); tx.Delete(k("d2")) }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := newDB(t)
			if c.seed != nil {
				set(t, db, c.seed...)
			}
			want := c.wantConflict
			if c.name == "Phantom" && store.LimitsOf(kvstore.New(db)).MissesPhantoms {
				want = false
			}
			err := db.Update(ctx, func(tx kvstore.Txn) error {
				if err := c.outer(tx); err != nil {
					return err
				}
				if err := db.Update(ctx, func(tx kvstore.Txn) error { c.inner(tx); return nil }); err != nil {
					return fmt.Errorf("inner transaction: %w", err)
				}
				tx.Set(k("out"), []byte("1"))
				return nil
			})
			if want && !errors.Is(err, store.ErrConflict) {
				t.Fatalf("outer transaction returned %v, want a conflict", err)
			}
			if !want && err != nil {
				t.Fatalf("outer transaction: %v", err)
			}
		})
	}

	t.Run("Snapshot", func(t *testing.T) {
		if !opts.Snapshot {
			t.Skip("the adapter's View reads each call afresh (Options.Snapshot is false)")
		}
		db := newDB(t)
		set(t, db, "x", "1", "y", "1")
		err := db.View(ctx, func(tx kvstore.Txn) error {
			if _, err := tx.Get(k("x")); err != nil {
				return err
			}
			set(t, db, "x", "2", "y", "2")
			vs, err := tx.GetMany([][]byte{k("x"), k("y")})
			if err != nil || string(vs[0]) != "1" || string(vs[1]) != "1" {
				return fmt.Errorf("View saw %q after a concurrent commit, want its snapshot (%v)", vs, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Append", func(t *testing.T) {
		db := newDB(t)
		if !opts.Blind {
			skipUndeclared(t, db, "kvstore.Appender", func(tx kvstore.Txn) bool { _, ok := tx.(kvstore.Appender); return ok })
		}
		set(t, db, "a", "1", "b", "2", "c", "3", "x", "7")
		appendTo := func(tx kvstore.Txn, key, suffix string) error {
			a, ok := tx.(kvstore.Appender)
			if !ok {
				return errNoAppend
			}
			a.Append(k(key), []byte(suffix))
			return nil
		}
		get := func(tx kvstore.Txn, key, want string) error {
			v, err := tx.Get(k(key))
			if err != nil || string(v) != want {
				return fmt.Errorf("%s reads %q, %v; want %q", key, v, err, want)
			}
			return nil
		}
		err := db.Update(ctx, func(tx kvstore.Txn) error {
			for _, a := range [][2]string{{"a", "x"}, {"n", "y"}, {"n", "z"}, {"m", "1"}, {"b", "p"}, {"x", "8"}, {"w", "9"}} {
				if err := appendTo(tx, a[0], a[1]); err != nil {
					return err
				}
			}
			tx.Set(k("b"), []byte("s")) // replaces what was appended
			tx.Delete(k("c"))
			for _, a := range [][2]string{{"b", "t"}, {"c", "u"}} {
				if err := appendTo(tx, a[0], a[1]); err != nil {
					return err
				}
			}
			if err := get(tx, "b", "st"); err != nil {
				return err
			}
			if err := get(tx, "a", "1x"); err != nil {
				return err
			}
			if err := appendTo(tx, "a", "q"); err != nil { // after a read
				return err
			}
			// m, n, w and x stay appended, unread, to the commit.
			ps, err := tx.Scan(k(""), k("d"), 0)
			if got := keys(ps); err != nil || got != "a=1xq b=st c=u " {
				return fmt.Errorf("Scan: %s, %v", got, err)
			}
			return nil
		})
		if errors.Is(err, errNoAppend) {
			t.Fatal("Options.Blind is set, but the adapter's Txn does not implement kvstore.Appender")
		}
		if err != nil {
			t.Fatal(err)
		}
		check := func(want string) {
			t.Helper()
			stored(t, db, keys, want)
		}
		check("a=1xq b=st c=u m=1 n=yz w=9 x=78 ")

		// Appends read nothing: a concurrent change of the key is no
		// conflict, and both apply in commit order.
		runs := 0
		err = db.Update(ctx, func(tx kvstore.Txn) error {
			runs++
			if err := appendTo(tx, "n", "2"); err != nil {
				return err
			}
			if runs == 1 {
				return db.Update(ctx, func(tx kvstore.Txn) error { return appendTo(tx, "n", "1") })
			}
			return nil
		})
		if err != nil || runs != 1 {
			t.Fatalf("blind append: %v after %d runs", err, runs)
		}
		check("a=1xq b=st c=u m=1 n=yz12 w=9 x=78 ")

		// A failed transaction appends nothing; a View cannot append.
		boom := errors.New("boom")
		if err := db.Update(ctx, func(tx kvstore.Txn) error {
			if err := appendTo(tx, "a", "!"); err != nil {
				return err
			}
			return boom
		}); !errors.Is(err, boom) {
			t.Fatalf("Update returned %v", err)
		}
		if err := db.View(ctx, func(tx kvstore.Txn) error { return appendTo(tx, "a", "!") }); err == nil {
			t.Error("a View appended without an error")
		}
		check("a=1xq b=st c=u m=1 n=yz12 w=9 x=78 ")
	})

	t.Run("Add", func(t *testing.T) {
		db := newDB(t)
		if !opts.Blind {
			skipUndeclared(t, db, "kvstore.Adder", func(tx kvstore.Txn) bool { _, ok := tx.(kvstore.Adder); return ok })
		}
		num := func(n int64) string { return string(binary.BigEndian.AppendUint64(nil, uint64(n))) }
		set(t, db, "c", num(5), "bad", "xyz")
		add := func(tx kvstore.Txn, key string, delta int64) error {
			a, ok := tx.(kvstore.Adder)
			if !ok {
				return errNoAdd
			}
			a.Add(k(key), delta)
			return nil
		}
		adds := func(tx kvstore.Txn, kds ...any) error {
			for i := 0; i < len(kds); i += 2 {
				if err := add(tx, kds[i].(string), int64(kds[i+1].(int))); err != nil {
					return err
				}
			}
			return nil
		}
		sums := func(ps []kvstore.Pair) string {
			var b bytes.Buffer
			for _, p := range ps {
				if len(p.Value) == 8 {
					fmt.Fprintf(&b, "%s=%d ", bytes.TrimPrefix(p.Key, []byte("t")), int64(binary.BigEndian.Uint64(p.Value)))
				} else {
					fmt.Fprintf(&b, "%s=%q ", bytes.TrimPrefix(p.Key, []byte("t")), p.Value)
				}
			}
			return b.String()
		}
		check := func(want string) {
			t.Helper()
			stored(t, db, sums, want)
		}
		err := db.Update(ctx, func(tx kvstore.Txn) error {
			// c and z stay unread to the commit; y goes negative; w and
			// v reach 0, which deletes them.
			tx.Set(k("w"), []byte(num(1)))
			if err := adds(tx, "c", 2, "c", 3, "z", 7, "y", -1, "w", -1, "v", 4); err != nil {
				return err
			}
			if v, err := tx.Get(k("v")); err != nil || string(v) != num(4) {
				return fmt.Errorf("v reads %q, %v after adding 4", v, err)
			}
			return adds(tx, "v", -4)
		})
		if errors.Is(err, errNoAdd) {
			t.Fatal("Options.Blind is set, but the adapter's Txn does not implement kvstore.Adder")
		}
		if err != nil {
			t.Fatal(err)
		}
		check(`bad="xyz" c=10 y=-1 z=7 `)

		// Adds read nothing: a concurrent add is no conflict.
		runs := 0
		err = db.Update(ctx, func(tx kvstore.Txn) error {
			runs++
			if err := adds(tx, "c", 1, "z", -7); err != nil {
				return err
			}
			if runs == 1 {
				return db.Update(ctx, func(tx kvstore.Txn) error { return adds(tx, "c", 1) })
			}
			return nil
		})
		if err != nil || runs != 1 {
			t.Fatalf("blind add: %v after %d runs", err, runs)
		}
		check(`bad="xyz" c=12 y=-1 `)

		// A value that is no counter fails the transaction, which then
		// writes nothing.
		if err := db.Update(ctx, func(tx kvstore.Txn) error {
			tx.Set(k("q"), []byte("1"))
			return adds(tx, "c", 1, "bad", 1)
		}); err == nil {
			t.Error("adding to a 3-byte value committed")
		}
		check(`bad="xyz" c=12 y=-1 `)
	})

	t.Run("WriteSkew", func(t *testing.T) {
		// Each transaction reads both keys and writes one: run serially
		// they cannot both succeed unchanged.
		db := newDB(t)
		set(t, db, "x", "0", "y", "0")
		read := func(tx kvstore.Txn) error {
			_, err := tx.GetMany([][]byte{k("x"), k("y")})
			return err
		}
		err := db.Update(ctx, func(tx kvstore.Txn) error {
			if err := read(tx); err != nil {
				return err
			}
			if err := db.Update(ctx, func(tx kvstore.Txn) error {
				if err := read(tx); err != nil {
					return err
				}
				tx.Set(k("y"), []byte("1"))
				return nil
			}); err != nil {
				return err
			}
			tx.Set(k("x"), []byte("1"))
			return nil
		})
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("write skew committed: %v", err)
		}
	})
}
