package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Whole-volume work (dump and load) reads and writes the records of many
// inodes at once. Two optional interfaces let an engine do that in few
// round trips; the functions below fall back to the per-record Tx methods
// for an engine without them, so every engine is correct and the fast
// ones are fast.

// ChunkKey names one chunk of a file.
type ChunkKey struct {
	Ino Ino
	Idx uint32
}

// Xattr is one extended attribute.
type Xattr struct {
	Name  string
	Value []byte
}

// BatchReader is the optional interface of a Tx that reads the records of
// many inodes together, in one round trip per call where the engine can
// (a pipeline, IN (...), a multi-range request). Each result has one
// element per requested key, in the order requested.
type BatchReader interface {
	// Chunks returns the slice list of each chunk (nil when it has none).
	Chunks(keys []ChunkKey) ([][]Slice, error)
	// Symlinks returns the target of each symlink (nil when missing).
	Symlinks(inos []Ino) ([][]byte, error)
	// Xattrs returns every extended attribute of each inode, sorted by
	// name (nil when it has none).
	Xattrs(inos []Ino) ([][]Xattr, error)
}

// ReadChunks reads the slice lists of keys through tx, batched when tx is a
// BatchReader.
func ReadChunks(tx Tx, keys []ChunkKey) ([][]Slice, error) {
	if b, ok := tx.(BatchReader); ok {
		return b.Chunks(keys)
	}
	out := make([][]Slice, len(keys))
	for i, k := range keys {
		s, err := tx.Chunk(k.Ino, k.Idx)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// ReadSymlinks reads the targets of inos through tx, batched when tx is a
// BatchReader; a missing target is nil.
func ReadSymlinks(tx Tx, inos []Ino) ([][]byte, error) {
	if b, ok := tx.(BatchReader); ok {
		return b.Symlinks(inos)
	}
	out := make([][]byte, len(inos))
	for i, ino := range inos {
		t, err := tx.Symlink(ino)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

// ReadXattrs reads every extended attribute of inos through tx, batched
// when tx is a BatchReader, each inode's sorted by name.
func ReadXattrs(tx Tx, inos []Ino) ([][]Xattr, error) {
	if b, ok := tx.(BatchReader); ok {
		return b.Xattrs(inos)
	}
	out := make([][]Xattr, len(inos))
	for i, ino := range inos {
		names, err := tx.XattrNames(ino)
		if err != nil {
			return nil, err
		}
		slices.Sort(names)
		for _, n := range names {
			v, err := tx.Xattr(ino, n)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out[i] = append(out[i], Xattr{Name: n, Value: v})
		}
	}
	return out, nil
}

// Bulk is a set of records to store at once: the records of a volume
// being loaded, which no transaction reads meanwhile. Storing a record
// replaces one with the same key.
type Bulk struct {
	Nodes     []*Node
	Edges     []BulkEdge
	Chunks    []BulkChunk
	Symlinks  []BulkSymlink
	Xattrs    []BulkXattr
	SliceRefs []SliceRefRecord
}

// BulkEdge is a directory entry of a Bulk.
type BulkEdge struct {
	Parent Ino
	Edge
}

// BulkChunk is a slice list of a Bulk.
type BulkChunk struct {
	ChunkKey
	Slices []Slice
}

// BulkSymlink is a symlink target of a Bulk.
type BulkSymlink struct {
	Ino    Ino
	Target []byte
}

// BulkXattr is an extended attribute of a Bulk.
type BulkXattr struct {
	Ino Ino
	Xattr
}

// Len returns the number of records in b.
func (b *Bulk) Len() int {
	return len(b.Nodes) + len(b.Edges) + len(b.Chunks) + len(b.Symlinks) + len(b.Xattrs) + len(b.SliceRefs)
}

// Reset empties b, keeping its storage.
func (b *Bulk) Reset() {
	clear(b.Nodes)
	*b = Bulk{Nodes: b.Nodes[:0], Edges: b.Edges[:0], Chunks: b.Chunks[:0],
		Symlinks: b.Symlinks[:0], Xattrs: b.Xattrs[:0], SliceRefs: b.SliceRefs[:0]}
}

// BulkWriter is the optional interface of a Store that stores a Bulk
// faster than Update with one Set call per record (multi-row inserts, one
// pipelined command). WriteBulk is atomic: every record is stored or none.
// A decorator of a Store does not forward it; it implements Unwrapper,
// and WriteBulk looks under it.
type BulkWriter interface {
	WriteBulk(ctx context.Context, b *Bulk) error
}

// WriteBulk stores b in st: at once when st is a BulkWriter, otherwise in
// Updates that each stay within the engine's Limits (so a failure may
// leave part of b stored; a loader that must be all or nothing removes
// what it wrote).
func WriteBulk(ctx context.Context, st Store, b *Bulk) error {
	if w, ok := under[BulkWriter](st); ok {
		return w.WriteBulk(ctx, b)
	}
	per := LimitsOf(st).MaxTxnOps
	if per <= 0 {
		per = 1 << 30
	}
	var ops []func(Tx)
	for _, n := range b.Nodes {
		ops = append(ops, func(tx Tx) { tx.SetNode(n) })
	}
	for _, e := range b.Edges {
		ops = append(ops, func(tx Tx) { tx.SetEdge(e.Parent, e.Edge) })
	}
	for _, c := range b.Chunks {
		ops = append(ops, func(tx Tx) { tx.SetChunk(c.Ino, c.Idx, c.Slices) })
	}
	for _, s := range b.Symlinks {
		ops = append(ops, func(tx Tx) { tx.SetSymlink(s.Ino, s.Target) })
	}
	for _, x := range b.Xattrs {
		ops = append(ops, func(tx Tx) { tx.SetXattr(x.Ino, x.Name, x.Value) })
	}
	for _, r := range b.SliceRefs {
		ops = append(ops, func(tx Tx) { tx.SetSliceRef(r.Id, r.Size, r.Extra) })
	}
	for len(ops) > 0 {
		n := min(per, len(ops))
		part := ops[:n]
		ops = ops[n:]
		err := st.Update(ctx, func(tx Tx) error {
			for _, op := range part {
				op(tx)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("store %d records: %w", n, err)
		}
	}
	return nil
}

// Analyzer is the optional interface of a Store whose query planner
// keeps statistics: Analyze refreshes them after bulk writes (see
// AnalyzeAfterBulk).
type Analyzer interface {
	Analyze(ctx context.Context) error
}

// AnalyzeAfterBulk refreshes the engine's statistics, where it keeps
// any, after a series of WriteBulk.
func AnalyzeAfterBulk(ctx context.Context, st Store) error {
	if a, ok := under[Analyzer](st); ok {
		return a.Analyze(ctx)
	}
	return nil
}

// CacheDisabler is the optional interface of a Store that keeps records
// it read in a cache of its own (redis). DisableCache drops the cache and
// reads from the engine from then on: for a handle that reads each
// record once (a dump, a load), where a cache only costs memory and time.
// It must be called before the handle is used by more than one goroutine.
type CacheDisabler interface {
	DisableCache()
}

// DisableCache disables st's cache where it has one (see CacheDisabler).
func DisableCache(st Store) {
	if c, ok := under[CacheDisabler](st); ok {
		c.DisableCache()
	}
}

// Reporter is the optional interface of an engine that has figures of
// its own to show (sluice status): the in-memory metadata server reports
// its records, memory and log. Report returns nil and no error when the
// engine has nothing to report.
type Reporter interface {
	Report(ctx context.Context) (json.RawMessage, error)
}

// Report returns the figures st's engine reports (see Reporter), or nil.
func Report(ctx context.Context, st Store) (json.RawMessage, error) {
	if r, ok := under[Reporter](st); ok {
		return r.Report(ctx)
	}
	return nil, nil
}

// Unwrapper is implemented by a decorator of a Store: Unwrap returns the
// Store it decorates.
type Unwrapper interface {
	Unwrap() Store
}

// under returns the first of st and the stores it decorates (see
// Unwrapper) that implements T.
func under[T any](st Store) (T, bool) {
	for s := st; s != nil; {
		if t, ok := s.(T); ok {
			return t, true
		}
		u, ok := s.(Unwrapper)
		if !ok {
			break
		}
		s = u.Unwrap()
	}
	var zero T
	return zero, false
}

// SortXattrs sorts a list of attributes by name, for BatchReader
// implementations.
func SortXattrs(xs []Xattr) {
	slices.SortFunc(xs, func(a, b Xattr) int { return strings.Compare(a.Name, b.Name) })
}
