package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// errWriteInView fails a View whose callback wrote.
var errWriteInView = errors.New("write in a read-only transaction")

// inBatch bounds the values of one IN (...) list, well under every
// dialect's limit on placeholders.
const inBatch = 500

// tx is a store.Tx over one SQL transaction. Writes execute at once, so
// reads see them.
//
// A read transaction on a server begins lazily (see Store.view): its first
// statement runs alone on the pool, and the transaction begins at the
// second. tx is nil until then.
type tx struct {
	ctx   context.Context
	s     *Store
	tx    *sql.Tx
	conn  *ownConn // instead of tx: an embedded database's own connection (see connPool)
	write bool
	// begun says that a read on conn began a transaction (at its second
	// statement, as a lazy one does on the pool); it ends with a rollback.
	begun bool
	err   error // first failed statement, described; voids the transaction
	// lazy says that no statement has run yet and none is to begin a
	// transaction: the first one runs alone.
	lazy bool
}

var _ store.Tx = (*tx)(nil)

// fail records the first failure of a statement and returns it described.
func (t *tx) fail(err error) error {
	if t.err == nil {
		t.err = t.s.d.Describe(err)
	}
	return t.err
}

// statement is one statement of a transaction, ready to run.
type statement interface {
	QueryContext(ctx context.Context, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, args ...any) (sql.Result, error)
}

// conn is what runs SQL text: a transaction, or the pool for a statement
// that runs alone.
type conn interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

// text is a statement sent to the server as text; the server caches its
// plan.
type text struct {
	c conn
	q string
}

func (s text) QueryContext(ctx context.Context, args ...any) (*sql.Rows, error) {
	return s.c.QueryContext(ctx, s.q, args...)
}

func (s text) ExecContext(ctx context.Context, args ...any) (sql.Result, error) {
	return s.c.ExecContext(ctx, s.q, args...)
}

// statement returns q, as written here, ready to run in the transaction:
// prepared once when the database is embedded (compiling a statement
// costs SQLite more than running it; see Store.preparedStmt and
// ownConn.statement), otherwise as text. A SELECT (read) in a write
// transaction locks what it reads. The first statement of a lazy read
// transaction runs alone; the second begins the transaction.
func (t *tx) statement(q string, read bool) (statement, error) {
	if t.conn != nil {
		if err := t.beginOnConn(); err != nil {
			return nil, err
		}
		return t.conn.statement(t.ctx, q, t.s.sql(q, read && t.write)), nil
	}
	if t.tx == nil {
		if t.lazy {
			t.lazy = false
			if t.s.d.Embedded {
				if st := t.s.preparedStmt(q); st != nil {
					return st, nil
				}
			}
			return text{t.s.reader, t.s.sql(q, false)}, nil
		}
		sqlTx, err := t.s.reader.BeginTx(t.ctx, t.s.d.ReadTx)
		if err != nil {
			return nil, err
		}
		t.tx = sqlTx
	}
	lock := read && t.write
	if !t.s.d.Embedded {
		return text{t.tx, t.s.sql(q, lock)}, nil
	}
	if st := t.s.preparedStmt(q); st != nil { // embedded writes are on t.conn: this is a read
		return t.tx.StmtContext(t.ctx, st), nil
	}
	return text{t.tx, t.s.sql(q, lock)}, nil
}

// rawConn returns the connection to run the next statement on directly
// (see raw.go), having begun a lazy read transaction as statement does,
// or nil to run it through database/sql: the transaction is not on an
// own connection, or its driver cannot.
func (t *tx) rawConn() *ownConn {
	c := t.conn
	if c == nil || c.rawMode == rawOff || t.err != nil {
		return nil
	}
	if err := t.beginOnConn(); err != nil {
		t.fail(err)
		return nil
	}
	return c
}

// beginOnConn begins a lazy read transaction on t.conn at its second
// statement: the first runs alone (see Store.view). Writes began theirs
// in runConn.
func (t *tx) beginOnConn() error {
	if t.write || t.begun {
		return nil
	}
	if t.lazy {
		t.lazy = false
		return nil
	}
	if err := t.conn.execText(t.ctx, "BEGIN"); err != nil {
		return err
	}
	t.begun = true
	return nil
}

