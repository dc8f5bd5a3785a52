// Package sqlkv implements kvstore.DB once over database/sql: one table
// (k PRIMARY KEY, v) holding the ordered key-value pairs kvstore lays its
// records in. It is the layout of SQL volumes formatted before package
// sqlstore, which keeps a table per record kind and serves such older
// volumes through this package; its Dialect (transactions, errors) and
// helpers (Ping, Explain, TableName) are shared by both.
//
// Transactions. Update runs fn in a write transaction begun with
// Dialect.WriteTx on the writer pool; the dialect must make it serializable
// for the keys and ranges fn reads: SQLite by BEGIN IMMEDIATE (one writer at
// a time), PostgreSQL by SERIALIZABLE isolation, InnoDB by locking every read
// (Dialect.LockReads, next-key locks cover scanned ranges). View runs fn in a
// read transaction begun with Dialect.ReadTx on the reader pool and rolls it
// back.
//
// Errors. Every driver error passes through Dialect.Classify, which marks
// lost races (serialization failures, deadlocks, lock timeouts, busy files)
// with store.ErrConflict so that kvstore retries the transaction, and
// rewords the errors a user can act on (bad password, missing database) with
// Explain. Failures to reach a server are reworded here, once for all
// dialects. Once a statement fails, the transaction is void (PostgreSQL
// aborts it, InnoDB may already have rolled it back): the Txn runs no
// further statement and Update returns that failure.
package sqlkv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// Dialect is what differs between SQL databases.
type Dialect struct {
	// Dollar selects $1, $2, ... placeholders (PostgreSQL) instead of ?.
	Dollar bool
	// KeyType and ValueType are the column types of k and v. TableOptions
	// follows the column list in CREATE TABLE (" WITHOUT ROWID",
	// " ENGINE=InnoDB").
	KeyType, ValueType, TableOptions string
	// Upsert inserts or replaces one pair: a format string with %s for the
	// table name and k, v as the first and second placeholders.
	Upsert string
	// LockReads is appended to every SELECT in a write transaction, e.g.
	// " FOR UPDATE" where reads would otherwise see an unlocked snapshot.
	LockReads string
	// WriteTx and ReadTx are the options write and read transactions begin
	// with (nil: the driver's default).
	WriteTx, ReadTx *sql.TxOptions
	// Classify maps a driver error to the error callers see (see the
	// package doc); nil keeps driver errors as they are.
	Classify func(error) error
}

// Config says what Open opens.
type Config struct {
	// Name names the database for users (DB.Name); it must not contain a
	// password.
	Name string
	// Table is the table's name, valid unquoted in the dialect (see
	// TableName).
	Table string
	// Writer runs write transactions; Reader runs read ones (nil: Writer).
	Writer, Reader *sql.DB
	Dialect        Dialect
	// ConnectTimeout bounds Open's first connection, the handshake and
	// login included (0: no bound).
	ConnectTimeout time.Duration
}

// DB is a kvstore.DB in one table of a SQL database.
type DB struct {
	name           string
	table          string
	writer, reader *sql.DB
	d              Dialect
	q              queries
	connectTimeout time.Duration
}

var _ kvstore.DB = (*DB)(nil)

// queries are the fixed statements, built once.
type queries struct {
	get, getLocked, upsert, del string
}

// Open connects to the database and, with create, creates the table if it
// does not exist; without create a missing table is an error saying the
// volume is not formatted. Open takes ownership of the pools: it closes
// them when it fails, and DB.Close closes them.
func Open(ctx context.Context, c Config, create bool) (*DB, error) {
	if c.Reader == nil {
		c.Reader = c.Writer
	}
	d := &DB{name: c.Name, table: c.Table, writer: c.Writer, reader: c.Reader, d: c.Dialect,
		connectTimeout: c.ConnectTimeout}
	d.q = queries{
		get:       "SELECT v FROM " + c.Table + " WHERE k = " + d.ph(1),
		upsert:    fmt.Sprintf(c.Dialect.Upsert, c.Table),
		del:       "DELETE FROM " + c.Table + " WHERE k = " + d.ph(1),
		getLocked: "SELECT v FROM " + c.Table + " WHERE k = " + d.ph(1) + c.Dialect.LockReads,
	}
	if err := d.connect(ctx, create); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// connect makes the first connection and creates or checks the table.
func (d *DB) connect(ctx context.Context, create bool) error {
	if err := d.ping(ctx); err != nil {
		return err
	}
	if create {
		_, err := d.writer.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+d.table+
			" (k "+d.d.KeyType+" PRIMARY KEY, v "+d.d.ValueType+" NOT NULL)"+d.d.TableOptions)
		if err != nil {
			return fmt.Errorf("create table %s: %w", d.table, d.classify(err))
		}
		return nil
	}
	rows, err := d.reader.QueryContext(ctx, "SELECT k FROM "+d.table+" LIMIT 1")
	if err != nil {
		err = d.classify(err)
		if errors.Is(err, ErrNoTable) {
			return fmt.Errorf("table %s does not exist (volume not formatted?)", d.table)
		}
		return fmt.Errorf("read table %s: %w", d.table, err)
	}
	return rows.Close()
}

