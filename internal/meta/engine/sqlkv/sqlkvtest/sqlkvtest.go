// Package sqlkvtest holds the tests every SQL engine runs beyond metatest:
// fresh namespaces in a shared server database (a random table_prefix per
// store, dropped when the test ends), the key-value contract of one handle
// of the older key-value layout (KV), serializability across handles
// (Races), and that Open still serves that layout (KVLayout).
package sqlkvtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta/engine/sqlkv"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// Opener opens an engine's database at url in the key-value layout (the
// engine's OpenKV).
type Opener func(ctx context.Context, url string, create bool) (*sqlkv.DB, error)

// StoreOpener opens the volume at url (the engine's Open).
type StoreOpener func(ctx context.Context, url string, create bool) (store.Store, error)

// Engine is a SQL engine's two ways of opening a volume.
type Engine struct {
	Open   StoreOpener
	OpenKV Opener
}

// WithParam returns url with the query parameter key=value added.
func WithParam(url, key, value string) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + key + "=" + value
}

// FreshURL returns base with a new random table_prefix; the tables are
// dropped when t ends (after cleanups registered later, such as closing
// the handles opened on them).
func FreshURL(t testing.TB, e Engine, base string) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	u := WithParam(base, "table_prefix", "t"+hex.EncodeToString(b[:])+"_")
	t.Cleanup(func() {
		// The key-value table first: Open serves it when it exists.
		ctx := context.Background()
		db, err := e.OpenKV(ctx, u, true)
		if err != nil {
			t.Errorf("open to drop the tables: %v", err)
			return
		}
		err = db.Drop(ctx)
		db.Close()
		if err != nil {
			t.Errorf("drop table: %v", err)
			return
		}
		st, err := e.Open(ctx, u, true)
		if err != nil {
			t.Errorf("open to drop the tables: %v", err)
			return
		}
		defer st.Close()
		d, ok := st.(interface{ Drop(context.Context) error })
		if !ok {
			t.Errorf("cannot drop the tables of a %T", st)
			return
		}
		if err := d.Drop(ctx); err != nil {
			t.Errorf("drop tables: %v", err)
		}
	})
	return u
}

