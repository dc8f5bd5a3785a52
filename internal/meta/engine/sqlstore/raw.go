package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
)

// An embedded database's own connections (ownConn) run their statements
// on the driver's connection directly, through the database/sql/driver
// interfaces (sql.Conn.Raw), with the statements prepared on it once.
// database/sql costs more per statement than SQLite does to run one: a
// lookup of a missing name took 12.8-15 µs through it and 6.6-8.9 µs
// here, with 33 allocations against 24. Only the
// optional interfaces below are used; a driver without them runs through
// database/sql as before.

// errRawUnsupported says the driver lacks an interface the raw path
// needs; the statement runs through database/sql instead.
var errRawUnsupported = errors.New("driver lacks the interfaces to run statements directly")

// errNested fails a statement run while another one's rows are being
// read on the same connection: the connection is held until they are
// read, and waiting on it would never end.
var errNested = errors.New("statement run while reading another statement's rows")

// rawConn is what the raw path needs of a driver connection.
type rawConn interface {
	driver.ConnPrepareContext
}

// rawStmt is what the raw path needs of a driver statement.
type rawStmt interface {
	driver.Stmt
	driver.StmtQueryContext
	driver.StmtExecContext
}

// rawOff, rawOn and rawUnknown say whether an ownConn's driver has the
// interfaces the raw path needs; rawUnknown until its first statement.
const (
	rawUnknown = iota
	rawOn
	rawOff
)

// rawPrepared returns q (as written here; sqlText is the database's
// text) prepared on dc, preparing it on first use.
func (c *ownConn) rawPrepared(ctx context.Context, dc any, q, sqlText string) (rawStmt, error) {
	if st, ok := c.raw[q]; ok {
		return st, nil
	}
	pc, ok := dc.(rawConn)
	if !ok {
		return nil, errRawUnsupported
	}
	ds, err := pc.PrepareContext(ctx, sqlText)
	if err != nil {
		return nil, err
	}
	st, ok := ds.(rawStmt)
	if !ok {
		ds.Close()
		return nil, errRawUnsupported
	}
	if c.raw == nil {
		c.raw = make(map[string]rawStmt)
	}
	c.raw[q] = st
	return st, nil
}

// rawArgs converts a statement's arguments to the driver's values, as
// database/sql does for a driver without a NamedValueChecker. The values
// used here (int64, []byte, string, nil) pass as they are.
func rawArgs(buf []driver.NamedValue, args []any) ([]driver.NamedValue, error) {
	for i, a := range args {
		v := a
		if !driver.IsValue(v) {
			var err error
			if v, err = driver.DefaultParameterConverter.ConvertValue(a); err != nil {
				return nil, fmt.Errorf("argument %d: %w", i+1, err)
			}
		}
		buf = append(buf, driver.NamedValue{Ordinal: i + 1, Value: v})
	}
	return buf, nil
}

// rawQuery runs the SELECT q on c and calls row for each row it returns,
// with a function that scans the row into its arguments. ok false says
// the driver cannot run it directly (nothing ran).
func (c *ownConn) rawQuery(ctx context.Context, q, sqlText string, args []any, row func(scan func(...any) error) error) (ok bool, err error) {
	if c.rawMode == rawOff {
		return false, nil
	}
	if c.busy {
		return true, errNested
	}
	named, err := rawArgs(c.args[:0], args)
	if err != nil {
		return true, err
	}
	c.args = named
	err = c.c.Raw(func(dc any) error {
		st, err := c.rawPrepared(ctx, dc, q, sqlText)
		if err != nil {
			return err
		}
		rows, err := st.QueryContext(ctx, named)
		if err != nil {
			return err
		}
		c.busy = true
		defer func() { c.busy = false }()
		n := len(rows.Columns())
		if cap(c.vals) < n {
			c.vals = make([]driver.Value, n)
		}
		vals := c.vals[:n]
		clear(vals)
		scan := func(dest ...any) error { return scanValues(dest, vals) }
		for {
			if err := rows.Next(vals); err != nil {
				if err == io.EOF {
					break
				}
				rows.Close()
				return err
			}
			if err := row(scan); err != nil {
				rows.Close()
				return err
			}
		}
		return rows.Close()
	})
	return c.settle(err)
}

// rawExec runs the statement q, which writes, on c and returns the rows
// it affected. ok false says the driver cannot run it directly.
func (c *ownConn) rawExec(ctx context.Context, q, sqlText string, args []any) (n int64, ok bool, err error) {
	if c.rawMode == rawOff {
		return 0, false, nil
	}
	if c.busy {
		return 0, true, errNested
	}
	named, err := rawArgs(c.args[:0], args)
	if err != nil {
		return 0, true, err
	}
	c.args = named
	err = c.c.Raw(func(dc any) error {
		st, err := c.rawPrepared(ctx, dc, q, sqlText)
		if err != nil {
			return err
		}
		res, err := st.ExecContext(ctx, named)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	ok, err = c.settle(err)
	return n, ok, err
}

// execText runs q, a statement without arguments that controls the
// transaction (BEGIN, COMMIT, ROLLBACK), on c: prepared on the driver's
// connection like the others, rather than compiled at every transaction.
func (c *ownConn) execText(ctx context.Context, q string) error {
	if _, ok, err := c.rawExec(ctx, q, q, nil); ok {
		return err
	}
	_, err := c.c.ExecContext(ctx, q)
	return err
}

// settle turns errRawUnsupported into "not run" and remembers it, so that
// the connection's statements run through database/sql from then on.
func (c *ownConn) settle(err error) (bool, error) {
	if errors.Is(err, errRawUnsupported) {
		c.rawMode = rawOff
		return false, nil
	}
	c.rawMode = rawOn
	return true, err
}

// closeRaw closes the statements prepared on c's driver connection.
func (c *ownConn) closeRaw() {
	if len(c.raw) == 0 {
		return
	}
	c.c.Raw(func(any) error {
		for _, st := range c.raw {
			st.Close()
		}
		return nil
	})
	c.raw = nil
}

// scanValues stores a row's values in dest as Rows.Scan does, for the
// kinds of destination this package reads into: *int64, *[]byte (a
// copy; nil for NULL), *string and sql.Scanner (sql.NullInt64).
func scanValues(dest []any, vals []driver.Value) error {
	if len(dest) != len(vals) {
		return fmt.Errorf("sql: expected %d destination arguments in Scan, not %d", len(vals), len(dest))
	}
	for i, d := range dest {
		v := vals[i]
		switch d := d.(type) {
		case *int64:
			switch v := v.(type) {
			case int64:
				*d = v
				continue
			}
		case *[]byte:
			switch v := v.(type) {
			case []byte:
				*d = bytes.Clone(v)
				continue
			case string:
				*d = []byte(v)
				continue
			case nil:
				*d = nil
				continue
			}
		case *string:
			switch v := v.(type) {
			case string:
				*d = v
				continue
			case []byte:
				*d = string(v)
				continue
			}
		case sql.Scanner:
			if err := d.Scan(v); err != nil {
				return fmt.Errorf("sql: Scan error on column index %d: %w", i, err)
			}
			continue
		}
		return fmt.Errorf("sql: Scan error on column index %d: cannot store %T into %T", i, v, d)
	}
	return nil
}
