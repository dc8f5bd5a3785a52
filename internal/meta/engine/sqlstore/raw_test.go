package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"testing"
)

func TestScanValues(t *testing.T) {
	var i int64
	var b []byte
	var s string
	var n sql.NullInt64
	tests := []struct {
		name  string
		dest  any
		value driver.Value
		check func() bool
		fails bool
	}{
		{"int64", &i, int64(-7), func() bool { return i == -7 }, false},
		{"bytes", &b, []byte("name"), func() bool { return string(b) == "name" }, false},
		{"bytes from text", &b, "text", func() bool { return string(b) == "text" }, false},
		{"bytes from NULL", &b, nil, func() bool { return b == nil }, false},
		{"string", &s, "abc", func() bool { return s == "abc" }, false},
		{"string from bytes", &s, []byte("xyz"), func() bool { return s == "xyz" }, false},
		{"null int", &n, int64(3), func() bool { return n.Valid && n.Int64 == 3 }, false},
		{"null int from NULL", &n, nil, func() bool { return !n.Valid }, false},
		{"int64 from NULL", &i, nil, nil, true},
		{"int64 from text", &i, "12", nil, true},
		{"unsupported destination", new(float64), int64(1), nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b = []byte("old")
			n = sql.NullInt64{Int64: 9, Valid: true}
			err := scanValues([]any{tc.dest}, []driver.Value{tc.value})
			if tc.fails {
				if err == nil {
					t.Fatalf("scan of %T into %T succeeded", tc.value, tc.dest)
				}
				return
			}
			if err != nil || !tc.check() {
				t.Fatalf("scan of %#v into %T: err %v, got %v/%q/%q/%v", tc.value, tc.dest, err, i, b, s, n)
			}
		})
	}
	// A []byte is copied: the driver may reuse its buffer for the next row.
	src := []byte("shared")
	if err := scanValues([]any{&b}, []driver.Value{src}); err != nil {
		t.Fatal(err)
	}
	src[0] = 'X'
	if !bytes.Equal(b, []byte("shared")) {
		t.Fatalf("scanned bytes follow the driver's buffer: %q", b)
	}
	if err := scanValues([]any{&i, &b}, []driver.Value{int64(1)}); err == nil {
		t.Fatal("scan of one value into two destinations succeeded")
	}
}

// TestRawStatements runs statements on an own connection's driver
// connection: rows and affected counts as through database/sql, and a
// statement run while another's rows are read fails rather than waiting
// for the connection it holds.
func TestRawStatements(t *testing.T) {
	ctx := context.Background()
	p := testPool(t)
	c, err := p.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.put(c, nil)
	if _, err := c.c.ExecContext(ctx, "CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)"); err != nil {
		t.Fatal(err)
	}
	const ins = "INSERT INTO t (k, v) VALUES (?, ?)"
	for k := range 3 {
		n, ok, err := c.rawExec(ctx, ins, ins, []any{int64(k), []byte{'a' + byte(k)}})
		if !ok || err != nil || n != 1 {
			t.Fatalf("insert %d: ran %v, %d rows, %v", k, ok, n, err)
		}
	}
	if len(c.raw) != 1 || c.rawMode != rawOn {
		t.Fatalf("%d statements prepared (want 1), mode %d", len(c.raw), c.rawMode)
	}
	const sel = "SELECT k, v FROM t WHERE k >= ? ORDER BY k"
	var got []string
	ok, err := c.rawQuery(ctx, sel, sel, []any{int64(1)}, func(scan func(...any) error) error {
		var k int64
		var v []byte
		if err := scan(&k, &v); err != nil {
			return err
		}
		got = append(got, string(v))
		// The connection is held while its rows are read.
		if _, _, err := c.rawExec(ctx, ins, ins, []any{int64(10), nil}); !errors.Is(err, errNested) {
			t.Errorf("nested statement: %v, want errNested", err)
		}
		return nil
	})
	if !ok || err != nil || strings.Join(got, ",") != "b,c" {
		t.Fatalf("select: ran %v, rows %q, %v", ok, got, err)
	}
	// An error of the callback ends the rows and is returned.
	stop := errors.New("stop")
	if _, err := c.rawQuery(ctx, sel, sel, []any{int64(0)}, func(func(...any) error) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("callback error: got %v", err)
	}
	// The statement is reset: it runs again on the same connection.
	n := 0
	if _, err := c.rawQuery(ctx, sel, sel, []any{int64(0)}, func(func(...any) error) error { n++; return nil }); err != nil || n != 3 {
		t.Fatalf("select after an ended read: %d rows, %v", n, err)
	}
	// Transaction control runs prepared too: a rolled back insert is gone,
	// a committed one stays.
	for _, end := range []string{"ROLLBACK", "COMMIT"} {
		if err := c.execText(ctx, "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.rawExec(ctx, ins, ins, []any{int64(20), []byte(end)}); err != nil {
			t.Fatal(err)
		}
		if err := c.execText(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	var v []byte
	const one = "SELECT v FROM t WHERE k = ?"
	if _, err := c.rawQuery(ctx, one, one, []any{int64(20)}, func(scan func(...any) error) error { return scan(&v) }); err != nil || string(v) != "COMMIT" {
		t.Fatalf("after a rollback and a commit: %q, %v", v, err)
	}
	if _, ok := c.raw["BEGIN IMMEDIATE"]; !ok {
		t.Fatal("BEGIN IMMEDIATE was not prepared on the connection")
	}
	// A statement that does not compile fails and is not kept.
	const bad = "SELECT nothing FROM nowhere"
	if _, err := c.rawQuery(ctx, bad, bad, nil, func(func(...any) error) error { return nil }); err == nil {
		t.Fatal("a statement on a missing table ran")
	}
	if _, ok := c.raw[bad]; ok {
		t.Fatal("a statement that failed to prepare was kept")
	}
}

// plainDriver is a driver whose connections lack ConnPrepareContext.
type plainDriver struct{}

type plainConn struct{}

func (plainDriver) Open(string) (driver.Conn, error) { return plainConn{}, nil }

func (plainConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("not used") }
func (plainConn) Close() error                        { return nil }
func (plainConn) Begin() (driver.Tx, error)           { return nil, errors.New("not used") }

// TestRawFallback: on a driver without the interfaces, nothing runs
// directly and the connection remembers it.
func TestRawFallback(t *testing.T) {
	ctx := context.Background()
	db := sql.OpenDB(connector{})
	defer db.Close()
	p := newConnPool(db)
	c, err := p.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.put(c, nil)
	if _, ok, err := c.rawExec(ctx, "DELETE FROM t", "DELETE FROM t", nil); ok || err != nil {
		t.Fatalf("exec on a plain driver: ran %v, %v", ok, err)
	}
	if c.rawMode != rawOff {
		t.Fatalf("mode %d after a plain driver, want rawOff", c.rawMode)
	}
	if ok, err := c.rawQuery(ctx, "SELECT 1", "SELECT 1", nil, nil); ok || err != nil {
		t.Fatalf("query on a plain driver: ran %v, %v", ok, err)
	}
}

type connector struct{}

func (connector) Connect(context.Context) (driver.Conn, error) { return plainConn{}, nil }
func (connector) Driver() driver.Driver                        { return plainDriver{} }
