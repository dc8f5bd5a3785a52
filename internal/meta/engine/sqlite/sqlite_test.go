package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicefs/sluice/internal/meta/engine/sqlite"
	"github.com/sluicefs/sluice/internal/meta/engine/sqlkv/sqlkvtest"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

func open(t testing.TB, path string, create bool) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), path, create)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return st
}

// TestSuiteKV runs the suite on a volume in the key-value table of the
// older layout, which Open still serves.
func TestSuiteKV(t *testing.T) {
	metatest.Run(t, func(t *testing.T) store.Store {
		path := filepath.Join(t.TempDir(), "meta.db")
		db, err := sqlite.OpenKV(context.Background(), path, true)
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		st := open(t, path, false)
		if _, ok := st.(*kvstore.Store); !ok {
			t.Fatalf("a volume in the key-value layout opened as %T", st)
		}
		return st
	})
}

func TestSuite(t *testing.T) {
	metatest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "meta.db"), true)
	})
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

func TestKV(t *testing.T) {
	db, err := sqlite.OpenKV(context.Background(), filepath.Join(t.TempDir(), "meta.db"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sqlkvtest.KV(t, db)
}

// TestRaces checks that write transactions on two handles of one file are
// serializable.
func TestRaces(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "meta.db")
	db1, err := sqlite.OpenKV(ctx, path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer db1.Close()
	db2, err := sqlite.OpenKV(ctx, path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	sqlkvtest.Races(t, db1, db2)
}

// BenchmarkMetaKV is BenchmarkMeta on the key-value layout.
func BenchmarkMetaKV(b *testing.B) {
	metatest.Bench(b, func(tb testing.TB) store.Store {
		path := filepath.Join(tb.TempDir(), "meta.db")
		db, err := sqlite.OpenKV(context.Background(), path, true)
		if err != nil {
			tb.Fatal(err)
		}
		return kvstore.New(db)
	})
}
