package meta_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/engine/sqlite"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// destroyEngine opens a store and counts the records left in it by
// looking under the Tx: every key of the key-value layout, every row of
// every SQL table.
type destroyEngine struct {
	name string
	open func(t *testing.T) (store.Store, func() (int, string))
}

var destroyEngines = []destroyEngine{
	{name: "mem", open: func(t *testing.T) (store.Store, func() (int, string)) {
		db := mem.New(t.Name())
		return kvstore.New(db), func() (int, string) {
			var pairs []kvstore.Pair
			err := db.View(context.Background(), func(tx kvstore.Txn) (err error) {
				pairs, err = tx.Scan(nil, nil, 0)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, p := range pairs {
				keys = append(keys, fmt.Sprintf("%q", p.Key))
			}
			return len(pairs), strings.Join(keys, " ")
		}
	}},
	{name: "sqlite", open: func(t *testing.T) (store.Store, func() (int, string)) {
		path := filepath.Join(t.TempDir(), "meta.db")
		st, err := sqlite.Open(context.Background(), path, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st, func() (int, string) { return sqliteRows(t, path) }
	}},
}

// sqliteRows counts the rows of every table of the SQLite file at path.
func sqliteRows(t *testing.T, path string) (int, string) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT name FROM sqlite_master WHERE type = 'table'")
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	if len(tables) == 0 {
		t.Fatalf("no tables in %s", path)
	}
	total, what := 0, []string{}
	for _, tab := range tables {
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM "` + tab + `"`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			total += n
			what = append(what, fmt.Sprintf("%s: %d", tab, n))
		}
	}
	return total, strings.Join(what, ", ")
}

// TestDestroy fills a volume with every kind of record (files with data,
// shared slices, directories, symlinks, xattrs, the trash, locks, files
// held open after unlink, two sessions, queued deletions) and checks that
// Destroy leaves no record in the engine, and that the store then reads
// as unformatted and formats again.
func TestDestroy(t *testing.T) {
	for _, eng := range destroyEngines {
		t.Run(eng.name, func(t *testing.T) {
			ctx := context.Background()
			st, count := eng.open(t)
			f := &meta.Format{Name: "doomed", UUID: "uuid-1", Storage: "mem", Bucket: "b", BlockSize: 4096, TrashDays: 1}
			if _, err := meta.FormatVolume(ctx, st, f); err != nil {
				t.Fatal(err)
			}
			fillVolume(t, st)
			if n, _ := count(); n < 20 {
				t.Fatalf("the volume holds only %d records before Destroy; the test fills too little", n)
			}

			if _, err := meta.Destroy(ctx, st, "uuid-2", meta.DestroyOptions{}); err == nil || !strings.Contains(err.Error(), "refusing") {
				t.Fatalf("Destroy with the wrong UUID: %v, want a refusal", err)
			}
			if n, _ := count(); n < 20 {
				t.Fatalf("a refused Destroy deleted records: %d left", n)
			}

			var reported int64
			n, err := meta.Destroy(ctx, st, "uuid-1", meta.DestroyOptions{Progress: func(n int64) { reported = n }})
			if err != nil {
				t.Fatalf("Destroy: %v", err)
			}
			if reported != n || n < 20 {
				t.Errorf("Destroy deleted %d records and reported %d", n, reported)
			}
			if left, what := count(); left != 0 {
				t.Fatalf("%d records left after Destroy: %s", left, what)
			}
			if _, err := meta.Load(ctx, st); err == nil || !strings.Contains(err.Error(), "not formatted") {
				t.Fatalf("Load after Destroy: %v, want not formatted", err)
			}
			if _, err := meta.Destroy(ctx, st, "uuid-1", meta.DestroyOptions{}); err == nil {
				t.Fatalf("a second Destroy succeeded")
			}
			created, err := meta.FormatVolume(ctx, st, &meta.Format{Name: "reborn", UUID: "uuid-3", Storage: "mem", Bucket: "b", BlockSize: 4096})
			if err != nil || !created {
				t.Fatalf("format after Destroy: created %v, %v", created, err)
			}
		})
	}
}

// fillVolume writes records of every kind through two clients, and leaves
// them open (their sessions stay, as those of crashed mounts do).
func fillVolume(t *testing.T, st store.Store) {
	t.Helper()
	ctx := context.Background()
	c1, err := meta.NewSession(ctx, st, meta.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := meta.NewSession(ctx, st, meta.Config{})
	if err != nil {
		t.Fatal(err)
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	file := meta.NewNode{Type: store.TypeFile, Mode: 0o644}
	d, err := c1.Mknod(ctx, meta.RootIno, []byte("dir"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
	must("mkdir", err)
	_, err = c1.Mknod(ctx, d.Ino, []byte("link"), meta.NewNode{Type: store.TypeSymlink, Mode: 0o777, Target: []byte("target")})
	must("symlink", err)
	var files []*meta.Attr
	for i := range 4 {
		a, err := c1.Mknod(ctx, d.Ino, []byte(fmt.Sprintf("f%d", i)), file)
		must("create", err)
		id, err := c1.NewSliceID(ctx)
		must("slice id", err)
		_, err = metatest.Write(ctx, c1, a.Ino, 0, meta.Slice{Id: id, Size: 4096, Len: 4096})
		must("write", err)
		must("setxattr", c1.SetXattr(ctx, a.Ino, "user.k", []byte("v"), 0))
		files = append(files, a)
	}
	_, _, err = c1.CopyFileRange(ctx, files[0].Ino, 0, files[1].Ino, 4096, 4096) // a shared slice
	must("copy_file_range", err)
	_, err = c1.Link(ctx, files[0].Ino, meta.RootIno, []byte("hard"))
	must("link", err)
	must("unlink into the trash", c1.Unlink(ctx, d.Ino, []byte("f2")))
	_, err = c2.Open(ctx, files[3].Ino, syscall.O_RDWR)
	must("open", err)
	_, err = c2.Flock(ctx, files[3].Ino, 7, meta.LockWrite, false)
	must("flock", err)
	_, err = c2.SetLk(ctx, files[1].Ino, 8, meta.PosixLock{Start: 0, End: 10, Type: meta.LockWrite, Pid: 1}, false)
	must("setlk", err)
	// Open and unlinked for good (trash off): held by c2's session.
	off := &meta.Format{Name: "doomed", UUID: "uuid-1", Storage: "mem", Bucket: "b", BlockSize: 4096}
	_, err = meta.FormatVolume(ctx, st, off)
	must("turn the trash off", err)
	must("reload", c2.ReloadFormat(ctx))
	must("unlink an open file", c2.Unlink(ctx, d.Ino, []byte("f3")))
	_, err = c2.SetAttr(ctx, files[1].Ino, meta.SetSize, &meta.Attr{Length: 0})
	must("truncate", err)
}
