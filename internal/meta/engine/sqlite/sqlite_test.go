package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta/engine/sqlite"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/storetest"
)

func open(t testing.TB, path string, create bool) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), path, create)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return st
}

func TestSuite(t *testing.T) {
	metatest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "meta.db"), true)
	})
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "meta.db"), true)
	}, storetest.Options{})
}

func BenchmarkMeta(b *testing.B) {
	metatest.Bench(b, func(tb testing.TB) store.Store {
		return open(tb, filepath.Join(tb.TempDir(), "meta.db"), true)
	})
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "corrupt.db")
	garbage := []byte(strings.Repeat("this is not a database at all; ", 200))
	if err := os.WriteFile(corrupt, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, create := range []bool{false, true} {
		db, err := sqlite.Open(ctx, corrupt, create)
		if err == nil {
			db.Close()
			t.Fatalf("open of a garbage file (create=%v) succeeded", create)
		}
		if !strings.Contains(err.Error(), "not a SQLite database or corrupt") {
			t.Fatalf("open of a garbage file (create=%v): %v", create, err)
		}
	}
	missing := filepath.Join(dir, "missing.db")
	if db, err := sqlite.Open(ctx, missing, false); err == nil {
		db.Close()
		t.Fatalf("open of a missing file without create succeeded")
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("open without create left a file behind: %v", err)
	}
	if _, err := sqlite.Open(ctx, "", true); err == nil {
		t.Fatalf("open of an empty path succeeded")
	}
}

// TestTwoHandles runs two clients, each on its own handle of one file,
// creating files in one directory at the same time.
func TestTwoHandles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	st1 := open(t, path, true)
	defer st1.Close()
	metatest.TwoClients(t, st1, func() store.Store {
		st2 := open(t, path, false)
		t.Cleanup(func() { st2.Close() })
		return st2
	})
}

// TestRaces checks that write transactions on two handles of one file are
// serializable.
func TestRaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	st1 := open(t, path, true)
	defer st1.Close()
	st2 := open(t, path, false)
	defer st2.Close()
	storetest.Races(t, st1, st2)
}

// TestOldKVLayout checks that a file holding the one key-value table of
// early versions is refused, not formatted anew beside its records.
func TestOldKVLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec("CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID")
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, create := range []bool{false, true} {
		st, err := sqlite.Open(context.Background(), path, create)
		if err == nil {
			st.Close()
			t.Fatalf("open of a key-value layout file (create=%v) succeeded", create)
		}
		if !strings.Contains(err.Error(), "key-value layout") {
			t.Fatalf("open of a key-value layout file (create=%v): %v", create, err)
		}
	}
}

// BenchmarkBatch compares batched reads and bulk writes with their
// per-record fallbacks.
func BenchmarkBatch(b *testing.B) {
	storetest.BenchBatch(b, func(tb testing.TB) store.Store {
		st := open(tb, filepath.Join(tb.TempDir(), "meta.db"), true)
		tb.Cleanup(func() { st.Close() })
		return st
	})
}

