package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/sluicefs/sluice/internal/meta/engine/mysql"
	"github.com/sluicefs/sluice/internal/meta/engine/sqlstore/sqltest"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/storetest"
	"github.com/sluicefs/sluice/internal/testserver"
)

// engine opens a volume.
var engine sqltest.Opener = mysql.Open

func TestSuite(t *testing.T) {
	base := testserver.URL(t, testserver.MySQL)
	metatest.RunOptions(t, func(t *testing.T) store.Store { return sqltest.Store(t, engine, base) }, metatest.Options{ModelOps: 500})
}

func BenchmarkMeta(b *testing.B) {
	base := testserver.URL(b, testserver.MySQL)
	metatest.Bench(b, func(tb testing.TB) store.Store { return sqltest.Store(tb, engine, base) })
}

func TestStore(t *testing.T) {
	base := testserver.URL(t, testserver.MySQL)
	storetest.Run(t, func(t *testing.T) store.Store { return sqltest.Store(t, engine, base) }, storetest.Options{})
}

func TestRaces(t *testing.T) {
	u := sqltest.FreshURL(t, engine, testserver.URL(t, testserver.MySQL))
	storetest.Races(t, sqltest.OpenStore(t, engine, u, true), sqltest.OpenStore(t, engine, u, false))
}

func TestTwoClients(t *testing.T) {
	u := sqltest.FreshURL(t, engine, testserver.URL(t, testserver.MySQL))
	st1 := sqltest.OpenStore(t, engine, u, true)
	metatest.TwoClients(t, st1, func() store.Store { return sqltest.OpenStore(t, engine, u, false) })
}

// parts splits a mysql://USER:PASSWORD@(ADDR)/DB?QUERY URL.
func parts(t *testing.T, u string) (user, pass, addr, db, query string) {
	rest, ok := strings.CutPrefix(u, "mysql://")
	at := strings.LastIndex(rest, "@(")
	end := strings.Index(rest, ")/")
	if !ok || at < 0 || end < at {
		t.Fatalf("%s is not mysql://USER:PASSWORD@(HOST:PORT)/DB", testserver.MySQL)
	}
	user, pass, _ = strings.Cut(rest[:at], ":")
	addr = rest[at+2 : end]
	db, query, _ = strings.Cut(rest[end+2:], "?")
	return user, pass, addr, db, query
}