// query runs a SELECT.
func (t *tx) query(q string, args ...any) (*sql.Rows, error) {
	if t.err != nil {
		return nil, t.err
	}
	st, err := t.statement(q, true)
	if err != nil {
		return nil, t.fail(err)
	}
	rows, err := st.QueryContext(t.ctx, args...)
	if err != nil {
		return nil, t.fail(err)
	}
	return rows, nil
}

// row runs a SELECT of at most one row into dest and reports whether there
// was one.
func (t *tx) row(q string, args []any, dest ...any) (bool, error) {
	if c := t.rawConn(); c != nil {
		found := false
		ran, err := c.rawQuery(t.ctx, q, t.s.sql(q, t.write), args, func(scan func(...any) error) error {
			if found {
				return nil
			}
			found = true
			return scan(dest...)
		})
		if ran {
			if err != nil {
				return false, t.fail(err)
			}
			return found, nil
		}
	}
	rows, err := t.query(q, args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return false, t.fail(err)
		}
		return false, nil
	}
	if err := rows.Scan(dest...); err != nil {
		return false, t.fail(err)
	}
	return true, nil
}

// each runs a SELECT and calls scan for every row with a function that
// scans the row into its arguments.
func (t *tx) each(q string, args []any, scan func(func(...any) error) error) error {
	if c := t.rawConn(); c != nil {
		ran, err := c.rawQuery(t.ctx, q, t.s.sql(q, t.write), args, scan)
		if ran {
			if err != nil {
				return t.fail(err)
			}
			return nil
		}
	}
	rows, err := t.query(q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows.Scan); err != nil {
			return t.fail(err)
		}
	}
	if err := rows.Err(); err != nil {
		return t.fail(err)
	}
	return nil
}

// exec runs a statement that writes, and returns the rows it affected.
func (t *tx) exec(q string, args ...any) int64 {
	if t.err != nil {
		return 0
	}
	if !t.write {
		// On a server the first statement of a View runs alone and
		// would commit at once; on SQLite the rollback would drop it
		// silently.
		t.err = errWriteInView
		return 0
	}
	if c := t.rawConn(); c != nil {
		n, ran, err := c.rawExec(t.ctx, q, t.s.sql(q, false), args)
		if ran {
			if err != nil {
				t.fail(err)
			}
			return n
		}
	}
	st, err := t.statement(q, false)
	if err != nil {
		t.fail(err)
		return 0
	}
	res, err := st.ExecContext(t.ctx, args...)
	if err != nil {
		t.fail(err)
		return 0
	}
	n, err := res.RowsAffected()
	if err != nil {
		t.fail(err)
	}
	return n
}

// i64 converts an unsigned number to the bit pattern stored in a BIGINT.
func i64[T ~uint64 | ~uint32 | ~uint16 | ~uint8](v T) int64 { return int64(v) }

// limitClause returns " LIMIT n", or "" for limit <= 0.
func limitClause(limit int) string {
	if limit <= 0 {
		return ""
	}
	return " LIMIT " + strconv.Itoa(limit)
}

// Nodes

func nodeArgs(n *store.Node) []any {
	return []any{i64(n.Ino), int64(n.Type), int64(n.Flags), int64(n.Mode), int64(n.Uid), int64(n.Gid),
		n.Atime, n.Mtime, n.Ctime, int64(n.Atimensec), int64(n.Mtimensec), int64(n.Ctimensec),
		int64(n.Nlink), i64(n.Length), int64(n.Rdev), i64(n.Parent)}
}

// nodeScan holds the columns of one node row while it is scanned.
type nodeScan [16]int64

func (v *nodeScan) dest() []any { return pointers(v[:]) }

// pointers returns a pointer to each element of v, for Rows.Scan.
func pointers[T any](v []T) []any {
	d := make([]any, len(v))
	for i := range v {
		d[i] = &v[i]
	}
	return d
}

func (v *nodeScan) node() *store.Node {
	return &store.Node{Ino: store.Ino(v[0]), Type: uint8(v[1]), Flags: uint8(v[2]), Mode: uint16(v[3]),
		Uid: uint32(v[4]), Gid: uint32(v[5]), Atime: v[6], Mtime: v[7], Ctime: v[8],
		Atimensec: uint32(v[9]), Mtimensec: uint32(v[10]), Ctimensec: uint32(v[11]),
		Nlink: uint32(v[12]), Length: uint64(v[13]), Rdev: uint32(v[14]), Parent: store.Ino(v[15])}
}

// taggedScan holds a union's row: its tag, then a node's columns.
type taggedScan [1 + len(nodeScan{})]int64

