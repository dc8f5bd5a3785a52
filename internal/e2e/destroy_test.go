package e2e

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3" // reads the metadata file the volume leaves
)

// sqliteRecords counts the rows of every table of the SQLite file at path,
// and names the tables that have some.
func sqliteRecords(t *testing.T, path string) (int, []string) {
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
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if len(tables) < 10 {
		t.Fatalf("only tables %v in %s", tables, path)
	}
	total, nonEmpty := 0, []string(nil)
	for _, table := range tables {
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM "` + table + `"`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			total += n
			nonEmpty = append(nonEmpty, table)
		}
	}
	return total, nonEmpty
}

// TestDestroy: destroy refuses a wrong UUID, a volume with a live mount
// and, in a script, a run without --yes; after the mount ends, destroy
// --yes leaves no object under the volume's prefix and no record in its
// metadata (SQLite: every table is empty; etcd: the namespace holds no
// key, which status reports), and status says the volume is not
// formatted. It runs on each engine whose server the environment names.
func TestDestroy(t *testing.T) {
	for _, engine := range metaEngines {
		t.Run(engine, func(t *testing.T) { destroyVolume(t, newVolumeOn(t, engine, "--trash-days", "1")) })
	}
}

func destroyVolume(t *testing.T, v *volume) {
	var status struct{ Setting struct{ UUID string } }
	if err := json.Unmarshal([]byte(mustSluice(t, "status", v.metaURL)), &status); err != nil {
		t.Fatal(err)
	}
	uuid := status.Setting.UUID
	v.mount(t)
	if err := os.MkdirAll(v.path("d/e"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, v.path("d/e/big"), newRand(5).bytes(9<<20+3))
	write(t, v.path("d/small"), []byte("small"))
	write(t, v.path("gone"), []byte("to the trash"))
	if err := os.Remove(v.path("gone")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("d/small", v.path("link")); err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(v.bucket, "vol")
	if n := countObjects(t, prefix); n < 4 {
		t.Fatalf("only %d objects under %s", n, prefix)
	}

	refused := func(what, want string, args ...string) {
		t.Helper()
		r := sluice(t, append([]string{"destroy", v.metaURL}, args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Fatalf("destroy %s: exit %d, stderr %q; want it refused with %q", what, r.code, r.stderr, want)
		}
		if countObjects(t, prefix) < 4 || !strings.Contains(mustSluice(t, "status", v.metaURL), uuid) {
			t.Fatalf("a refused destroy (%s) deleted something", what)
		}
	}
	refused("with a wrong UUID", "refusing to destroy it", "00000000-0000-0000-0000-000000000000", "--yes")
	refused("with a live mount", "live mounts (session", uuid, "--yes")
	refused("with a live mount", v.mnt, uuid, "--yes")

	v.umount(t)
	refused("in a script without --yes", "pass --yes", uuid)
	out := mustSluice(t, "destroy", v.metaURL, uuid, "--yes")
	if !strings.Contains(out, "destroyed") {
		t.Errorf("destroy output: %s", out)
	}
	if _, err := os.Stat(prefix); err == nil {
		if n := countObjects(t, prefix); n != 0 {
			t.Errorf("%d objects left under %s", n, prefix)
		}
	}
	r := sluice(t, "status", v.metaURL)
	if r.code == 0 || !strings.Contains(r.stderr, "not formatted") {
		t.Errorf("status after destroy: exit %d, stderr %q; want not formatted", r.code, r.stderr)
	}
	if strings.HasPrefix(v.metaURL, "etcd://") && !strings.Contains(r.stderr, "holds no volume") {
		t.Errorf("status after destroy on etcd: %q; want the namespace to hold no key", r.stderr)
	}
	if metaFile, ok := strings.CutPrefix(v.metaURL, "sqlite3://"); ok {
		if n, tables := sqliteRecords(t, metaFile); n != 0 {
			t.Errorf("%d records left in %s, in tables %v", n, metaFile, tables)
		}
	}
	// The engine is free for a new volume.
	mustSluice(t, "format", v.metaURL, "vol", "--bucket", v.bucket)
}
