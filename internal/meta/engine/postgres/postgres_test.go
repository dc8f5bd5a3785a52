package postgres_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta/engine/postgres"
	"github.com/sluicefs/sluice/internal/meta/engine/sqlstore/sqltest"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/storetest"
	"github.com/sluicefs/sluice/internal/testserver"
)

// engine opens a volume.
var engine sqltest.Opener = postgres.Open

func TestSuite(t *testing.T) {
	base := testserver.URL(t, testserver.Postgres)
	metatest.RunOptions(t, func(t *testing.T) store.Store { return sqltest.Store(t, engine, base) }, metatest.Options{ModelOps: 500})
}

func BenchmarkMeta(b *testing.B) {
	base := testserver.URL(b, testserver.Postgres)
	metatest.Bench(b, func(tb testing.TB) store.Store { return sqltest.Store(tb, engine, base) })
}

func TestStore(t *testing.T) {
	base := testserver.URL(t, testserver.Postgres)
	storetest.Run(t, func(t *testing.T) store.Store { return sqltest.Store(t, engine, base) }, storetest.Options{})
}

func TestRaces(t *testing.T) {
	u := sqltest.FreshURL(t, engine, testserver.URL(t, testserver.Postgres))
	storetest.Races(t, sqltest.OpenStore(t, engine, u, true), sqltest.OpenStore(t, engine, u, false))
}

func TestTwoClients(t *testing.T) {
	u := sqltest.FreshURL(t, engine, testserver.URL(t, testserver.Postgres))
	st1 := sqltest.OpenStore(t, engine, u, true)
	metatest.TwoClients(t, st1, func() store.Store { return sqltest.OpenStore(t, engine, u, false) })
}

func TestOpenErrors(t *testing.T) {
	base, err := url.Parse(testserver.URL(t, testserver.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	with := func(edit func(u *url.URL)) string {
		u := *base
		edit(&u)
		return u.String()
	}
	user := base.User.Username()
	silent := testserver.Silent(t)
	cases := []struct {
		name, url string
		create    bool
		want      string
	}{
		{"wrong password", with(func(u *url.URL) { u.User = url.UserPassword(user, "wrong-secret") }), true,
			`password authentication failed for user "` + user + `" (check the user and password in the URL)`},
		{"missing database", with(func(u *url.URL) { u.Path = "/sluice_no_such_db" }), true,
			`database "sluice_no_such_db" does not exist`},
		{"refused", with(func(u *url.URL) { u.Host = "127.0.0.1:1" }), true,
			"cannot reach the server at 127.0.0.1:1: connect: connection refused"},
		{"no answer", with(func(u *url.URL) { u.Host = silent }), true, "no answer from the server within 5s"},
		{"malformed", "postgres://sluice:wrong-secret@127.0.0.1:port/sluice", true, "malformed PostgreSQL URL"},
		{"no database", with(func(u *url.URL) { u.Path = "" }), true, "malformed PostgreSQL URL: no database"},
		{"bad prefix", sqltest.WithParam(base.String(), "table_prefix", "x%3Bdrop"), true, `bad table_prefix "x;drop"`},
		{"semicolon", sqltest.WithParam(base.String(), "table_prefix", "x;drop"), true, "malformed PostgreSQL URL"},
		{"not formatted", sqltest.WithParam(base.String(), "table_prefix", "never_formatted_"), false,
			"table never_formatted_node does not exist (volume not formatted?)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			db, err := postgres.Open(context.Background(), c.url, c.create)
			if err == nil {
				db.Close()
				t.Fatalf("open %s succeeded", c.url)
			}
			msg := err.Error()
			t.Log(msg)
			if !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") ||
				strings.Contains(msg, "wrong-secret") || (base.User != nil && strings.Contains(msg, password(base))) {
				t.Errorf("error %q: want one line containing %q, without the password", msg, c.want)
			}
			if d := time.Since(start); d > 8*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

func password(u *url.URL) string {
	if p, ok := u.User.Password(); ok && p != "" {
		return ":" + p + "@"
	}
	return "\x00"
}