func (v *taggedScan) dest() []any { return pointers(v[:]) }

// nullNodeScan holds the columns of a node that an outer join may have
// left NULL.
type nullNodeScan [16]sql.NullInt64

func (v *nullNodeScan) dest() []any { return pointers(v[:]) }

// node returns the node, or nil when the join found none.
func (v *nullNodeScan) node() *store.Node {
	if !v[0].Valid {
		return nil
	}
	var n nodeScan
	for i := range v {
		n[i] = v[i].Int64
	}
	return n.node()
}

func (t *tx) Node(ino store.Ino) (*store.Node, error) {
	var v nodeScan
	ok, err := t.row("SELECT "+nodeFields+" FROM @node WHERE ino = ?", []any{i64(ino)}, v.dest()...)
	if err != nil {
		return nil, fmt.Errorf("get node %d: %w", ino, err)
	}
	if !ok {
		return nil, store.ErrNotFound
	}
	return v.node(), nil
}

func (t *tx) Nodes(inos []store.Ino) ([]*store.Node, error) {
	found := make(map[store.Ino]*store.Node, len(inos))
	for start := 0; start < len(inos); start += inBatch {
		part := inos[start:min(start+inBatch, len(inos))]
		args := make([]any, len(part))
		for i, ino := range part {
			args[i] = i64(ino)
		}
		q := "SELECT " + nodeFields + " FROM @node WHERE ino IN (" + marks(len(part)) + ")"
		err := t.each(q, args, func(scan func(...any) error) error {
			var v nodeScan
			if err := scan(v.dest()...); err != nil {
				return err
			}
			n := v.node()
			found[n.Ino] = n
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("get nodes: %w", err)
		}
	}
	out := make([]*store.Node, len(inos))
	for i, ino := range inos {
		out[i] = found[ino]
	}
	return out, nil
}

// marks returns n comma-separated placeholders.
func marks(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

func (t *tx) SetNode(n *store.Node) {
	t.exec(t.s.upsert("node", []string{"ino"}, strings.Split(nodeFields, ", ")[1:]), nodeArgs(n)...)
}

func (t *tx) DeleteNode(ino store.Ino) { t.exec("DELETE FROM @node WHERE ino = ?", i64(ino)) }

// Edges

func (t *tx) NodeEdge(parent store.Ino, name []byte) (*store.Node, store.Edge, error) {
	if t.s.d.Embedded {
		n, e, _, err := t.union(parent, name, false)
		return n, e, err
	}
	// One round trip: the node, with its entry joined when there is one.
	var v nodeScan
	var ino, typ sql.NullInt64
	ok, err := t.row(nodeEdgeSQL, []any{name, i64(parent)}, append(v.dest(), &ino, &typ)...)
	if err != nil {
		return nil, store.Edge{}, fmt.Errorf("get node %d and entry: %w", parent, err)
	}
	if !ok {
		return nil, store.Edge{}, store.ErrNotFound
	}
	if !ino.Valid {
		return v.node(), store.Edge{}, nil
	}
	return v.node(), store.Edge{Name: append([]byte{}, name...), Ino: store.Ino(ino.Int64), Type: uint8(typ.Int64)}, nil
}

func (t *tx) Lookup(parent store.Ino, name []byte) (*store.Node, store.Edge, *store.Node, error) {
	if t.s.d.Embedded {
		return t.union(parent, name, true)
	}
	// One round trip: the node joined with its entry and the entry's node.
	var v nodeScan
	var ino, typ sql.NullInt64
	var child nullNodeScan
	dest := append(append(v.dest(), &ino, &typ), child.dest()...)
	ok, err := t.row(lookupSQL, []any{name, i64(parent)}, dest...)
	if err != nil {
		return nil, store.Edge{}, nil, fmt.Errorf("get node %d, entry and its node: %w", parent, err)
	}
	if !ok {
		return nil, store.Edge{}, nil, store.ErrNotFound
	}
	if !ino.Valid {
		return v.node(), store.Edge{}, nil, nil
	}
	e := store.Edge{Name: append([]byte{}, name...), Ino: store.Ino(ino.Int64), Type: uint8(typ.Int64)}
	return v.node(), e, child.node(), nil
}

// union is NodeEdge (follow false) and Lookup (follow true) on an
// embedded database, in one statement that returns a row per record
// found, tagged: 0 the directory, 1 the entry (its inode and type), 2 the
// node the entry names. SQLite compiles a statement again at every run
// when a bound value sits in a join's ON clause (a lookup as a join cost
// 80 µs against 23 for this), and a lazy read transaction with one
// statement needs no BEGIN (see Store.view).
func (t *tx) union(parent store.Ino, name []byte, follow bool) (*store.Node, store.Edge, *store.Node, error) {
	p, n := any(i64(parent)), any(name) // boxed once
	q, args := nodeEdgeUnionSQL, []any{p, p, n}
	if follow {
		q, args = lookupUnionSQL, []any{p, p, n, p, n}
	}
	var dir, child *store.Node
	var e store.Edge
	// One buffer for the up to three rows: a lookup is the most frequent
	// statement, and a fresh one per row cost five allocations a row.
	var row taggedScan
	dest := row.dest()
	err := t.each(q, args, func(scan func(...any) error) error {
		if err := scan(dest...); err != nil {
			return err
		}
		tag, v := row[0], (*nodeScan)(row[1:])
		switch tag {
		case 0:
			dir = v.node()
		case 1:
			e = store.Edge{Name: append([]byte{}, name...), Ino: store.Ino(v[0]), Type: uint8(v[1])}
		case 2:
			child = v.node()
		}
		return nil
	})
	if err != nil {
		return nil, store.Edge{}, nil, fmt.Errorf("get node %d and entry: %w", parent, err)
	}
	if dir == nil {
		return nil, store.Edge{}, nil, store.ErrNotFound
	}
	return dir, e, child, nil
}

// The embedded NodeEdge and Lookup queries (see tx.union).
var (
	nodeEdgeUnionSQL = "SELECT 0, " + nodeFields + " FROM @node WHERE ino = ?" +
		" UNION ALL SELECT 1, ino, type" + strings.Repeat(", 0", 14) + " FROM @edge WHERE parent = ? AND name = ?"
	lookupUnionSQL = nodeEdgeUnionSQL + " UNION ALL SELECT 2, " + nodeFields + " FROM @node" +
		" WHERE ino = (SELECT ino FROM @edge WHERE parent = ? AND name = ?)"
)

// The servers' NodeEdge and Lookup queries: a directory's node with the
// entry of a name, and for Lookup also the entry's node.
var (
	nodeEdgeSQL = "SELECT " + qualified("n") + ", e.ino, e.type FROM @node n" +
		" LEFT JOIN @edge e ON e.parent = n.ino AND e.name = ? WHERE n.ino = ?"
	lookupSQL = "SELECT " + qualified("n") + ", e.ino, e.type, " + qualified("c") + " FROM @node n" +
		" LEFT JOIN @edge e ON e.parent = n.ino AND e.name = ?" +
		" LEFT JOIN @node c ON c.ino = e.ino WHERE n.ino = ?"
)

// qualified returns the node columns qualified with the table alias a.
func qualified(a string) string { return a + "." + strings.ReplaceAll(nodeFields, ", ", ", "+a+".") }

func (t *tx) Edge(parent store.Ino, name []byte) (store.Edge, error) {
	var ino, typ int64
	ok, err := t.row("SELECT ino, type FROM @edge WHERE parent = ? AND name = ?", []any{i64(parent), name}, &ino, &typ)
	if err != nil {
		return store.Edge{}, fmt.Errorf("get entry of %d: %w", parent, err)
	}
	if !ok {
		return store.Edge{}, store.ErrNotFound
	}
	return store.Edge{Name: append([]byte{}, name...), Ino: store.Ino(ino), Type: uint8(typ)}, nil
}

func (t *tx) SetEdge(parent store.Ino, e store.Edge) {
	t.exec(t.s.upsert("edge", []string{"parent", "name"}, []string{"ino", "type"}),
		i64(parent), e.Name, i64(e.Ino), int64(e.Type))
}

func (t *tx) DeleteEdge(parent store.Ino, name []byte) {
	t.exec("DELETE FROM @edge WHERE parent = ? AND name = ?", i64(parent), name)
}

func (t *tx) Edges(parent store.Ino, after []byte, limit int) ([]store.Edge, error) {
	q, args := "SELECT name, ino, type FROM @edge WHERE parent = ?", []any{i64(parent)}
	if after != nil {
		q += " AND name > ?"
		args = append(args, after)
	}
	var out []store.Edge
	err := t.each(q+" ORDER BY name"+limitClause(limit), args, func(scan func(...any) error) error {
		var e store.Edge
		var ino, typ int64
		if err := scan(&e.Name, &ino, &typ); err != nil {
			return err
		}
		e.Ino, e.Type = store.Ino(ino), uint8(typ)
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list entries of %d: %w", parent, err)
	}
	return out, nil
}

// Symlinks and extended attributes

// bytesOf reads one byte string, or ErrNotFound.
func (t *tx) bytesOf(what, q string, args ...any) ([]byte, error) {
	var v []byte
	ok, err := t.row(q, args, &v)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", what, err)
	}
	if !ok {
		return nil, store.ErrNotFound
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

func (t *tx) Symlink(ino store.Ino) ([]byte, error) {
	return t.bytesOf("symlink", "SELECT target FROM @symlink WHERE ino = ?", i64(ino))
}

func (t *tx) SetSymlink(ino store.Ino, target []byte) {
	t.exec(t.s.upsert("symlink", []string{"ino"}, []string{"target"}), i64(ino), nonNil(target))
}

func (t *tx) DeleteSymlink(ino store.Ino) { t.exec("DELETE FROM @symlink WHERE ino = ?", i64(ino)) }

// nonNil returns b, or an empty byte string for nil, which drivers would
// store as NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func (t *tx) Xattr(ino store.Ino, name string) ([]byte, error) {
	return t.bytesOf("xattr", "SELECT value FROM @xattr WHERE ino = ? AND name = ?", i64(ino), []byte(name))
}

func (t *tx) SetXattr(ino store.Ino, name string, value []byte) {
	t.exec(t.s.upsert("xattr", []string{"ino", "name"}, []string{"value"}), i64(ino), []byte(name), nonNil(value))
}

func (t *tx) DeleteXattr(ino store.Ino, name string) {
	t.exec("DELETE FROM @xattr WHERE ino = ? AND name = ?", i64(ino), []byte(name))
}

func (t *tx) XattrNames(ino store.Ino) ([]string, error) {
	var out []string
	err := t.each("SELECT name FROM @xattr WHERE ino = ? ORDER BY name", []any{i64(ino)}, func(scan func(...any) error) error {
		var name []byte
		if err := scan(&name); err != nil {
			return err
		}
		out = append(out, string(name))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list xattrs of %d: %w", ino, err)
	}
	return out, nil
}

// Chunks

func (t *tx) Chunk(ino store.Ino, idx uint32) ([]store.Slice, error) {
	v, err := t.bytesOf("chunk", "SELECT slices FROM @chunk WHERE ino = ? AND idx = ?", i64(ino), int64(idx))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("chunk %d of inode %d: %w", idx, ino, err)
	}
	ss, err := store.DecodeSlices(v)
	if err != nil {
		return nil, fmt.Errorf("chunk %d of inode %d: %w", idx, ino, err)
	}
	return ss, nil
}

func (t *tx) AppendSlice(ino store.Ino, idx uint32, s store.Slice) {
	// The append happens in the database: the slice list is not read.
	b := store.EncodeSlice(nil, s)
	if t.exec(t.s.appendSlice, b, i64(ino), int64(idx)) == 0 && t.err == nil {
		t.exec("INSERT INTO @chunk (ino, idx, slices) VALUES (?, ?, ?)", i64(ino), int64(idx), b)
	}
}

func (t *tx) SetChunk(ino store.Ino, idx uint32, slices []store.Slice) {
	if len(slices) == 0 {
		t.exec("DELETE FROM @chunk WHERE ino = ? AND idx = ?", i64(ino), int64(idx))
		return
	}
	t.exec(t.s.upsert("chunk", []string{"ino", "idx"}, []string{"slices"}), i64(ino), int64(idx), store.EncodeSlices(slices))
}

func (t *tx) ChunkIndexes(ino store.Ino, from uint32, limit int) ([]uint32, error) {
	var out []uint32
	q := "SELECT idx FROM @chunk WHERE ino = ? AND idx >= ? ORDER BY idx" + limitClause(limit)
	err := t.each(q, []any{i64(ino), int64(from)}, func(scan func(...any) error) error {
		var idx int64
		err := scan(&idx)
		out = append(out, uint32(idx))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list chunks of %d: %w", ino, err)
	}
	return out, nil
}

// Slice references

// number reads one integer; ok is false when there is no row.
func (t *tx) number(q string, args ...any) (v int64, ok bool, err error) {
	ok, err = t.row(q, args, &v)
	return v, ok, err
}

func (t *tx) SliceRef(id uint64, size uint32) (int64, error) {
	v, _, err := t.number("SELECT extra FROM @sliceref WHERE id = ? AND size = ?", i64(id), int64(size))
	if err != nil {
		return 0, fmt.Errorf("get references of slice %d: %w", id, err)
	}
	return v, nil
}

func (t *tx) SetSliceRef(id uint64, size uint32, extra int64) {
	if extra == 0 {
		t.exec("DELETE FROM @sliceref WHERE id = ? AND size = ?", i64(id), int64(size))
		return
	}
	t.exec(t.s.upsert("sliceref", []string{"id", "size"}, []string{"extra"}), i64(id), int64(size), extra)
}

func (t *tx) AddSliceRef(id uint64, size uint32, delta int64) {
	extra, err := t.SliceRef(id, size)
	if err != nil {
		t.fail(err)
		return
	}
	t.SetSliceRef(id, size, extra+delta)
}

// Counters and settings

func (t *tx) Counter(name string) (int64, error) {
	v, _, err := t.number("SELECT value FROM @counter WHERE name = ?", []byte(name))
	if err != nil {
		return 0, fmt.Errorf("get counter %s: %w", name, err)
	}
	return v, nil
}

func (t *tx) SetCounter(name string, v int64) {
	if v == 0 {
		t.exec("DELETE FROM @counter WHERE name = ?", []byte(name))
		return
	}
	t.exec(t.s.upsert("counter", []string{"name"}, []string{"value"}), []byte(name), v)
}

func (t *tx) Setting() ([]byte, error) {
	return t.bytesOf("setting", "SELECT value FROM @setting WHERE id = 1")
}

func (t *tx) SetSetting(v []byte) {
	if len(v) == 0 {
		t.exec("DELETE FROM @setting WHERE id = 1")
		return
	}
	t.exec(t.s.upsert("setting", []string{"id"}, []string{"value"}), int64(1), v)
}

// Sessions

func (t *tx) Sessions() ([]store.Session, error) {
	var out []store.Session
	err := t.each("SELECT sid, heartbeat, info FROM @session ORDER BY sid", nil, func(scan func(...any) error) error {
		var s store.Session
		var sid int64
		if err := scan(&sid, &s.Heartbeat, &s.Info); err != nil {
			return err
		}
		s.Sid = uint64(sid)
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

func (t *tx) SetSession(s store.Session) {
	t.exec(t.s.upsert("session", []string{"sid"}, []string{"heartbeat", "info"}), i64(s.Sid), s.Heartbeat, nonNil(s.Info))
}

func (t *tx) DeleteSession(sid uint64) { t.exec("DELETE FROM @session WHERE sid = ?", i64(sid)) }

// inodes lists the ino column of the rows of table with sid.
func (t *tx) inodes(table string, sid uint64) ([]store.Ino, error) {
	var out []store.Ino
	err := t.each("SELECT ino FROM @"+table+" WHERE sid = ? ORDER BY ino", []any{i64(sid)}, func(scan func(...any) error) error {
		var ino int64
		err := scan(&ino)
		out = append(out, store.Ino(ino))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list %s inodes of session %d: %w", table, sid, err)
	}
	return out, nil
}

// mark adds (on) or removes the row (sid, ino) of table.
func (t *tx) mark(table string, sid uint64, ino store.Ino, on bool) {
	if on {
		t.exec(t.s.upsert(table, []string{"sid", "ino"}, nil), i64(sid), i64(ino))
	} else {
		t.exec("DELETE FROM @"+table+" WHERE sid = ? AND ino = ?", i64(sid), i64(ino))
	}
}

func (t *tx) Sustained(sid uint64) ([]store.Ino, error) { return t.inodes("sustained", sid) }

func (t *tx) SetSustained(sid uint64, ino store.Ino, on bool) { t.mark("sustained", sid, ino, on) }

func (t *tx) Unsynced(sid uint64) ([]store.UnsyncedSlice, error) {
	var out []store.UnsyncedSlice
	err := t.each("SELECT id, size, ino, idx FROM @unsynced WHERE sid = ?", []any{i64(sid)}, func(scan func(...any) error) error {
		var id, size, ino, idx int64
		err := scan(&id, &size, &ino, &idx)
		out = append(out, store.UnsyncedSlice{Id: uint64(id), Size: uint32(size), Ino: store.Ino(ino), Idx: uint32(idx)})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list unsynced slices of session %d: %w", sid, err)
	}
	return out, nil
}

func (t *tx) SetUnsynced(sid uint64, s store.UnsyncedSlice, on bool) {
	if on {
		t.exec(t.s.upsert("unsynced", []string{"sid", "id", "size"}, []string{"ino", "idx"}),
			i64(sid), i64(s.Id), int64(s.Size), i64(uint64(s.Ino)), int64(s.Idx))
	} else {
		t.exec("DELETE FROM @unsynced WHERE sid = ? AND id = ? AND size = ?", i64(sid), i64(s.Id), int64(s.Size))
	}
}

// Locks

// lockTable returns the table of lock kind.
func lockTable(kind byte) (string, error) {
	switch kind {
	case store.LockFlock:
		return "flock", nil
	case store.LockPosix:
		return "plock", nil
	}
	return "", fmt.Errorf("unknown lock kind %q", kind)
}

func (t *tx) Locks(ino store.Ino, kind byte) ([]store.LockRecord, error) {
	table, err := lockTable(kind)
	if err != nil {
		return nil, err
	}
	var out []store.LockRecord
	q := "SELECT sid, owner, data FROM @" + table + " WHERE ino = ? ORDER BY sid, owner"
	err = t.each(q, []any{i64(ino)}, func(scan func(...any) error) error {
		var r store.LockRecord
		var sid, owner int64
		if err := scan(&sid, &owner, &r.Data); err != nil {
			return err
		}
		r.Sid, r.Owner = uint64(sid), uint64(owner)
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list locks of %d: %w", ino, err)
	}
	return out, nil
}

func (t *tx) SetLock(ino store.Ino, kind byte, r store.LockRecord) {
	table, err := lockTable(kind)
	if err != nil {
		t.fail(err)
		return
	}
	if len(r.Data) == 0 {
		t.exec("DELETE FROM @"+table+" WHERE ino = ? AND sid = ? AND owner = ?", i64(ino), i64(r.Sid), i64(r.Owner))
		return
	}
	t.exec(t.s.upsert(table, []string{"ino", "sid", "owner"}, []string{"data"}), i64(ino), i64(r.Sid), i64(r.Owner), r.Data)
}

func (t *tx) LockedInodes(sid uint64) ([]store.Ino, error) { return t.inodes("lockedinode", sid) }

func (t *tx) SetLockedInode(sid uint64, ino store.Ino, on bool) { t.mark("lockedinode", sid, ino, on) }

// Deletion queues

func (t *tx) DelFiles(limit int) ([]store.DelFile, error) {
	out, _, err := t.delFiles(nil, limit)
	return out, err
}

func (t *tx) SetDelFile(f store.DelFile, on bool) {
	if on {
		t.exec(t.s.upsert("delfile", []string{"ino", "length"}, []string{"expire"}), i64(f.Ino), i64(f.Length), f.Expire)
	} else {
		t.exec("DELETE FROM @delfile WHERE ino = ? AND length = ?", i64(f.Ino), i64(f.Length))
	}
}

func (t *tx) DelSlices(limit int) ([]store.Slice, error) {
	out, _, err := t.delSlices(nil, limit)
	return out, err
}

func (t *tx) SetDelSlice(id uint64, size uint32, on bool) {
	if on {
		t.exec(t.s.upsert("delslice", []string{"id", "size"}, nil), i64(id), int64(size))
	} else {
		t.exec("DELETE FROM @delslice WHERE id = ? AND size = ?", i64(id), int64(size))
	}
}

func (t *tx) Truncations(limit int) ([]store.Truncation, error) {
	var out []store.Truncation
	err := t.each("SELECT ino, from_idx FROM @truncation ORDER BY ino"+limitClause(limit), nil, func(scan func(...any) error) error {
		var ino, from int64
		err := scan(&ino, &from)
		out = append(out, store.Truncation{Ino: store.Ino(ino), From: uint32(from)})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list truncations: %w", err)
	}
	return out, nil
}

func (t *tx) SetTruncation(tr store.Truncation, on bool) {
	if on {
		t.exec(t.s.upsert("truncation", []string{"ino"}, []string{"from_idx"}), i64(tr.Ino), int64(tr.From))
	} else {
		t.exec("DELETE FROM @truncation WHERE ino = ?", i64(tr.Ino))
	}
}