// Silent returns the address of a TCP server that accepts connections and
// never answers, to check that connecting gives up.
func Silent(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// Open opens url with open, failing t on error; the handle is closed when
// t ends.
func Open(t testing.TB, open Opener, url string, create bool) *sqlkv.DB {
	t.Helper()
	db, err := open(context.Background(), url, create)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Store opens an empty volume of its own in the database at base, for
// metatest.Run and metatest.Bench; the caller closes the store.
func Store(tb testing.TB, e Engine, base string) store.Store {
	tb.Helper()
	st, err := e.Open(context.Background(), FreshURL(tb, e, base), true)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	return st
}

// StoreKV is Store in the key-value layout, to compare the layouts.
func StoreKV(tb testing.TB, e Engine, base string) store.Store {
	tb.Helper()
	db, err := e.OpenKV(context.Background(), FreshURL(tb, e, base), true)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	return kvstore.New(db)
}

// OpenStore opens the volume at url with e, failing t on error; the store
// is closed when t ends.
func OpenStore(t testing.TB, e Engine, url string, create bool) store.Store {
	t.Helper()
	st, err := e.Open(context.Background(), url, create)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// KVLayout checks that a volume in the key-value layout (made with
// OpenKV) is served by Open, through kvstore, and holds what was written.
func KVLayout(t *testing.T, e Engine, base string) {
	ctx := context.Background()
	u := FreshURL(t, e, base)
	db := Open(t, e.OpenKV, u, true)
	if err := kvstore.New(db).Update(ctx, func(tx store.Tx) error {
		tx.SetCounter("c", 42)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	st := OpenStore(t, e, u, false)
	if _, ok := st.(*kvstore.Store); !ok {
		t.Fatalf("a volume in the key-value layout opened as %T", st)
	}
	var v int64
	if err := st.View(ctx, func(tx store.Tx) error {
		var err error
		v, err = tx.Counter("c")
		return err
	}); err != nil || v != 42 {
		t.Fatalf("counter through Open = %d, %v; want 42", v, err)
	}
}

// KV checks the key-value contract of one handle on an empty table: empty
// values, GetMany across several IN batches, ordered and limited scans,
// deletes, and that a failed Update writes nothing.
func KV(t *testing.T, db kvstore.DB) {
	ctx := context.Background()
	const n = 1234 // more than two GetMany batches
	key := func(i int) []byte { return binary.BigEndian.AppendUint32([]byte("kv/"), uint32(i)) }
	err := db.Update(ctx, func(tx kvstore.Txn) error {
		for i := range n {
			tx.Set(key(i), []byte(fmt.Sprint(i)))
		}
		tx.Set([]byte("kv/empty"), nil)
		tx.Set(key(7), []byte("seven")) // replaces
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err = db.Update(ctx, func(tx kvstore.Txn) error {
		tx.Set(key(1), []byte("lost"))
		tx.Delete(key(2))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("failed update returned %v, want %v", err, boom)
	}
	err = db.View(ctx, func(tx kvstore.Txn) error {
		if v, err := tx.Get([]byte("kv/empty")); err != nil || v == nil || len(v) != 0 {
			t.Errorf("empty value: %q, %v; want non-nil empty", v, err)
		}
		if v, err := tx.Get([]byte("kv/missing")); err != nil || v != nil {
			t.Errorf("missing key: %q, %v; want nil", v, err)
		}
		keys := [][]byte{[]byte("kv/missing")}
		for i := n - 1; i >= 0; i-- {
			keys = append(keys, key(i))
		}
		vals, err := tx.GetMany(keys)
		if err != nil || len(vals) != len(keys) {
			t.Fatalf("GetMany: %d values, %v", len(vals), err)
		}
		for j, v := range vals[1:] {
			i := n - 1 - j
			want := fmt.Sprint(i)
			if i == 7 {
				want = "seven"
			}
			if string(v) != want {
				t.Fatalf("GetMany value of key %d = %q, want %q", i, v, want)
			}
		}
		if vals[0] != nil {
			t.Errorf("GetMany of a missing key: %q", vals[0])
		}
		all, err := tx.Scan([]byte("kv/"), []byte("kv0"), 0)
		if err != nil || len(all) != n+1 {
			t.Fatalf("Scan: %d pairs, %v; want %d", len(all), err, n+1)
		}
		for i := 1; i < len(all); i++ {
			if bytes.Compare(all[i-1].Key, all[i].Key) >= 0 {
				t.Fatalf("Scan out of order at %d: %q, %q", i, all[i-1].Key, all[i].Key)
			}
		}
		part, err := tx.Scan(key(10), key(20), 3)
		if err != nil || len(part) != 3 || !bytes.Equal(part[0].Key, key(10)) || !bytes.Equal(part[2].Key, key(12)) {
			t.Errorf("Scan [10, 20) limit 3: %q, %v", part, err)
		}
		tail, err := tx.Scan(key(n-2), nil, 0)
		if err != nil || len(tail) != 3 { // n-2, n-1, "kv/empty"
			t.Errorf("Scan to the end: %d pairs, %v; want 3", len(tail), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(ctx, func(tx kvstore.Txn) error {
		for i := range n {
			tx.Delete(key(i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(ctx, func(tx kvstore.Txn) error {
		left, err := tx.Scan([]byte("kv/"), []byte("kv0"), 0)
		if err != nil || len(left) != 1 {
			t.Errorf("after deleting: %d pairs left, %v; want 1", len(left), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// update runs fn in a write transaction on db until it does not conflict.
func update(ctx context.Context, db kvstore.DB, fn func(kvstore.Txn) error) error {
	for attempt := 1; ; attempt++ {
		err := db.Update(ctx, fn)
		if !errors.Is(err, store.ErrConflict) || attempt == 1000 {
			return err
		}
		// Back off further each time, so that a busy server (InnoDB
		// resolving deadlocks under a loaded CI machine) gets room.
		time.Sleep(time.Duration(mrand.Int64N(int64(min(attempt, 50)) * int64(time.Millisecond))))
	}
}

// Races checks that write transactions on two handles of one empty table
// are serializable: concurrent read-modify-write of one key loses no
// update, and of two transactions that each insert a key into a range
// only if they found it empty, exactly one inserts (no write skew through
// a phantom).
func Races(t *testing.T, db1, db2 kvstore.DB) {
	ctx := context.Background()
	counter := []byte("race/counter")
	if err := db1.Update(ctx, func(tx kvstore.Txn) error {
		tx.Set(counter, binary.BigEndian.AppendUint64(nil, 0))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	const workers, incs, rounds = 4, 25, 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers*incs+2*rounds)
	for _, db := range []kvstore.DB{db1, db2} {
		for range workers {
			wg.Go(func() {
				for range incs {
					errs <- update(ctx, db, func(tx kvstore.Txn) error {
						v, err := tx.Get(counter)
						if err != nil {
							return err
						}
						tx.Set(counter, binary.BigEndian.AppendUint64(nil, binary.BigEndian.Uint64(v)+1))
						return nil
					})
				}
			})
		}
	}
	for r := range rounds {
		prefix := fmt.Appendf(nil, "race/skew/%02d/", r)
		start := make(chan struct{})
		for i, db := range []kvstore.DB{db1, db2} {
			wg.Go(func() {
				<-start
				errs <- update(ctx, db, func(tx kvstore.Txn) error {
					found, err := tx.Scan(prefix, append(bytes.Clone(prefix), 0xff), 0)
					if err == nil && len(found) == 0 {
						tx.Set(fmt.Appendf(bytes.Clone(prefix), "%d", i), []byte("x"))
					}
					return err
				})
			})
		}
		close(start)
	}
	go func() { wg.Wait(); close(errs) }()
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	err := db2.View(ctx, func(tx kvstore.Txn) error {
		v, err := tx.Get(counter)
		if err != nil {
			return err
		}
		if got := binary.BigEndian.Uint64(v); got != 2*workers*incs {
			t.Errorf("counter = %d after %d increments: updates were lost", got, 2*workers*incs)
		}
		for r := range rounds {
			prefix := fmt.Appendf(nil, "race/skew/%02d/", r)
			found, err := tx.Scan(prefix, append(bytes.Clone(prefix), 0xff), 0)
			if err != nil {
				return err
			}
			if len(found) != 1 {
				t.Errorf("round %d: %d inserts into an empty range, want 1", r, len(found))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
