// Package sqlstore implements store.Store once over database/sql, in one
// table per record kind, each keyed by the record's natural primary key:
//
//	node(ino)                      attributes, one column per field
//	edge(parent, name)             directory entries: ino, type
//	symlink(ino)                   target
//	xattr(ino, name)               value
//	chunk(ino, idx)                slice list (store.EncodeSlices)
//	sliceref(id, size)             extra references
//	counter(name)                  value
//	setting(id)                    the volume settings blob (id 1)
//	session(sid)                   heartbeat, info
//	sustained(sid, ino)            inodes a session keeps open
//	flock, plock(ino, sid, owner)  lock records
//	lockedinode(sid, ino)          inodes a session holds locks on
//	delfile(ino, length)           files waiting for data deletion: expire
//	delslice(id, size)             slices waiting for block deletion
//	truncation(ino)                truncations to finish: from
//
// Every table name carries the volume's table prefix. Primary keys serve
// every lookup and every range the core reads (a directory's entries in
// name order, a file's chunks, a session's inodes), so no secondary index
// is needed; unsigned 64-bit numbers are stored as BIGINT bit patterns.
// The SQL engines (sqlite, postgres, mysql) are thin adapters that open
// the *sql.DB handles and describe their SQL in a Dialect.
//
// Transactions. Update runs fn in a write transaction begun with
// Dialect.WriteTx on the writer pool (on an embedded database, with
// Dialect.BeginWrite on a connection the store keeps; see connPool),
// which the dialect makes serializable
// for the rows and ranges fn reads: SQLite by BEGIN IMMEDIATE (one writer
// at a time), PostgreSQL by SERIALIZABLE isolation, InnoDB by locking every
// read (Dialect.LockReads; next-key locks cover scanned ranges). It is
// retried on conflict. Statements execute at once, so reads see the
// transaction's writes. View runs on the reader pool (see Store.view).
//
// Errors. Every driver error passes through Dialect.Classify, which marks
// lost races (serialization failures, deadlocks, lock timeouts, busy files)
// with store.ErrConflict (Conflict) so that Update retries, and rewords the
// errors a user can act on (bad password, missing database) with Explain.
// Failures to reach a server are reworded here, once for all dialects.
// Once a statement fails, the transaction is void (PostgreSQL aborts it,
// InnoDB may already have rolled it back): the Tx runs no further
// statement and Update returns that failure.
//
// This is the one SQL layout. A change to it comes with a new
// meta.MetaVersion and a migration.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Dialect is what differs between SQL databases.
type Dialect struct {
	// Dollar selects $1, $2, ... placeholders (PostgreSQL) instead of ?.
	Dollar bool
	// TableOptions follows the column list in CREATE TABLE
	// (" ENGINE=InnoDB").
	TableOptions string
	// LockReads is appended to every SELECT in a write transaction, e.g.
	// " FOR UPDATE" where reads would otherwise see an unlocked snapshot.
	LockReads string
	// WriteTx and ReadTx are the options write and read transactions begin
	// with (nil: the driver's default).
	WriteTx, ReadTx *sql.TxOptions
	// Classify maps a driver error to the error callers see (see the
	// package doc); nil keeps driver errors as they are.
	Classify func(error) error
	// Int is the column type of integers (64-bit, signed).
	Int string
	// Name is the column type of names in keys (entry, xattr and counter
	// names, up to 255 bytes); Blob that of other byte strings.
	Name, Blob string
	// Concat is a format string with two %s that concatenates two byte
	// strings and yields a byte string.
	Concat string
	// OnDuplicateKey selects MySQL's INSERT ... ON DUPLICATE KEY UPDATE
	// instead of INSERT ... ON CONFLICT (...) DO UPDATE for upserts.
	OnDuplicateKey bool
	// ValuesIn says that a list of rows on the right of IN is written as
	// a subquery, IN (VALUES (?, ?), ...) (SQLite), rather than as
	// IN ((?, ?), ...).
	ValuesIn bool
	// Analyze is the statement that refreshes the planner's statistics
	// of one table, %s standing for its name ("" for none).
	Analyze string
	// Embedded says that the database runs in the process (SQLite), so a
	// statement costs no round trip: statements are kept prepared rather
	// than compiled at every call, writes run on connections the store
	// keeps (see connPool), and what a server is asked in one joined
	// query is asked as a UNION ALL of primary-key lookups (see
	// tx.union).
	Embedded bool
	// BeginWrite is the statement that begins a write transaction on an
	// embedded database ("BEGIN IMMEDIATE"); required with Embedded.
	BeginWrite string
}

