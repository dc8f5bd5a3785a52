// Package sqlite is the embedded metadata engine: one SQLite file in WAL
// mode holding an ordered key-value table behind kvstore. Several processes
// on one host may open the same file; write transactions start with BEGIN
// IMMEDIATE and wait on the file lock, so applications never see "database
// is locked" (a wait that times out becomes a retried conflict).
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

	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// DB is a kvstore.DB in a SQLite file.
type DB struct {
	path   string
	writer *sql.DB // BEGIN IMMEDIATE transactions
	reader *sql.DB // deferred (read) transactions
}

var _ kvstore.DB = (*DB)(nil)

// Open opens the SQLite file at path. With create false a missing file is an
// error rather than a new empty database.
func Open(ctx context.Context, path string, create bool) (*DB, error) {
	if path == "" {
		return nil, errors.New("sqlite3 URL has no file path (expected sqlite3://PATH)")
	}
	if !create {
		if _, err := os.Stat(path); err != nil {
			if os.IsNotExist(err) {
				return nil, fmt.Errorf("metadata file %s does not exist (volume not formatted?)", path)
			}
			return nil, fmt.Errorf("metadata file %s: %w", path, err)
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
	writer, err := sql.Open("sqlite3", dsn("immediate"))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	reader, err := sql.Open("sqlite3", dsn("deferred"))
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	writer.SetMaxOpenConns(4)
	reader.SetMaxOpenConns(8)
	d := &DB{path: path, writer: writer, reader: reader}
	if _, err := writer.ExecContext(ctx,
		"CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID"); err != nil {
		d.Close()
		return nil, fmt.Errorf("open metadata file %s: %w", path, describe(err))
	}
	return d, nil
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
			return fmt.Errorf("%w: %v", store.ErrConflict, err)
		}
	}
	return err
}

// Name returns the URL of the database.
func (d *DB) Name() string { return "sqlite3://" + d.path }

// Close closes both connection pools.
func (d *DB) Close() error {
	return errors.Join(d.writer.Close(), d.reader.Close())
}

// Update runs fn in an IMMEDIATE transaction.
func (d *DB) Update(ctx context.Context, fn func(kvstore.Txn) error) error {
	return d.run(ctx, d.writer, fn)
}

// View runs fn in a deferred transaction that is rolled back.
func (d *DB) View(ctx context.Context, fn func(kvstore.Txn) error) error {
	return d.run(ctx, d.reader, fn)
}

func (d *DB) run(ctx context.Context, db *sql.DB, fn func(kvstore.Txn) error) error {
	sqlTx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return describe(err)
	}
	t := &txn{ctx: ctx, tx: sqlTx}
	if err := fn(t); err != nil {
		sqlTx.Rollback()
		return err
	}
	if t.err != nil {
		sqlTx.Rollback()
		return describe(t.err)
	}
	if db == d.reader {
		return sqlTx.Rollback()
	}
	return describe(sqlTx.Commit())
}

type txn struct {
	ctx context.Context
	tx  *sql.Tx
	err error // first write failure
}

func (t *txn) Get(key []byte) ([]byte, error) {
	var v []byte
	err := t.tx.QueryRowContext(t.ctx, "SELECT v FROM kv WHERE k = ?", key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, describe(err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

func (t *txn) GetMany(keys [][]byte) ([][]byte, error) {
	out := make([][]byte, len(keys))
	const batch = 500
	for start := 0; start < len(keys); start += batch {
		part := keys[start:min(start+batch, len(keys))]
		args := make([]any, len(part))
		for i, k := range part {
			args[i] = k
		}
		q := "SELECT k, v FROM kv WHERE k IN (?" + strings.Repeat(",?", len(part)-1) + ")"
		rows, err := t.tx.QueryContext(t.ctx, q, args...)
		if err != nil {
			return nil, describe(err)
		}
		found := map[string][]byte{}
		for rows.Next() {
			var k, v []byte
			if err := rows.Scan(&k, &v); err != nil {
				rows.Close()
				return nil, describe(err)
			}
			if v == nil {
				v = []byte{}
			}
			found[string(k)] = v
		}
		if err := rows.Close(); err != nil {
			return nil, describe(err)
		}
		for i, k := range part {
			out[start+i] = found[string(k)]
		}
	}
	return out, nil
}

func (t *txn) Scan(begin, end []byte, limit int) ([]kvstore.Pair, error) {
	q := "SELECT k, v FROM kv WHERE k >= ?"
	args := []any{begin}
	if end != nil {
		q += " AND k < ?"
		args = append(args, end)
	}
	q += " ORDER BY k"
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := t.tx.QueryContext(t.ctx, q, args...)
	if err != nil {
		return nil, describe(err)
	}
	defer rows.Close()
	var out []kvstore.Pair
	for rows.Next() {
		var p kvstore.Pair
		if err := rows.Scan(&p.Key, &p.Value); err != nil {
			return nil, describe(err)
		}
		out = append(out, p)
	}
	return out, describe(rows.Err())
}

func (t *txn) Set(key, value []byte) {
	if value == nil {
		value = []byte{}
	}
	t.exec("INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)", key, value)
}

func (t *txn) Delete(key []byte) { t.exec("DELETE FROM kv WHERE k = ?", key) }

func (t *txn) exec(q string, args ...any) {
	if t.err != nil {
		return
	}
	if _, err := t.tx.ExecContext(t.ctx, q, args...); err != nil {
		t.err = err
	}
}
