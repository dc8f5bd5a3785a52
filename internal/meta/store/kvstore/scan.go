package kvstore

import (
	"bytes"
	"fmt"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Whole-family scans. A cursor is the key the next page starts at, so it
// stays valid across transactions. Each call makes one Txn.Scan of at most
// limit pairs, so its memory is bounded whatever the volume's size.
//
// An adapter whose Scan can only range inside one group of keys (redis)
// implements Lister instead; one that does neither fails these scans with
// its Scan error rather than return a partial answer: gc must never
// mistake an unlisted chunk for an unreferenced one.

// Lister is an optional Txn ability for adapters whose Scan cannot range
// over a whole key family. List pages through every key starting with
// prefix, in no particular order, returning about limit pairs per call and
// the cursor of the next page (nil after the last; start with nil). It
// need not run inside the transaction, but must return every key that
// exists from the first call to the last at least once (a key may come
// twice, and one written meanwhile may be missed).
type Lister interface {
	List(prefix, cursor []byte, limit int) ([]Pair, []byte, error)
}

// scanPage reads about limit pairs of the family [lo, hi), lo being the
// family's one-byte prefix, from cursor and returns them with the next
// cursor (nil when the family is exhausted).
func (x *tx) scanPage(what string, lo, hi, cursor []byte, limit int) ([]Pair, []byte, error) {
	if limit <= 0 {
		limit = 1000
	}
	if l, ok := x.t.(Lister); ok {
		pairs, next, err := l.List(lo, cursor, limit)
		if err != nil {
			return nil, nil, fmt.Errorf("list %s: %w", what, err)
		}
		return pairs, next, nil
	}
	begin := lo
	if cursor != nil {
		if bytes.Compare(cursor, lo) < 0 || bytes.Compare(cursor, hi) >= 0 {
			return nil, nil, fmt.Errorf("scan %s: cursor %q outside the family", what, cursor)
		}
		begin = cursor
	}
	pairs, err := x.t.Scan(begin, hi, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("scan %s: %w", what, err)
	}
	if len(pairs) < limit {
		return pairs, nil, nil
	}
	return pairs, append(bytes.Clone(pairs[len(pairs)-1].Key), 0), nil
}

func (x *tx) ScanInodes(cursor []byte, limit int) ([]store.InodeRecord, []byte, error) {
	pairs, next, err := x.scanPage("inodes", []byte{'A'}, []byte{'A' + 1}, cursor, limit)
	if err != nil {
		return nil, nil, err
	}
	out := make([]store.InodeRecord, 0, len(pairs))
	for _, p := range pairs {
		if r, ok := decodeInodeRecord(p); ok {
			out = append(out, r)
		}
	}
	return out, next, nil
}

// decodeInodeRecord decodes one "A" pair; ok is false for kinds the scan
// skips.
func decodeInodeRecord(p Pair) (r store.InodeRecord, ok bool) {
	k := p.Key
	if len(k) < 10 {
		return store.InodeRecord{Err: fmt.Errorf("corrupt key %q", k)}, true
	}
	r.Ino = store.Ino(be.Uint64(k[1:]))
	rest := k[10:]
	switch k[9] {
	case 'I':
		if len(rest) != 0 {
			r.Err = fmt.Errorf("inode %d: corrupt attribute key %q", r.Ino, k)
			break
		}
		r.Node, r.Err = decodeNode(r.Ino, p.Value)
	case 'D':
		e, err := decodeEdge(bytes.Clone(rest), p.Value)
		if err != nil {
			r.Err = fmt.Errorf("directory %d: %w", r.Ino, err)
			break
		}
		r.Edge = &e
	case 'C':
		if len(rest) != 4 {
			r.Err = fmt.Errorf("inode %d: corrupt chunk key %q", r.Ino, k)
			break
		}
		c := &store.ChunkRecord{Idx: be.Uint32(rest)}
		ss, err := store.DecodeSlices(p.Value)
		if err != nil {
			r.Err = fmt.Errorf("chunk %d of inode %d: %w", c.Idx, r.Ino, err)
			break
		}
		c.Slices = ss
		r.Chunk = c
	case 'S':
		r.Symlink = append([]byte{}, p.Value...)
	default:
		return r, false
	}
	return r, true
}

func (x *tx) ScanSliceRefs(cursor []byte, limit int) ([]store.SliceRefRecord, []byte, error) {
	pairs, next, err := x.scanPage("slice references", []byte{'K'}, []byte{'K' + 1}, cursor, limit)
	if err != nil {
		return nil, nil, err
	}
	out := make([]store.SliceRefRecord, 0, len(pairs))
	for _, p := range pairs {
		if len(p.Key) != 13 || len(p.Value) != 8 {
			return nil, nil, fmt.Errorf("corrupt slice reference record %q", p.Key)
		}
		out = append(out, store.SliceRefRecord{Id: be.Uint64(p.Key[1:]), Size: be.Uint32(p.Key[9:]),
			Extra: int64(be.Uint64(p.Value))})
	}
	return out, next, nil
}

func (x *tx) ScanDelFiles(cursor []byte, limit int) ([]store.DelFile, []byte, error) {
	pairs, next, err := x.scanPage("deleted files", []byte{'D'}, []byte{'D' + 1}, cursor, limit)
	if err != nil {
		return nil, nil, err
	}
	out := make([]store.DelFile, len(pairs))
	for i, p := range pairs {
		if len(p.Key) != 17 || len(p.Value) != 8 {
			return nil, nil, fmt.Errorf("corrupt deleted-file record %q", p.Key)
		}
		out[i] = store.DelFile{Ino: store.Ino(be.Uint64(p.Key[1:])), Length: be.Uint64(p.Key[9:]),
			Expire: int64(be.Uint64(p.Value))}
	}
	return out, next, nil
}

func (x *tx) ScanDelSlices(cursor []byte, limit int) ([]store.Slice, []byte, error) {
	pairs, next, err := x.scanPage("deleted slices", []byte{'L'}, []byte{'L' + 1}, cursor, limit)
	if err != nil {
		return nil, nil, err
	}
	out := make([]store.Slice, len(pairs))
	for i, p := range pairs {
		if len(p.Key) != 13 {
			return nil, nil, fmt.Errorf("corrupt deleted-slice record %q", p.Key)
		}
		out[i] = store.Slice{Id: be.Uint64(p.Key[1:]), Size: be.Uint32(p.Key[9:])}
	}
	return out, next, nil
}
