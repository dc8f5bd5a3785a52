// Package mem is an in-process metadata engine: an ordered in-memory tree
// behind kvstore. It is the fast default for unit tests and keeps nothing
// after the process exits.
//
// It keeps the contract of the strictest engines, so that tests on it catch
// what they would catch there: every transaction reads one snapshot (a
// copy-on-write clone of the tree, taken when it begins), transactions run
// concurrently, and an Update commits only if no key it read and no range
// it scanned changed since its snapshot (phantoms included); otherwise it
// returns store.ErrConflict and kvstore retries it. Commits are serialized
// by one lock, held only to check and apply them.
package mem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/google/btree"

	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// item is one pair, with the number of the commit that last wrote it.
type item struct {
	k, v []byte
	rev  uint64
}

func less(a, b item) bool { return bytes.Compare(a.k, b.k) < 0 }

// DB is an in-memory kvstore.DB.
type DB struct {
	name string
	mu   sync.Mutex // guards tree and rev
	tree *btree.BTreeG[item]
	rev  uint64 // commits so far
}

var _ kvstore.DB = (*DB)(nil)

// New returns an empty database.
func New(name string) *DB {
	return &DB{name: name, tree: btree.NewG(32, less)}
}

// Name describes the engine.
func (d *DB) Name() string { return "memkv://" + d.name }

// Close does nothing.
func (d *DB) Close() error { return nil }

// snapshot returns a clone of the tree that later commits do not change.
func (d *DB) snapshot() *btree.BTreeG[item] {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.tree.Clone()
}

// Update runs fn on a snapshot and commits its writes if nothing it read
// changed meanwhile; on error no write is applied.
func (d *DB) Update(ctx context.Context, fn func(kvstore.Txn) error) error {
	t := &txn{snap: d.snapshot(), writes: map[string][]byte{}, reads: map[string]struct{}{}}
	if err := fn(t); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := t.validate(d.tree); err != nil {
		return err
	}
	d.rev++
	for k, v := range t.writes {
		if v == nil {
			d.tree.Delete(item{k: []byte(k)})
		} else {
			d.tree.ReplaceOrInsert(item{k: []byte(k), v: v, rev: d.rev})
		}
	}
	return nil
}

// View runs fn on a snapshot; a write in it fails the View.
func (d *DB) View(ctx context.Context, fn func(kvstore.Txn) error) error {
	t := &txn{snap: d.snapshot(), readOnly: true}
	if err := fn(t); err != nil {
		return err
	}
	return t.err
}

// txn reads its snapshot through its buffered writes (nil value = delete)
// and, in Update, records what it read for the commit to check.
type txn struct {
	snap     *btree.BTreeG[item]
	writes   map[string][]byte
	reads    map[string]struct{} // keys read from the snapshot
	ranges   []span              // ranges scanned in the snapshot
	readOnly bool
	err      error // a write attempted in a read-only transaction
}

// span is a scanned range [begin, end); a nil end is unbounded.
type span struct{ begin, end []byte }

// validate returns a conflict when a key t read, or a range it scanned,
// holds other pairs in tree than in t's snapshot.
func (t *txn) validate(tree *btree.BTreeG[item]) error {
	for k := range t.reads {
		a, aok := t.snap.Get(item{k: []byte(k)})
		b, bok := tree.Get(item{k: []byte(k)})
		if aok != bok || a.rev != b.rev {
			return fmt.Errorf("mem: key %q changed since the snapshot: %w", k, store.ErrConflict)
		}
	}
	for _, s := range t.ranges {
		if !slices.EqualFunc(rangeOf(t.snap, s), rangeOf(tree, s), func(a, b item) bool {
			return a.rev == b.rev && bytes.Equal(a.k, b.k)
		}) {
			return fmt.Errorf("mem: range [%q, %q) changed since the snapshot: %w", s.begin, s.end, store.ErrConflict)
		}
	}
	return nil
}

// rangeOf returns the items of tree in s.
func rangeOf(tree *btree.BTreeG[item], s span) []item {
	var out []item
	visit := func(it item) bool { out = append(out, it); return true }
	if s.end == nil {
		tree.AscendGreaterOrEqual(item{k: s.begin}, visit)
	} else {
		tree.AscendRange(item{k: s.begin}, item{k: s.end}, visit)
	}
	return out
}

func (t *txn) Get(key []byte) ([]byte, error) {
	if v, ok := t.writes[string(key)]; ok {
		return bytes.Clone(v), nil
	}
	if t.reads != nil {
		t.reads[string(key)] = struct{}{}
	}
	it, ok := t.snap.Get(item{k: key})
	if !ok {
		return nil, nil
	}
	return bytes.Clone(it.v), nil
}

func (t *txn) GetMany(keys [][]byte) ([][]byte, error) {
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i], _ = t.Get(k)
	}
	return out, nil
}

func (t *txn) Scan(begin, end []byte, limit int) ([]kvstore.Pair, error) {
	// Merge the snapshot with buffered writes in the range. Buffered
	// deletes may hide snapshot items, so collect a margin.
	merged := map[string][]byte{}
	var last []byte // last snapshot key visited when the walk stopped early
	visit := func(it item) bool {
		merged[string(it.k)] = it.v
		if limit > 0 && len(merged) >= limit+len(t.writes) {
			last = it.k
			return false
		}
		return true
	}
	if end == nil {
		t.snap.AscendGreaterOrEqual(item{k: begin}, visit)
	} else {
		t.snap.AscendRange(item{k: begin}, item{k: end}, visit)
	}
	if t.reads != nil {
		// The commit checks the part of the range the walk saw.
		seen := span{begin: bytes.Clone(begin), end: bytes.Clone(end)}
		if last != nil {
			seen.end = append(bytes.Clone(last), 0)
		}
		t.ranges = append(t.ranges, seen)
	}
	for k, v := range t.writes {
		if k >= string(begin) && (end == nil || k < string(end)) {
			merged[k] = v
		}
	}
	keys := make([]string, 0, len(merged))
	for k, v := range merged {
		if v != nil {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []kvstore.Pair
	for _, k := range keys {
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, kvstore.Pair{Key: []byte(k), Value: bytes.Clone(merged[k])})
	}
	return out, nil
}

var _ kvstore.MultiScanner = (*txn)(nil)

// ScanMany scans each range in turn: the tree is in memory, so one call
// per range costs nothing a batch would save.
func (t *txn) ScanMany(ranges []kvstore.Range, limit int) ([][]kvstore.Pair, error) {
	out := make([][]kvstore.Pair, len(ranges))
	for i, r := range ranges {
		var err error
		if out[i], err = t.Scan(r.Begin, r.End, limit); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (t *txn) Set(key, value []byte) {
	if t.readOnly {
		t.err = errors.New("write in a read-only transaction")
		return
	}
	if value == nil {
		value = []byte{}
	}
	t.writes[string(key)] = bytes.Clone(value)
}

func (t *txn) Delete(key []byte) {
	if t.readOnly {
		t.err = errors.New("write in a read-only transaction")
		return
	}
	t.writes[string(key)] = nil
}
