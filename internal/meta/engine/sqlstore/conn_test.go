package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"
)

func testPool(t *testing.T) *connPool {
	t.Helper()
	db, err := sql.Open("sqlite3", filepath.Join(t.TempDir(), "pool.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return newConnPool(db)
}

// TestConnPoolLastInFirstOut: the connection given back last is the one
// taken next (its SQLite page cache is the warm one), and gets beyond
// WriteConns wait for a put, a drop, a cancel or the pool's close.
func TestConnPoolLastInFirstOut(t *testing.T) {
	ctx := context.Background()
	p := testPool(t)
	var cs []*ownConn
	for range WriteConns {
		c, err := p.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	for _, c := range cs {
		p.put(c, nil)
	}
	for range 3 {
		c, err := p.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c != cs[len(cs)-1] {
			t.Fatal("get did not return the connection put back last")
		}
		p.put(c, nil)
	}

	// tryGetRead takes the one used last too, and leaves one connection
	// to writes.
	var rs []*ownConn
	for c := p.tryGetRead(); c != nil; c = p.tryGetRead() {
		rs = append(rs, c)
	}
	if len(rs) != WriteConns-1 || rs[0] != cs[len(cs)-1] {
		t.Fatalf("reads took %d connections (want %d), the first not the one used last", len(rs), WriteConns-1)
	}
	if c, err := p.get(ctx); err != nil {
		t.Fatal(err)
	} else {
		p.put(c, nil)
	}
	for _, c := range rs {
		p.putRead(c, nil)
	}

	// All out: a get waits, and a put hands it the connection.
	for i := range cs {
		if cs[i], _ = p.get(ctx); cs[i] == nil {
			t.Fatal("no connection")
		}
	}
	if c := p.tryGetRead(); c != nil {
		t.Fatal("tryGetRead returned a connection with none free")
	}
	got := make(chan *ownConn)
	go func() {
		c, _ := p.get(ctx)
		got <- c
	}()
	select {
	case <-got:
		t.Fatal("a get beyond WriteConns did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	p.put(cs[0], nil)
	if c := <-got; c != cs[0] {
		t.Fatal("the waiting get did not receive the connection put back")
	}

	// A broken connection dropped lets a waiting get open another.
	go func() {
		c, _ := p.get(ctx)
		got <- c
	}()
	time.Sleep(20 * time.Millisecond)
	p.put(cs[1], sql.ErrConnDone)
	if c := <-got; c == nil || c == cs[1] {
		t.Fatal("the waiting get did not get a new connection after a drop")
	}

	// A cancelled wait returns its context's error.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := p.get(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled get: %v", err)
	}

	// Close wakes a waiting get with ErrConnDone.
	go func() {
		c, err := p.get(ctx)
		if c != nil || !errors.Is(err, sql.ErrConnDone) {
			t.Errorf("get during close: %v, %v", c, err)
		}
		got <- nil
	}()
	time.Sleep(20 * time.Millisecond)
	p.close()
	<-got
}
