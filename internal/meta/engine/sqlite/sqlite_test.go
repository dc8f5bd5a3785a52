package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/sqlite"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

func open(t *testing.T, path string, create bool) store.Store {
	t.Helper()
	db, err := sqlite.Open(context.Background(), path, create)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return kvstore.New(db)
}

func TestSuite(t *testing.T) {
	metatest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "meta.db"), true)
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
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "meta.db")
	st1 := open(t, path, true)
	defer st1.Close()
	if _, err := meta.FormatVolume(ctx, st1, &meta.Format{Name: "test", UUID: "u", Storage: "mem", Bucket: "x", BlockSize: 4096}); err != nil {
		t.Fatal(err)
	}
	st2 := open(t, path, false)
	defer st2.Close()
	const perClient = 200
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, st := range []store.Store{st1, st2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := meta.NewClient(ctx, st, meta.Config{})
			if err != nil {
				errs[i] = err
				return
			}
			defer func() {
				if err := c.Close(ctx); err != nil && errs[i] == nil {
					errs[i] = err
				}
			}()
			for j := range perClient {
				name := fmt.Sprintf("c%d-%03d", i, j)
				if _, err := c.Mknod(ctx, meta.RootIno, []byte(name), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
					errs[i] = fmt.Errorf("create %s: %w", name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
	}
	c, err := meta.NewClient(ctx, st2, meta.Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	es, err := c.ReadDir(ctx, meta.RootIno, nil, 1000, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2*perClient {
		t.Fatalf("%d entries, want %d", len(es), 2*perClient)
	}
	seen := map[meta.Ino]bool{}
	for _, e := range es {
		if e.Attr == nil || seen[e.Ino] {
			t.Fatalf("entry %q: inode %d missing or shared", e.Name, e.Ino)
		}
		seen[e.Ino] = true
	}
	st, err := c.StatFS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.UsedInodes != 2*perClient {
		t.Fatalf("statfs counts %d inodes, want %d", st.UsedInodes, 2*perClient)
	}
}
