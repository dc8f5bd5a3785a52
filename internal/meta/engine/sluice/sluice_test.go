package sluice_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/sluicefs/sluice/internal/meta/engine/sluice"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore/kvtest"
	"github.com/sluicefs/sluice/internal/meta/store/storetest"
	"github.com/sluicefs/sluice/internal/metaserver"
)

// startServer runs a metadata server on loopback over a fresh directory
// and returns its URL.
func startServer(t testing.TB) string {
	t.Helper()
	srv, err := metaserver.Open(metaserver.Options{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close server: %v", err)
		}
	})
	return "sluice://" + l.Addr().String() + "/test"
}

func openDB(t testing.TB, url string) *sluice.DB {
	t.Helper()
	db, err := sluice.Open(context.Background(), url, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newStore(t testing.TB) store.Store { return kvstore.New(openDB(t, startServer(t))) }

func TestSuite(t *testing.T) {
	metatest.Run(t, func(t *testing.T) store.Store { return newStore(t) })
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t) }, storetest.Options{})
}

func TestRaces(t *testing.T) {
	url := startServer(t)
	storetest.Races(t, kvstore.New(openDB(t, url)), kvstore.New(openDB(t, url)))
}

func TestKV(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kvstore.DB { return openDB(t, startServer(t)) },
		kvtest.Options{Snapshot: true})
}

func BenchmarkMeta(b *testing.B) {
	metatest.Bench(b, func(tb testing.TB) store.Store { return newStore(tb) })
}