// ping makes the first connection within the connect timeout.
func (d *DB) ping(ctx context.Context) error {
	return Ping(ctx, d.writer, d.connectTimeout, d.d.Describe)
}

// Ping makes the first connection of pool within timeout (0: no bound),
// the handshake and login included, and returns the failure passed
// through describe.
func Ping(ctx context.Context, pool *sql.DB, timeout time.Duration, describe func(error) error) error {
	pctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	err := pool.PingContext(pctx)
	if err == nil {
		return nil
	}
	var ne net.Error
	late := errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
	if !late || timeout == 0 || ctx.Err() != nil {
		return describe(err)
	}
	return Explain(err, fmt.Sprintf("no answer from the server within %v", timeout))
}

// ph returns the i-th (1-based) placeholder.
func (d *DB) ph(i int) string {
	if d.d.Dollar {
		return "$" + strconv.Itoa(i)
	}
	return "?"
}

// classify is d's dialect's Describe.
func (d *DB) classify(err error) error { return d.d.Describe(err) }

// Describe passes err through the dialect's Classify, then rewords a
// failure to reach the server if Classify left err as it was.
func (d Dialect) Describe(err error) error {
	if err == nil {
		return nil
	}
	if d.Classify != nil {
		if c := d.Classify(err); c != err {
			return c
		}
	}
	return describeNet(err)
}

// Name returns the name Open was given.
func (d *DB) Name() string { return d.name }

// Close closes the pools.
func (d *DB) Close() error {
	if d.reader == d.writer {
		return d.writer.Close()
	}
	return errors.Join(d.writer.Close(), d.reader.Close())
}

// Drop deletes the table and every record in it, for tests and for
// destroying a volume; d stays open but can no longer be used.
func (d *DB) Drop(ctx context.Context) error {
	_, err := d.writer.ExecContext(ctx, "DROP TABLE IF EXISTS "+d.table)
	return d.classify(err)
}

// Update runs fn in a write transaction and commits it.
func (d *DB) Update(ctx context.Context, fn func(kvstore.Txn) error) error {
	return d.run(ctx, true, fn)
}

// View runs fn in a read transaction that is rolled back.
func (d *DB) View(ctx context.Context, fn func(kvstore.Txn) error) error {
	return d.run(ctx, false, fn)
}

func (d *DB) run(ctx context.Context, write bool, fn func(kvstore.Txn) error) error {
	pool, opts := d.reader, d.d.ReadTx
	if write {
		pool, opts = d.writer, d.d.WriteTx
	}
	return d.d.Run(ctx, pool, opts, write, func(sqlTx *sql.Tx) error {
		t := &txn{ctx: ctx, db: d, tx: sqlTx, write: write}
		return Failed(fn(t), t.err)
	})
}

// Failed returns the error of a transaction's callback that returned err
// after its first failed statement returned failed (nil if none): the
// statement's failure decides when the callback dropped or replaced it,
// since it may be a conflict worth retrying.
func Failed(err, failed error) error {
	if failed != nil && !errors.Is(err, failed) {
		return failed
	}
	return err
}

// Run begins a transaction on pool with opts and runs fn in it. A write
// transaction is committed when fn returns nil; a read one is rolled
// back. Errors of the database pass through Describe.
func (d Dialect) Run(ctx context.Context, pool *sql.DB, opts *sql.TxOptions, write bool, fn func(*sql.Tx) error) error {
	sqlTx, err := pool.BeginTx(ctx, opts)
	if err != nil {
		return d.Describe(err)
	}
	if err := fn(sqlTx); err != nil {
		sqlTx.Rollback()
		return err
	}
	if !write {
		return d.Describe(sqlTx.Rollback())
	}
	return d.Describe(sqlTx.Commit())
}
