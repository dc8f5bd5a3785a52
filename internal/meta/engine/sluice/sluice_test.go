package sluice_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	current = benchServer{srv: srv}
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

// BenchmarkMeta runs the metadata benchmarks; SLUICE_BENCH_SERVER=process
// runs the server in a process of its own, to measure its CPU (see meter).
func BenchmarkMeta(b *testing.B) {
	metatest.BenchWith(b, func(tb testing.TB) store.Store {
		url := ""
		if os.Getenv("SLUICE_BENCH_SERVER") == "process" {
			url = startChild(tb)
		} else {
			url = startServer(tb)
		}
		return kvstore.New(openDB(tb, url))
	}, meter)
}

// TestConflictThenFresh checks that a transaction the server refused
// reads, when it starts again at once, the change it lost to: the
// refusal comes only once that change is what a new snapshot holds.
// Otherwise a retry reads the state before it again and is doomed to
// conflict again, for as long as the winner's log sync takes.
func TestConflictThenFresh(t *testing.T) {
	db := openDB(t, startServer(t))
	ctx := context.Background()
	key := []byte("Ccounter")
	const writers, each = 8, 50
	var wg sync.WaitGroup
	var stale, conflicts atomic.Int64
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			var lost []byte // what the last refused attempt read; nil: it committed
			for done := 0; done < each; {
				var read []byte
				err := db.Update(ctx, func(tx kvstore.Txn) error {
					v, err := tx.Get(key)
					if err != nil {
						return err
					}
					read = v
					n, _ := strconv.Atoi(string(v))
					tx.Set(key, []byte(strconv.Itoa(n+1)))
					return nil
				})
				if lost != nil && bytes.Equal(read, lost) {
					stale.Add(1)
				}
				switch {
				case errors.Is(err, store.ErrConflict):
					conflicts.Add(1)
					lost = read
				case err != nil:
					errs <- err
					return
				default:
					lost = nil
					done++
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var got []byte
	if err := db.View(ctx, func(tx kvstore.Txn) error {
		var err error
		got, err = tx.Get(key)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(writers * each); string(got) != want {
		t.Fatalf("counter %s after %d increments", got, writers*each)
	}
	t.Logf("%d conflicts", conflicts.Load())
	if stale.Load() > 0 {
		t.Fatalf("%d of %d retries after a conflict read the value they had lost with again", stale.Load(), conflicts.Load())
	}
}

// TestURLOptions checks that the URL's options are refused with a clear
// error when they make no sense, before any connection is made.
func TestURLOptions(t *testing.T) {
	for _, c := range []struct{ query, want string }{
		{"read=nearest", `read "nearest": want leader`},
		{"read=follower&ops=client", "read=follower needs ops=server"},
		{"staleness=1s", "staleness bounds read=follower only"},
		{"read=follower&staleness=1ms", `staleness "1ms": want a duration of at least 10ms`},
		{"read=follower&staleness=soon", `staleness "soon"`},
		{"ops=both", `ops "both"`},
		{"conns=0", `conns "0"`},
		{"timeout=-1s", `timeout "-1s"`},
	} {
		_, err := sluice.Open(context.Background(), "sluice://127.0.0.1:1/test?"+c.query, false)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.query, err, c.want)
		}
	}
}