// Config says what Open opens.
type Config struct {
	// Name names the database for users (Store.Name); no password in it.
	Name string
	// Prefix starts every table name; valid unquoted in the dialect (see
	// TablePrefix).
	Prefix string
	// Writer runs write transactions; Reader runs read ones (nil: Writer).
	Writer, Reader *sql.DB
	Dialect        Dialect
	// ConnectTimeout bounds Open's first connection (0: no bound).
	ConnectTimeout time.Duration
}

// Store is a store.Store in tables of a SQL database.
type Store struct {
	name           string
	prefix         string
	writer, reader *sql.DB
	d              Dialect
	// stmts maps SQL as written here to SQL for the database, without
	// and with the dialect's locking clause (LockReads).
	stmts [2]sync.Map
	// prepared holds an embedded database's reads prepared on the reader
	// pool (SQL → *sql.Stmt); pending, those run as text because they
	// were not prepared yet, which the next read transaction prepares
	// before it begins (see preparedStmt). Writes keep theirs on their
	// connections (connPool).
	prepared, pending sync.Map
	upserts           sync.Map // table → its upsert statement
	// appendSlice appends a slice to a chunk's list inside the database.
	appendSlice string
	// conns runs the writes of an embedded database; nil otherwise.
	conns *connPool
	// writeMu lets one write transaction of this process at a time begin
	// on an embedded database (see runConn).
	writeMu sync.Mutex
}

var _ store.Store = (*Store)(nil)

// Open connects to the database and returns the store of the volume in
// its tables. When they do not exist, Open creates them with create, and
// without fails saying the volume is not formatted; it refuses a database
// that holds the one key-value table of early versions.
//
// Open takes ownership of the pools: it closes them when it fails, and the
// store's Close closes them.
func Open(ctx context.Context, c Config, create bool) (store.Store, error) {
	if c.Reader == nil {
		c.Reader = c.Writer
	}
	s := &Store{name: c.Name, prefix: c.Prefix, writer: c.Writer, reader: c.Reader, d: c.Dialect,
		appendSlice: "UPDATE @chunk SET slices = " + fmt.Sprintf(c.Dialect.Concat, "slices", "?") + " WHERE ino = ? AND idx = ?"}
	if c.Dialect.Embedded {
		s.conns = newConnPool(c.Writer)
	}
	st, err := s.open(ctx, c, create)
	if err != nil {
		s.Close()
		return nil, err
	}
	return st, nil
}

// OpenURL opens the volume in the database rawURL names (see Open);
// config is the engine's: it parses the URL and makes the pools. Errors
// name the database, without its password.
func OpenURL(ctx context.Context, rawURL string, create bool, config func(string) (Config, error)) (store.Store, error) {
	c, err := config(rawURL)
	if err != nil {
		return nil, err
	}
	st, err := Open(ctx, c, create)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name, err)
	}
	return st, nil
}

func (s *Store) open(ctx context.Context, c Config, create bool) (store.Store, error) {
	if err := ping(ctx, s.writer, c.ConnectTimeout, s.d.Describe); err != nil {
		return nil, err
	}
	have, err := s.exists(ctx, s.table("node"))
	if err != nil {
		return s, err
	}
	if have {
		return s, s.upgradeTables(ctx)
	}
	// Volumes formatted by early versions kept every record in one
	// key-value table, a layout no longer read: refuse rather than format
	// a new volume beside its records.
	if old, err := s.exists(ctx, s.table("kv")); err != nil || old {
		if err == nil {
			err = fmt.Errorf("table %s holds a volume in the key-value layout of early sluice versions, which this version no longer reads: dump it with the version that formatted it and load the dump", s.table("kv"))
		}
		return nil, err
	}
	if !create {
		return nil, fmt.Errorf("table %s does not exist (volume not formatted?)", s.table("node"))
	}
	return s, s.createTables(ctx)
}

