// Package sqlite is the embedded metadata engine: one SQLite file in WAL
// mode holding a table per record kind (sqlstore). Several
// processes on one host may open the same file; write transactions start
// with BEGIN IMMEDIATE on their own pool, one of a process at a time (see
// sqlstore's runConn), and wait on the file lock for other processes, so
// applications never see "database is locked" (a wait that times out
// becomes a retried conflict). Reads use a second pool of deferred
// transactions, which WAL lets run beside the writer.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/sluicefs/sluice/internal/meta/engine/sqlstore"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// dialect is SQLite's SQL. Transactions take their kind (IMMEDIATE or
// deferred) from the pool, so they need no options. A concatenation of
// BLOBs yields TEXT in SQLite, hence the cast.
var dialect = sqlstore.Dialect{
	TableOptions: " WITHOUT ROWID",
	Classify:     describe,
	Int:          "INTEGER",
	Name:         "BLOB",
	Blob:         "BLOB",
	Concat:       "CAST(%s || %s AS BLOB)",
	ValuesIn:     true,
	Embedded:     true,
	BeginWrite:   "BEGIN IMMEDIATE",
	Analyze:      "ANALYZE %s",
}

// Open opens the SQLite file at path and the volume in it (see
// sqlstore.Open). With create false a missing file is an error rather
// than a new empty database. The store checkpoints the file in the
// background until it is closed (see checkpoint.go).
func Open(ctx context.Context, path string, create bool) (store.Store, error) {
	c, err := config(path, create)
	if err != nil {
		return nil, err
	}
	// The tables are created even without create: the file exists, and
	// an empty one is then reported as unformatted by meta.
	st, err := sqlstore.Open(ctx, c, true)
	if err != nil {
		return nil, fmt.Errorf("open metadata file %s: %w", path, err)
	}
	ss, ok := st.(*sqlstore.Store)
	if !ok {
		st.Close()
		return nil, fmt.Errorf("open metadata file %s: unexpected store %T", path, st)
	}
	return newStore(ss, c.Reader), nil
}

// config returns what Open opens for the file at path.
func config(path string, create bool) (sqlstore.Config, error) {
	writer, reader, err := pools(path, create)
	if err != nil {
		return sqlstore.Config{}, err
	}
	return sqlstore.Config{Name: "sqlite3://" + path, Writer: writer, Reader: reader, Dialect: dialect}, nil
}

// pools opens the writer and reader pools of the file at path.
func pools(path string, create bool) (writer, reader *sql.DB, err error) {
	if path == "" {
		return nil, nil, errors.New("sqlite3 URL has no file path (expected sqlite3://PATH)")
	}
	if !create {
		if _, err := os.Stat(path); err != nil {
			if os.IsNotExist(err) {
				return nil, nil, fmt.Errorf("metadata file %s does not exist (volume not formatted?)", path)
			}
			return nil, nil, fmt.Errorf("metadata file %s: %w", path, err)
		}
	}
	mode := "rw"
	if create {
		mode = "rwc"
	}
	dsn := func(lock string) string {
		return "file:" + url.PathEscape(path) + "?mode=" + mode +
			"&_busy_timeout=10000&_journal_mode=WAL&_synchronous=NORMAL&_txlock=" + lock
	}
	writer, err = sql.Open(driverName, dsn("immediate"))
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	reader, err = sql.Open(driverName, dsn("deferred"))
	if err != nil {
		writer.Close()
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	writer.SetMaxOpenConns(sqlstore.WriteConns + 2) // see WriteConns
	reader.SetMaxOpenConns(8)
	return writer, reader, nil
}

// describe turns SQLite's terse errors into ones a user can act on.
func describe(err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code {
		case sqlite3.ErrNotADB, sqlite3.ErrCorrupt:
			return fmt.Errorf("not a SQLite database or corrupt: %w", err)
		case sqlite3.ErrCantOpen, sqlite3.ErrPerm, sqlite3.ErrReadonly:
			return fmt.Errorf("cannot open or write the file: %w", err)
		case sqlite3.ErrBusy, sqlite3.ErrLocked:
			return sqlstore.Conflict(err)
		case sqlite3.ErrError:
			if strings.HasPrefix(se.Error(), "no such table") {
				return sqlstore.NoTable(err)
			}
		}
	}
	return err
}