// TestUpgradeAddsTables checks that a volume formatted before a record
// kind had its table gets the table when it is opened, and keeps its
// records.
func TestUpgradeAddsTables(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "meta.db")
	st := open(t, path, true)
	err := st.Update(ctx, func(tx store.Tx) error {
		tx.SetCounter("kept", 42)
		return nil
	})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec("DROP TABLE unsynced") // as an earlier version formatted it
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	st = open(t, path, false)
	defer st.Close()
	u := store.UnsyncedSlice{Id: 5, Size: 100, Ino: 9, Idx: 1}
	if err := st.Update(ctx, func(tx store.Tx) error { tx.SetUnsynced(1, u, true); return nil }); err != nil {
		t.Fatalf("write an unsynced slice after the upgrade: %v", err)
	}
	err = st.View(ctx, func(tx store.Tx) error {
		if v, err := tx.Counter("kept"); err != nil || v != 42 {
			t.Errorf("counter after the upgrade = %d, %v; want 42", v, err)
		}
		got, err := tx.Unsynced(1)
		if err != nil || len(got) != 1 || got[0] != u {
			t.Errorf("Unsynced after the upgrade = %+v, %v; want %+v", got, err, u)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointsInBackground: commits leave the log alone (no commit
// pays for a checkpoint, even past the 1,000 pages after which SQLite's
// would), the store copies the log into the database file in the
// background, and the file holds every commit once the store closed.
func TestCheckpointsInBackground(t *testing.T) {
	ctx := context.Background()
	const n, valueSize = 1500, 3000
	value := make([]byte, valueSize)
	fill := func(t *testing.T, st store.Store) {
		t.Helper()
		for i := range n {
			if err := st.Update(ctx, func(tx store.Tx) error {
				tx.SetXattr(store.Ino(i+2), "user.x", value)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	size := func(t *testing.T, path string) int64 {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}

	t.Run("commits", func(t *testing.T) {
		defer sqlite.SetCheckpointEvery(time.Hour)()
		path := filepath.Join(t.TempDir(), "meta.db")
		st := open(t, path, true)
		before := size(t, path)
		fill(t, st)
		if got := size(t, path); got > before {
			t.Errorf("database file grew from %d to %d bytes during the commits: a commit checkpointed", before, got)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if got := size(t, path); got < before+n*valueSize {
			t.Errorf("database file %d bytes after close, want at least %d: no last checkpoint", got, before+n*valueSize)
		}
	})
	t.Run("background", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "meta.db")
		st := open(t, path, true)
		defer st.Close()
		before := size(t, path)
		fill(t, st)
		deadline := time.Now().Add(5 * time.Second)
		for size(t, path) < before+n*valueSize {
			if time.Now().After(deadline) {
				t.Fatalf("database file %d bytes 5 s after the commits, want at least %d: no checkpoint ran",
					size(t, path), before+n*valueSize)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// TestCloseTwice: commands close a store on several paths; a second Close
// must not fail or panic.
func TestCloseTwice(t *testing.T) {
	st := open(t, filepath.Join(t.TempDir(), "meta.db"), true)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

// TestViewsBetweenWrites: reads run on the writers' connections when one
// is free; a read of several statements, a read that tries to write, and
// one open while another goroutine commits each leave the connection fit
// for the next write.
func TestViewsBetweenWrites(t *testing.T) {
	ctx := context.Background()
	st := open(t, filepath.Join(t.TempDir(), "meta.db"), true)
	defer st.Close()
	setNode := func(ino store.Ino, mode uint16) {
		t.Helper()
		if err := st.Update(ctx, func(tx store.Tx) error {
			tx.SetNode(&store.Node{Ino: ino, Type: store.TypeFile, Mode: mode, Nlink: 1})
			return nil
		}); err != nil {
			t.Fatalf("update: %v", err)
		}
	}
	mode := func(tx store.Tx, ino store.Ino) uint16 {
		t.Helper()
		n, err := tx.Node(ino)
		if err != nil {
			t.Fatalf("node %d: %v", ino, err)
		}
		return n.Mode
	}
	setNode(10, 0o600)
	setNode(11, 0o640)
	for range 3 { // two statements: the view begins a transaction at the second
		if err := st.View(ctx, func(tx store.Tx) error {
			if m := mode(tx, 10); m != 0o600 {
				t.Errorf("mode %o", m)
			}
			if m := mode(tx, 11); m != 0o640 {
				t.Errorf("mode %o", m)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		setNode(12, 0o644)
	}
	err := st.View(ctx, func(tx store.Tx) error {
		mode(tx, 10)
		mode(tx, 11)
		tx.SetNode(&store.Node{Ino: 13, Type: store.TypeFile, Mode: 0o600, Nlink: 1})
		return nil
	})
	if err == nil {
		t.Fatal("a write in a view succeeded")
	}
	setNode(14, 0o600) // would fail if the view had left its transaction open
	if err := st.View(ctx, func(tx store.Tx) error {
		if _, err := tx.Node(13); err != store.ErrNotFound {
			t.Errorf("the view's write is there: %v", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A view open across another goroutine's commit.
	if err := st.View(ctx, func(tx store.Tx) error {
		mode(tx, 10)
		mode(tx, 11)
		done := make(chan error)
		go func() {
			done <- st.Update(ctx, func(tx store.Tx) error {
				tx.SetNode(&store.Node{Ino: 10, Type: store.TypeFile, Mode: 0o700, Nlink: 1})
				return nil
			})
		}()
		if err := <-done; err != nil {
			t.Errorf("update during a view: %v", err)
		}
		if m := mode(tx, 10); m != 0o600 {
			t.Errorf("the view's transaction saw a commit made after it began: mode %o", m)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.View(ctx, func(tx store.Tx) error {
		if m := mode(tx, 10); m != 0o700 {
			t.Errorf("mode %o after the commit", m)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestLogStartsOver: a passive checkpoint lets the log start over only
// when a commit finds it all copied and no reader in it, which a steady
// stream of commits beside readers never leaves (the log grew to 64 MiB
// in a mount). A checkpoint that finds 1,000 pages or more in the log
// empties it; below that it leaves it be.
func TestLogStartsOver(t *testing.T) {
	defer sqlite.SetCheckpointEvery(time.Hour)() // only the checkpoints run here
	ctx := context.Background()
	value := make([]byte, 3000) // about a page of log per commit
	for _, c := range []struct {
		commits int
		empty   bool
	}{{100, false}, {1200, true}} {
		path := filepath.Join(t.TempDir(), "meta.db")
		st := open(t, path, true)
		for i := range c.commits {
			if err := st.Update(ctx, func(tx store.Tx) error {
				tx.SetXattr(store.Ino(i%500+2), "user.x", value)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		sqlite.Checkpoint(st)
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		if empty := fi.Size() == 0; empty != c.empty {
			t.Errorf("after %d commits of a page and a checkpoint the log is %d bytes; want it emptied: %v", c.commits, fi.Size(), c.empty)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkConcurrentWrites runs write transactions of 20 records from
// several goroutines of one process at once, as a mount's callers and its
// background work do: they take turns on the store's write lock rather
// than in SQLite's busy handler, which sleeps milliseconds.
func BenchmarkConcurrentWrites(b *testing.B) {
	st := open(b, filepath.Join(b.TempDir(), "meta.db"), true)
	b.Cleanup(func() { st.Close() })
	ctx := context.Background()
	var next atomic.Uint64
	b.SetParallelism(2)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := st.Update(ctx, func(tx store.Tx) error {
				for range 20 {
					tx.SetDelFile(store.DelFile{Ino: store.Ino(1000 + next.Add(1)), Length: 1}, true)
				}
				return nil
			}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
