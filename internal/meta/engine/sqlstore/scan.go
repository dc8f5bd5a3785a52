package sqlstore

import (
	"encoding/binary"
	"fmt"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Whole-family scans page by primary key: a cursor holds the key of the
// last row returned, and the next page starts after it, so cursors stay
// valid across transactions. ScanInodes goes through four tables in turn;
// its cursor starts with the table's phase letter.

var be = binary.BigEndian

// defaultPage is the page size of a scan called with limit <= 0.
const defaultPage = 1000

// keyAfter returns the condition that selects rows whose key (a, b) sorts
// after the pair encoded in cur (8 bytes of a, then b: 8 bytes, or a byte
// string with name), and its arguments; "" and nil when cur is empty.
func keyAfter(cur []byte, a, b string, name bool) (string, []any, error) {
	if len(cur) == 0 {
		return "", nil, nil
	}
	if len(cur) < 8 || !name && len(cur) != 16 {
		return "", nil, fmt.Errorf("corrupt scan cursor %q", cur)
	}
	first := int64(be.Uint64(cur))
	var second any = cur[8:]
	if !name {
		second = int64(be.Uint64(cur[8:]))
	}
	return " WHERE (" + a + " > ? OR " + a + " = ? AND " + b + " > ?)", []any{first, first, second}, nil
}

// inoAfter is keyAfter for a table keyed by ino alone.
func inoAfter(cur []byte) (string, []any, error) {
	switch len(cur) {
	case 0:
		return "", nil, nil
	case 8:
		return " WHERE ino > ?", []any{int64(be.Uint64(cur))}, nil
	}
	return "", nil, fmt.Errorf("corrupt scan cursor %q", cur)
}

// cursorOf encodes the key (a, b) of a row; b is an int64 or a []byte.
func cursorOf(prefix []byte, a int64, b any) []byte {
	c := be.AppendUint64(append([]byte{}, prefix...), uint64(a))
	switch b := b.(type) {
	case int64:
		c = be.AppendUint64(c, uint64(b))
	case []byte:
		c = append(c, b...)
	}
	return c
}

// Phases of ScanInodes, in order.
const (
	phaseNode    = 'n'
	phaseEdge    = 'e'
	phaseChunk   = 'c'
	phaseSymlink = 's'
)

func (t *tx) ScanInodes(cursor []byte, limit int) ([]store.InodeRecord, []byte, error) {
	if limit <= 0 {
		limit = defaultPage
	}
	phase, cur := byte(phaseNode), []byte(nil)
	if len(cursor) > 0 {
		phase, cur = cursor[0], cursor[1:]
	}
	var out []store.InodeRecord
	var last []byte
	var q, cond string
	var args []any
	var err error
	switch phase {
	case phaseNode:
		if cond, args, err = inoAfter(cur); err != nil {
			return nil, nil, err
		}
		q = "SELECT " + nodeFields + " FROM @node" + cond + " ORDER BY ino"
		err = t.each(q+limitClause(limit), args, func(scan func(...any) error) error {
			var v nodeScan
			if err := scan(v.dest()...); err != nil {
				return err
			}
			n := v.node()
			out = append(out, store.InodeRecord{Ino: n.Ino, Node: n})
			last = be.AppendUint64([]byte{phaseNode}, uint64(n.Ino))
			return nil
		})
	case phaseEdge:
		if cond, args, err = keyAfter(cur, "parent", "name", true); err != nil {
			return nil, nil, err
		}
		q = "SELECT parent, name, ino, type FROM @edge" + cond + " ORDER BY parent, name"
		err = t.each(q+limitClause(limit), args, func(scan func(...any) error) error {
			var parent, ino, typ int64
			var name []byte
			if err := scan(&parent, &name, &ino, &typ); err != nil {
				return err
			}
			e := &store.Edge{Name: name, Ino: store.Ino(ino), Type: uint8(typ)}
			out = append(out, store.InodeRecord{Ino: store.Ino(parent), Edge: e})
			last = cursorOf([]byte{phaseEdge}, parent, name)
			return nil
		})
	case phaseChunk:
		if cond, args, err = keyAfter(cur, "ino", "idx", false); err != nil {
			return nil, nil, err
		}
		q = "SELECT ino, idx, slices FROM @chunk" + cond + " ORDER BY ino, idx"
		err = t.each(q+limitClause(limit), args, func(scan func(...any) error) error {
			var ino, idx int64
			var v []byte
			if err := scan(&ino, &idx, &v); err != nil {
				return err
			}
			r := store.InodeRecord{Ino: store.Ino(ino)}
			if ss, err := store.DecodeSlices(v); err != nil {
				r.Err = fmt.Errorf("chunk %d of inode %d: %w", idx, ino, err)
			} else {
				r.Chunk = &store.ChunkRecord{Idx: uint32(idx), Slices: ss}
			}
			out = append(out, r)
			last = cursorOf([]byte{phaseChunk}, ino, idx)
			return nil
		})
	case phaseSymlink:
		if cond, args, err = inoAfter(cur); err != nil {
			return nil, nil, err
		}
		q = "SELECT ino, target FROM @symlink" + cond + " ORDER BY ino"
		err = t.each(q+limitClause(limit), args, func(scan func(...any) error) error {
			var ino int64
			var target []byte
			if err := scan(&ino, &target); err != nil {
				return err
			}
			out = append(out, store.InodeRecord{Ino: store.Ino(ino), Symlink: nonNil(target)})
			last = be.AppendUint64([]byte{phaseSymlink}, uint64(ino))
			return nil
		})
	default:
		return nil, nil, fmt.Errorf("corrupt scan cursor %q", cursor)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("scan inodes: %w", err)
	}
	if len(out) == limit {
		return out, last, nil
	}
	switch phase { // this table is done: the next page starts the next one
	case phaseNode:
		return out, []byte{phaseEdge}, nil
	case phaseEdge:
		return out, []byte{phaseChunk}, nil
	case phaseChunk:
		return out, []byte{phaseSymlink}, nil
	}
	return out, nil, nil
}

// scanPairs pages through a table keyed by two integers a, b, calling add
// with the columns cols of each row, and returns the cursor of the next
// page; limit <= 0 reads the whole table.
func (t *tx) scanPairs(what, table, a, b, cols string, cursor []byte, limit int, add func(scan func(...any) error) (int64, int64, error)) ([]byte, error) {
	cond, args, err := keyAfter(cursor, a, b, false)
	if err != nil {
		return nil, err
	}
	order := a + ", " + b
	n := 0
	var next []byte
	q := "SELECT " + cols + " FROM @" + table + cond + " ORDER BY " + order + limitClause(limit)
	err = t.each(q, args, func(scan func(...any) error) error {
		ka, kb, err := add(scan)
		n++
		next = cursorOf(nil, ka, kb)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", what, err)
	}
	if limit <= 0 || n < limit {
		return nil, nil
	}
	return next, nil
}

// page returns the page size of a scan asked for limit.
func page(limit int) int {
	if limit <= 0 {
		return defaultPage
	}
	return limit
}

func (t *tx) ScanSliceRefs(cursor []byte, limit int) ([]store.SliceRefRecord, []byte, error) {
	var out []store.SliceRefRecord
	next, err := t.scanPairs("slice references", "sliceref", "id", "size", "id, size, extra", cursor, page(limit),
		func(scan func(...any) error) (int64, int64, error) {
			var id, size, extra int64
			err := scan(&id, &size, &extra)
			out = append(out, store.SliceRefRecord{Id: uint64(id), Size: uint32(size), Extra: extra})
			return id, size, err
		})
	return out, next, err
}

func (t *tx) ScanDelFiles(cursor []byte, limit int) ([]store.DelFile, []byte, error) {
	return t.delFiles(cursor, page(limit))
}

// delFiles reads up to limit (<= 0: all) files waiting for data deletion
// after cursor.
func (t *tx) delFiles(cursor []byte, limit int) ([]store.DelFile, []byte, error) {
	var out []store.DelFile
	next, err := t.scanPairs("deleted files", "delfile", "ino", "length", "ino, length, expire", cursor, limit,
		func(scan func(...any) error) (int64, int64, error) {
			var ino, length, expire int64
			err := scan(&ino, &length, &expire)
			out = append(out, store.DelFile{Ino: store.Ino(ino), Length: uint64(length), Expire: expire})
			return ino, length, err
		})
	return out, next, err
}

func (t *tx) ScanDelSlices(cursor []byte, limit int) ([]store.Slice, []byte, error) {
	return t.delSlices(cursor, page(limit))
}

// delSlices reads up to limit (<= 0: all) slices waiting for block
// deletion after cursor.
func (t *tx) delSlices(cursor []byte, limit int) ([]store.Slice, []byte, error) {
	var out []store.Slice
	next, err := t.scanPairs("deleted slices", "delslice", "id", "size", "id, size", cursor, limit,
		func(scan func(...any) error) (int64, int64, error) {
			var id, size int64
			err := scan(&id, &size)
			out = append(out, store.Slice{Id: uint64(id), Size: uint32(size)})
			return id, size, err
		})
	return out, next, err
}