// exists reports whether table exists.
func (s *Store) exists(ctx context.Context, table string) (bool, error) {
	rows, err := s.reader.QueryContext(ctx, "SELECT 1 FROM "+table+" LIMIT 1")
	if err != nil {
		err = s.d.Describe(err)
		if errors.Is(err, ErrNoTable) {
			return false, nil
		}
		return false, fmt.Errorf("read table %s: %w", table, err)
	}
	return true, rows.Close()
}

// table returns the name of the table of kind.
func (s *Store) table(kind string) string { return s.prefix + kind }

// sql returns the statement q for the database: every "@kind" becomes the
// name of the kind's table, for PostgreSQL every ? a numbered
// placeholder, and with lock the dialect's LockReads clause ends it.
// Statements are rewritten once and remembered.
func (s *Store) sql(q string, lock bool) string {
	m := &s.stmts[0]
	if lock {
		m = &s.stmts[1]
	}
	if v, ok := m.Load(q); ok {
		return v.(string)
	}
	r := s.rewrite(q, lock)
	m.Store(q, r)
	return r
}

// rewrite returns the statement q for the database, as sql does, without
// remembering it.
func (s *Store) rewrite(q string, lock bool) string {
	var b strings.Builder
	b.Grow(len(q) + len(q)/2)
	n := 0
	for i := 0; i < len(q); i++ {
		switch c := q[i]; {
		case c == '@':
			b.WriteString(s.prefix)
		case c == '?' && s.d.Dollar:
			n++
			b.WriteString("$" + strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	if lock {
		b.WriteString(s.d.LockReads)
	}
	return b.String()
}

// preparedStmt returns the read q (as written here) prepared on the
// reader pool, or nil when it is not prepared yet. A statement is
// prepared once and kept until Close.
//
// A statement is never prepared inside a transaction, which would take a
// second connection from the pool while the transaction holds one: a
// statement that is not prepared yet runs as text and is queued, and
// preparePending prepares it before the next read transaction begins.
func (s *Store) preparedStmt(q string) *sql.Stmt {
	if v, ok := s.prepared.Load(q); ok {
		return v.(*sql.Stmt)
	}
	s.pending.Store(q, struct{}{})
	return nil
}

// preparePending prepares the statements queued by preparedStmt on the
// reader pool, outside any transaction. A statement that fails to prepare
// is dropped: it fails again, with the error reported, when a transaction
// runs it.
func (s *Store) preparePending(ctx context.Context) {
	s.pending.Range(func(k, _ any) bool {
		q := k.(string)
		s.pending.Delete(q)
		if _, ok := s.prepared.Load(q); ok {
			return true
		}
		st, err := s.reader.PrepareContext(ctx, s.sql(q, false))
		if err != nil {
			return ctx.Err() == nil
		}
		if _, loaded := s.prepared.LoadOrStore(q, st); loaded {
			st.Close()
		}
		return true
	})
}

// upsert returns the statement that inserts a row of table, or replaces
// the values of the row with the same keys. Each table has one upsert,
// built at its first use.
func (s *Store) upsert(table string, keys, vals []string) string {
	if v, ok := s.upserts.Load(table); ok {
		return v.(string)
	}
	q := s.buildUpsert(table, keys, vals)
	s.upserts.Store(table, q)
	return q
}

func (s *Store) buildUpsert(table string, keys, vals []string) string {
	return s.buildUpserts(table, keys, vals, 1)
}

// buildUpserts returns the upsert of rows rows of table (see upsert).
func (s *Store) buildUpserts(table string, keys, vals []string, rows int) string {
	cols := append(append([]string{}, keys...), vals...)
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
	q := "INSERT INTO @" + table + " (" + strings.Join(cols, ", ") + ") VALUES " +
		strings.TrimSuffix(strings.Repeat(row+", ", rows), ", ")
	var set []string
	if s.d.OnDuplicateKey {
		if len(vals) == 0 {
			vals = keys[:1] // no values: keep the row
		}
		for _, v := range vals {
			set = append(set, v+" = VALUES("+v+")")
		}
		return q + " ON DUPLICATE KEY UPDATE " + strings.Join(set, ", ")
	}
	if len(vals) == 0 {
		return q + " ON CONFLICT (" + strings.Join(keys, ", ") + ") DO NOTHING"
	}
	for _, v := range vals {
		set = append(set, v+" = excluded."+v)
	}
	return q + " ON CONFLICT (" + strings.Join(keys, ", ") + ") DO UPDATE SET " + strings.Join(set, ", ")
}

// Name returns the name Open was given.
func (s *Store) Name() string { return s.name }

// Close closes the prepared statements and the pools.
func (s *Store) Close() error {
	if s.conns != nil {
		s.conns.close()
	}
	s.prepared.Range(func(_, v any) bool {
		v.(*sql.Stmt).Close()
		return true
	})
	if s.reader == s.writer {
		return s.writer.Close()
	}
	return errors.Join(s.writer.Close(), s.reader.Close())
}

// Update runs fn in a write transaction and commits it, retrying on
// conflict (store.Retry).
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	return store.Retry(ctx, func() error { return s.run(ctx, true, fn) })
}

// View runs fn in a read transaction that is rolled back.
func (s *Store) View(ctx context.Context, fn func(store.Tx) error) error {
	return s.run(ctx, false, fn)
}

func (s *Store) run(ctx context.Context, write bool, fn func(store.Tx) error) error {
	if s.d.Embedded {
		if err := ctx.Err(); err != nil {
			return err
		}
		// An embedded statement cannot hang on a network, and its lock
		// waits end with the busy timeout. With a context that can be
		// cancelled, the driver runs every statement on a goroutine of
		// its own to watch it, and database/sql one per result set: two
		// thread wake-ups per statement, which cost more than the
		// statement. The caller's deadline is
		// checked between transactions, as above.
		ctx = context.WithoutCancel(ctx)
	}
	if !write {
		return s.view(ctx, fn)
	}
	if s.conns != nil {
		return s.runConn(ctx, fn)
	}
	return s.d.run(ctx, s.writer, s.d.WriteTx, write, func(sqlTx *sql.Tx) error {
		t := &tx{ctx: ctx, s: s, tx: sqlTx, write: write}
		return failed(fn(t), t.err)
	})
}

// view runs fn as a read transaction that begins only when fn runs a
// second statement: a lookup or a getattr is one statement, and one round
// trip rather than three with BEGIN and ROLLBACK. Embedded, where there
// is no round trip, the BEGIN and ROLLBACK still cost more than the
// statement (a getattr took 39 µs in a transaction on SQLite). Its first
// statement then reads at an earlier point than the rest, which the core
// allows (a View promises each read is current when made, as the
// key-value engines give it, not one snapshot across reads).
//
// Embedded, a read runs on an idle connection of the writer pool when
// there is one, the one used last: SQLite drops a connection's page cache
// whenever another connection has written, so after a write the reader
// pool's connections read every page again from the log, while the
// writer's is warm (a lookup after a create: 45 against 12 µs).
func (s *Store) view(ctx context.Context, fn func(store.Tx) error) error {
	if s.conns != nil {
		if c := s.conns.tryGetRead(); c != nil {
			return s.viewConn(ctx, c, fn)
		}
	}
	if s.d.Embedded {
		s.preparePending(ctx)
	}
	t := &tx{ctx: ctx, s: s, lazy: true}
	err := failed(fn(t), t.err)
	if t.tx == nil {
		return err
	}
	if rerr := t.tx.Rollback(); err == nil {
		err = s.d.Describe(rerr)
	}
	return err
}

// viewConn runs fn as a read transaction on c, an idle connection of the
// writer pool, lazily as view does, and gives c back.
func (s *Store) viewConn(ctx context.Context, c *ownConn, fn func(store.Tx) error) (err error) {
	t := &tx{ctx: ctx, s: s, conn: c, lazy: true}
	defer func() {
		var rerr error
		if t.begun {
			rerr = c.execText(ctx, "ROLLBACK")
		}
		s.conns.putRead(c, joined(err, rerr))
	}()
	err = failed(fn(t), t.err)
	return err
}
