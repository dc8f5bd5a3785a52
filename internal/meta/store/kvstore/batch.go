package kvstore

import (
	"context"
	"fmt"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Batched reads and bulk writes for whole-volume work (store.BatchReader,
// store.BulkWriter). A batch of point reads is one Txn.GetMany; the
// extended attributes of many inodes are one Txn.ScanMany when the
// adapter is a MultiScanner, otherwise one Scan per inode.

var _ store.BatchReader = (*tx)(nil)

func (x *tx) Chunks(keys []store.ChunkKey) ([][]store.Slice, error) {
	ks := make([][]byte, len(keys))
	for i, k := range keys {
		ks[i] = chunkKey(k.Ino, k.Idx)
	}
	vals, err := x.t.GetMany(ks)
	if err != nil {
		return nil, fmt.Errorf("get %d chunks: %w", len(keys), err)
	}
	out := make([][]store.Slice, len(keys))
	for i, v := range vals {
		if len(v) == 0 {
			continue
		}
		if out[i], err = store.DecodeSlices(v); err != nil {
			return nil, fmt.Errorf("chunk %d of inode %d: %w", keys[i].Idx, keys[i].Ino, err)
		}
	}
	return out, nil
}

func (x *tx) Symlinks(inos []store.Ino) ([][]byte, error) {
	ks := make([][]byte, len(inos))
	for i, ino := range inos {
		ks[i] = inoKey(ino, 'S', nil)
	}
	vals, err := x.t.GetMany(ks)
	if err != nil {
		return nil, fmt.Errorf("get %d symlinks: %w", len(inos), err)
	}
	return vals, nil
}

func (x *tx) Xattrs(inos []store.Ino) ([][]store.Xattr, error) {
	ranges := make([]Range, len(inos))
	for i, ino := range inos {
		p := inoKey(ino, 'X', nil)
		ranges[i] = Range{Begin: p, End: prefixEnd(p)}
	}
	var pairs [][]Pair
	if m, ok := x.t.(MultiScanner); ok {
		var err error
		if pairs, err = m.ScanMany(ranges, 0); err != nil {
			return nil, fmt.Errorf("scan xattrs of %d inodes: %w", len(inos), err)
		}
		if len(pairs) != len(ranges) {
			return nil, fmt.Errorf("scan xattrs of %d inodes: %d results", len(inos), len(pairs))
		}
	} else {
		pairs = make([][]Pair, len(ranges))
		for i, r := range ranges {
			ps, err := x.t.Scan(r.Begin, r.End, 0)
			if err != nil {
				return nil, fmt.Errorf("scan xattrs of %d: %w", inos[i], err)
			}
			pairs[i] = ps
		}
	}
	out := make([][]store.Xattr, len(inos))
	for i, ps := range pairs {
		if len(ps) == 0 {
			continue
		}
		n := len(ranges[i].Begin)
		xs := make([]store.Xattr, len(ps))
		for j, p := range ps {
			v := p.Value
			if v == nil {
				v = []byte{}
			}
			xs[j] = store.Xattr{Name: string(p.Key[n:]), Value: v}
		}
		store.SortXattrs(xs) // key order is name order; kept for adapters that stray
		out[i] = xs
	}
	return out, nil
}

// BulkStore is the Store of a DB that declares no bound on a
// transaction's keys: it stores a store.Bulk in one Update, which is
// atomic, and which each adapter commits at once (Redis in one MULTI/EXEC
// of MSET and ZADDs, mem under its commit lock, TiKV in one two-phase
// commit).
type BulkStore struct {
	*Store
}

var _ store.BulkWriter = (*BulkStore)(nil)

// WriteBulk stores every record of b in one Update, replacing the records
// with the same keys; an empty slice list or a zero slice reference
// deletes the record, as SetChunk and SetSliceRef do.
func (s *BulkStore) WriteBulk(ctx context.Context, b *store.Bulk) error {
	err := s.Update(ctx, func(t store.Tx) error {
		for _, n := range b.Nodes {
			t.SetNode(n)
		}
		for _, e := range b.Edges {
			t.SetEdge(e.Parent, e.Edge)
		}
		for _, c := range b.Chunks {
			t.SetChunk(c.Ino, c.Idx, c.Slices)
		}
		for _, l := range b.Symlinks {
			t.SetSymlink(l.Ino, l.Target)
		}
		for _, a := range b.Xattrs {
			t.SetXattr(a.Ino, a.Name, a.Value)
		}
		for _, r := range b.SliceRefs {
			t.SetSliceRef(r.Id, r.Size, r.Extra)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store %d records: %w", b.Len(), err)
	}
	return nil
}