func TestOpenErrors(t *testing.T) {
	base := testserver.URL(t, testserver.MySQL)
	user, pass, addr, db, query := parts(t, base)
	mk := func(user, pass, addr, db string) string {
		u := "mysql://" + user + ":" + pass + "@(" + addr + ")/" + db
		if query != "" {
			u += "?" + query
		}
		return u
	}
	silent := testserver.Silent(t)
	cases := []struct {
		name, url string
		create    bool
		want      string
	}{
		{"wrong password", mk(user, "wrong-secret", addr, db), true,
			"Access denied for user '" + user + "'@"},
		{"wrong password hint", mk(user, "wrong-secret", addr, db), true, "(check the user and password in the URL)"},
		{"missing database", mk(user, pass, addr, "sluice_no_such_db"), true, "Unknown database 'sluice_no_such_db'"},
		{"refused", mk(user, pass, "127.0.0.1:1", db), true, "cannot reach the server at 127.0.0.1:1: connect: connection refused"},
		{"no answer", mk(user, pass, silent, db), true, "no answer from the server within 5s"},
		{"malformed", "mysql://" + user + ":wrong-secret@(" + addr + ")", true, "malformed MySQL URL"},
		{"bad param", mk(user, "wrong-secret", addr, db) + "?timeout=soon", true, "malformed MySQL URL"},
		{"no database", mk(user, "wrong-secret", addr, ""), true, "malformed MySQL URL: no database"},
		{"bad prefix", sqltest.WithParam(base, "table_prefix", "x%3Bdrop"), true, `bad table_prefix "x;drop"`},
		{"not formatted", sqltest.WithParam(base, "table_prefix", "never_formatted_"), false,
			"table never_formatted_node does not exist (volume not formatted?)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			db, err := mysql.Open(context.Background(), c.url, c.create)
			if err == nil {
				db.Close()
				t.Fatalf("open %s succeeded", c.url)
			}
			msg := err.Error()
			t.Log(msg)
			if !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") ||
				strings.Contains(msg, "wrong-secret") || (pass != "" && strings.Contains(msg, ":"+pass+"@")) {
				t.Errorf("error %q: want one line containing %q, without the password", msg, c.want)
			}
			if d := time.Since(start); d > 8*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// TestURLForms checks the address forms the URL may take.
func TestURLForms(t *testing.T) {
	base := testserver.URL(t, testserver.MySQL)
	user, pass, addr, db, query := parts(t, base)
	for _, a := range []string{"tcp(" + addr + ")", addr} {
		u := "mysql://" + user + ":" + pass + "@" + a + "/" + db
		if query != "" {
			u += "?" + query
		}
		d := sqltest.OpenStore(t, engine, sqltest.FreshURL(t, engine, u), true)
		if strings.Contains(d.Name(), ":"+pass+"@") && pass != "" {
			t.Errorf("name %q shows the password", d.Name())
		}
	}
}

// TestOneStatementReads counts, on the server, the statements that reads
// send: a View of one statement, and a lookup (the directory, the entry
// and the entry's node), run alone with no BEGIN or ROLLBACK; a View of
// two statements runs them in one transaction.
func TestOneStatementReads(t *testing.T) {
	u := sqltest.FreshURL(t, engine, testserver.URL(t, testserver.MySQL))
	st := sqltest.OpenStore(t, engine, u, true)
	ctx := context.Background()
	dir := &store.Node{Ino: 1000, Type: store.TypeDir, Mode: 0o755, Nlink: 2, Parent: 1}
	file := &store.Node{Ino: 1001, Type: store.TypeFile, Mode: 0o644, Nlink: 1, Length: 42, Parent: 1000}
	if err := st.Update(ctx, func(tx store.Tx) error {
		tx.SetNode(dir)
		tx.SetNode(file)
		tx.SetEdge(dir.Ino, store.Edge{Name: []byte("f"), Ino: file.Ino, Type: store.TypeFile})
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	user, pass, addr, db, _ := parts(t, u)
	server, err := sql.Open("mysql", user+":"+pass+"@tcp("+addr+")/"+db)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	counters := func() map[string]int64 {
		t.Helper()
		rows, err := server.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_begin', 'Com_select', 'Com_rollback', 'Com_commit')")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]int64{}
		for rows.Next() {
			var k string
			var v int64
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			m[k] = v
		}
		return m
	}

	lookup := func(tx store.Tx) error {
		d, e, n, err := tx.Lookup(dir.Ino, []byte("f"))
		if err != nil {
			return err
		}
		if d.Ino != dir.Ino || e.Ino != file.Ino || n == nil {
			return fmt.Errorf("Lookup: node %d, entry %+v, node of the entry %+v", d.Ino, e, n)
		}
		if *n != *file {
			return fmt.Errorf("node of the entry: %+v, want %+v", n, file)
		}
		return nil
	}
	twoNodes := func(tx store.Tx) error {
		for _, want := range []*store.Node{dir, file} {
			n, err := tx.Node(want.Ino)
			if err != nil {
				return err
			}
			if n.Ino != want.Ino {
				return fmt.Errorf("node %d: got %d", want.Ino, n.Ino)
			}
		}
		return nil
	}
	const n = 20
	for _, c := range []struct {
		name string
		fn   func(store.Tx) error
		want map[string]int64 // per View
	}{
		{"lookup", lookup, map[string]int64{"Com_select": 1}},
		{"two statements", twoNodes, map[string]int64{"Com_begin": 1, "Com_select": 2, "Com_rollback": 1}},
	} {
		if err := st.View(ctx, c.fn); err != nil { // warm the pool's connections
			t.Fatalf("%s: %v", c.name, err)
		}
		before := counters()
		for range n {
			if err := st.View(ctx, c.fn); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		after := counters()
		for _, k := range []string{"Com_begin", "Com_select", "Com_rollback", "Com_commit"} {
			if got := after[k] - before[k]; got != n*c.want[k] {
				t.Errorf("%s: %s grew by %d over %d Views, want %d", c.name, k, got, n, n*c.want[k])
			}
		}
	}
}
