package sqlstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Batched reads and bulk writes for whole-volume work (store.BatchReader,
// store.BulkWriter). A batched read is one SELECT ... IN (...) per inBatch
// keys; a bulk write is one transaction of multi-row upserts, each of as
// many rows as the placeholder and packet limits allow.
//
// Statements of many rows come in few sizes, so that the statements an
// embedded database keeps prepared, and those a server or its driver
// caches, stay few: an IN list is padded (with repeats of its last key) to
// a power of two or inBatch, and an upsert has bulkRows rows, except the
// last of a table, which on an embedded database is split into powers of
// two and on a server is sent as one statement that is not remembered.

const (
	// bulkParams bounds the placeholders of one statement: under SQLite's
	// 32766 (since 3.32) and PostgreSQL's and MySQL's 65535.
	bulkParams = 30000
	// bulkBytes bounds the byte strings of one statement on a server:
	// well under MySQL's max_allowed_packet (16 MiB by default on
	// MariaDB, 64 MiB on MySQL 8; the statement is sent as text).
	bulkBytes = 4 << 20
	// embeddedRows bounds the rows of one statement on an embedded
	// database, where a statement costs no round trip: bigger ones only
	// take longer to prepare.
	embeddedRows = 256
)

var _ store.BatchReader = (*tx)(nil)

// padded returns the length an IN list of n keys is sent with: a power of
// two from 8 on, or inBatch.
func padded(n int) int {
	p := 8
	for p < n {
		p *= 2
	}
	return min(p, inBatch)
}

// rowsIn returns the right side of IN for n rows of width placeholders.
func (s *Store) rowsIn(n, width int) string {
	if width == 1 {
		return "(" + marks(n) + ")"
	}
	row := "(" + marks(width) + ")"
	rows := strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
	if s.d.ValuesIn {
		return "(VALUES " + rows + ")"
	}
	return "(" + rows + ")"
}

// inBatches calls query once per inBatch of the n distinct keys, with the
// arguments of keys from to to (keyArgs appends them), padded to the
// length padded gives by repeating the last key.
func inBatches(n int, keyArgs func(args []any, i int) []any, query func(rows int, args []any) error) error {
	for start := 0; start < n; start += inBatch {
		stop := min(start+inBatch, n)
		rows := padded(stop - start)
		var args []any
		for i := start; i < stop; i++ {
			args = keyArgs(args, i)
		}
		for range rows - (stop - start) {
			args = keyArgs(args, stop-1)
		}
		if err := query(rows, args); err != nil {
			return err
		}
	}
	return nil
}

// distinctInos returns the distinct inodes of inos, in first-seen order.
func distinctInos(inos []store.Ino) []store.Ino {
	seen := make(map[store.Ino]struct{}, len(inos))
	out := make([]store.Ino, 0, len(inos))
	for _, ino := range inos {
		if _, ok := seen[ino]; !ok {
			seen[ino] = struct{}{}
			out = append(out, ino)
		}
	}
	return out
}

func (t *tx) Chunks(keys []store.ChunkKey) ([][]store.Slice, error) {
	// Asked by inode alone: an IN list of (ino, idx) pairs is not matched
	// against the primary key by every planner (PostgreSQL scans the
	// whole table for it), while ino IN (...) is a range of the key on
	// every one. The few chunks read beyond those asked for are dropped.
	found := make(map[store.ChunkKey][]byte, len(keys))
	inos := make([]store.Ino, 0, len(keys))
	for _, k := range keys {
		if _, ok := found[k]; !ok {
			found[k] = nil
			inos = append(inos, k.Ino)
		}
	}
	distinct := distinctInos(inos)
	err := inBatches(len(distinct), func(args []any, i int) []any {
		return append(args, i64(distinct[i]))
	}, func(rows int, args []any) error {
		q := "SELECT ino, idx, slices FROM @chunk WHERE ino IN " + t.s.rowsIn(rows, 1)
		return t.each(q, args, func(scan func(...any) error) error {
			var ino, idx int64
			var v []byte
			if err := scan(&ino, &idx, &v); err != nil {
				return err
			}
			k := store.ChunkKey{Ino: store.Ino(ino), Idx: uint32(idx)}
			if _, ok := found[k]; ok {
				found[k] = v
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("get %d chunks: %w", len(distinct), err)
	}
	out := make([][]store.Slice, len(keys))
	for i, k := range keys {
		v := found[k]
		if len(v) == 0 {
			continue
		}
		if out[i], err = store.DecodeSlices(v); err != nil {
			return nil, fmt.Errorf("chunk %d of inode %d: %w", k.Idx, k.Ino, err)
		}
	}
	return out, nil
}

func (t *tx) Symlinks(inos []store.Ino) ([][]byte, error) {
	distinct := distinctInos(inos)
	found := make(map[store.Ino][]byte, len(distinct))
	err := inBatches(len(distinct), func(args []any, i int) []any {
		return append(args, i64(distinct[i]))
	}, func(rows int, args []any) error {
		q := "SELECT ino, target FROM @symlink WHERE ino IN " + t.s.rowsIn(rows, 1)
		return t.each(q, args, func(scan func(...any) error) error {
			var ino int64
			var v []byte
			if err := scan(&ino, &v); err != nil {
				return err
			}
			found[store.Ino(ino)] = nonNil(v)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("get %d symlinks: %w", len(distinct), err)
	}
	out := make([][]byte, len(inos))
	for i, ino := range inos {
		out[i] = found[ino]
	}
	return out, nil
}

func (t *tx) Xattrs(inos []store.Ino) ([][]store.Xattr, error) {
	distinct := distinctInos(inos)
	found := make(map[store.Ino][]store.Xattr, len(distinct))
	err := inBatches(len(distinct), func(args []any, i int) []any {
		return append(args, i64(distinct[i]))
	}, func(rows int, args []any) error {
		q := "SELECT ino, name, value FROM @xattr WHERE ino IN " + t.s.rowsIn(rows, 1)
		return t.each(q, args, func(scan func(...any) error) error {
			var ino int64
			var name, v []byte
			if err := scan(&ino, &name, &v); err != nil {
				return err
			}
			found[store.Ino(ino)] = append(found[store.Ino(ino)], store.Xattr{Name: string(name), Value: nonNil(v)})
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("get xattrs of %d inodes: %w", len(distinct), err)
	}
	for _, xs := range found {
		store.SortXattrs(xs)
	}
	out := make([][]store.Xattr, len(inos))
	for i, ino := range inos {
		out[i] = found[ino]
	}
	return out, nil
}

// bulkTable is what a Bulk stores in one table: rows to upsert (key
// columns, then value columns) and rows to delete (key columns), each key
// once, as the last record of the Bulk with that key says.
type bulkTable struct {
	table      string
	keys, vals []string
	at         map[string]int // row key → index in rows
	rows       [][]any
	deleted    []bool // per row: delete it rather than upsert it
}

func newBulkTable(table string, keys, vals []string) *bulkTable {
	return &bulkTable{table: table, keys: keys, vals: vals, at: map[string]int{}}
}

// add records the row args (keys then values; keys only with del), which
// replaces an earlier one with the same key.
func (b *bulkTable) add(args []any, del bool) {
	var k []byte
	for _, a := range args[:len(b.keys)] {
		switch a := a.(type) {
		case int64:
			k = binary.BigEndian.AppendUint64(k, uint64(a))
		case []byte:
			k = binary.AppendUvarint(k, uint64(len(a)))
			k = append(k, a...)
		}
	}
	if i, ok := b.at[string(k)]; ok {
		b.rows[i], b.deleted[i] = args, del
		return
	}
	b.at[string(k)] = len(b.rows)
	b.rows = append(b.rows, args)
	b.deleted = append(b.deleted, del)
}

// bulkTables sorts the records of b by table.
func bulkTables(b *store.Bulk) []*bulkTable {
	nodes := newBulkTable("node", []string{"ino"}, strings.Split(nodeFields, ", ")[1:])
	for _, n := range b.Nodes {
		nodes.add(nodeArgs(n), false)
	}
	edges := newBulkTable("edge", []string{"parent", "name"}, []string{"ino", "type"})
	for _, e := range b.Edges {
		edges.add([]any{i64(e.Parent), nonNil(e.Name), i64(e.Ino), int64(e.Type)}, false)
	}
	chunks := newBulkTable("chunk", []string{"ino", "idx"}, []string{"slices"})
	for _, c := range b.Chunks {
		if len(c.Slices) == 0 {
			chunks.add([]any{i64(c.Ino), int64(c.Idx)}, true)
		} else {
			chunks.add([]any{i64(c.Ino), int64(c.Idx), store.EncodeSlices(c.Slices)}, false)
		}
	}
	symlinks := newBulkTable("symlink", []string{"ino"}, []string{"target"})
	for _, l := range b.Symlinks {
		symlinks.add([]any{i64(l.Ino), nonNil(l.Target)}, false)
	}
	xattrs := newBulkTable("xattr", []string{"ino", "name"}, []string{"value"})
	for _, x := range b.Xattrs {
		xattrs.add([]any{i64(x.Ino), []byte(x.Name), nonNil(x.Value)}, false)
	}
	refs := newBulkTable("sliceref", []string{"id", "size"}, []string{"extra"})
	for _, r := range b.SliceRefs {
		if r.Extra == 0 {
			refs.add([]any{i64(r.Id), int64(r.Size)}, true)
		} else {
			refs.add([]any{i64(r.Id), int64(r.Size), r.Extra}, false)
		}
	}
	return []*bulkTable{nodes, edges, chunks, symlinks, xattrs, refs}
}

var _ store.BulkWriter = (*Store)(nil)

// WriteBulk stores b in one write transaction, retried on conflict like
// Update: per table, multi-row upserts (INSERT ... ON CONFLICT DO UPDATE,
// or ON DUPLICATE KEY UPDATE) of as many rows as bulkParams and bulkBytes
// allow, and one DELETE per inBatch records that delete (an empty slice
// list, a zero reference count). A key stored twice in b keeps its last
// record.
func (s *Store) WriteBulk(ctx context.Context, b *store.Bulk) error {
	tables := bulkTables(b)
	err := s.Update(ctx, func(st store.Tx) error {
		t := st.(*tx)
		for _, bt := range tables {
			t.writeRows(bt)
		}
		return t.err
	})
	if err != nil {
		return fmt.Errorf("store %d records: %w", b.Len(), err)
	}
	return nil
}

// writeRows upserts and deletes the rows of bt.
func (t *tx) writeRows(bt *bulkTable) {
	width := len(bt.keys) + len(bt.vals)
	per := bulkParams / width
	if t.s.d.Embedded {
		per = embeddedRows
	}
	var args, dels []any
	rows, nDel, size := 0, 0, 0
	flush := func() {
		if rows > 0 {
			t.upsertRows(bt, rows, args)
			args, rows, size = args[:0], 0, 0
		}
	}
	for i, r := range bt.rows {
		if bt.deleted[i] {
			dels = append(dels, r[:len(bt.keys)]...)
			if nDel++; nDel == inBatch {
				t.deleteRows(bt, nDel, dels)
				dels, nDel = dels[:0], 0
			}
			continue
		}
		n := 0
		for _, a := range r {
			if b, ok := a.([]byte); ok {
				n += len(b)
			}
		}
		if rows > 0 && !t.s.d.Embedded && size+n > bulkBytes {
			flush()
		}
		args = append(args, r...)
		rows, size = rows+1, size+n
		if rows == per {
			flush()
		}
	}
	flush()
	if nDel > 0 {
		t.deleteRows(bt, nDel, dels)
	}
}

// upsertRows runs the upsert of rows rows of bt with args.
func (t *tx) upsertRows(bt *bulkTable, rows int, args []any) {
	width := len(bt.keys) + len(bt.vals)
	if !t.s.d.Embedded {
		if rows == bulkParams/width {
			t.exec(t.s.bulkUpsert(bt, rows), args...)
		} else {
			t.execOnce(t.s.buildUpserts(bt.table, bt.keys, bt.vals, rows), args...)
		}
		return
	}
	// Powers of two: few distinct statements to keep prepared.
	for rows > 0 {
		n := 1
		for n*2 <= rows {
			n *= 2
		}
		t.exec(t.s.bulkUpsert(bt, n), args[:n*width]...)
		args, rows = args[n*width:], rows-n
	}
}

// bulkUpsert returns the upsert of rows rows of bt, built once per size.
func (s *Store) bulkUpsert(bt *bulkTable, rows int) string {
	k := fmt.Sprintf("%s/%d", bt.table, rows)
	if v, ok := s.upserts.Load(k); ok {
		return v.(string)
	}
	q := s.buildUpserts(bt.table, bt.keys, bt.vals, rows)
	s.upserts.Store(k, q)
	return q
}

// deleteRows deletes the n rows of bt whose keys are args.
func (t *tx) deleteRows(bt *bulkTable, n int, args []any) {
	var q string
	if len(bt.keys) == 1 {
		q = "DELETE FROM @" + bt.table + " WHERE " + bt.keys[0] + " IN " + t.s.rowsIn(n, 1)
	} else {
		q = "DELETE FROM @" + bt.table + " WHERE (" + strings.Join(bt.keys, ", ") + ") IN " + t.s.rowsIn(n, len(bt.keys))
	}
	t.execOnce(q, args...)
}

// execOnce runs a statement that writes, as exec does, but without
// remembering or preparing it: statements whose size varies would
// otherwise accumulate.
func (t *tx) execOnce(q string, args ...any) {
	if t.err != nil {
		return
	}
	var c conn
	switch {
	case !t.write:
		t.exec(q, args...) // fails the same way
		return
	case t.conn != nil:
		c = t.conn.c
	default:
		c = t.tx
	}
	if _, err := c.ExecContext(t.ctx, t.s.rewrite(q, false), args...); err != nil {
		t.fail(err)
	}
}
