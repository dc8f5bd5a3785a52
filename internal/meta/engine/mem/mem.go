// Package mem is an in-process metadata engine: an ordered in-memory tree
// behind kvstore. It is the fast default for unit tests and keeps nothing
// after the process exits. Transactions are serialized by one lock, so they
// never conflict.
package mem

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/google/btree"

	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

type item struct{ k, v []byte }

func less(a, b item) bool { return bytes.Compare(a.k, b.k) < 0 }

// DB is an in-memory kvstore.DB.
type DB struct {
	name string
	mu   sync.RWMutex
	tree *btree.BTreeG[item]
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

// Update runs fn under the write lock; on error no write is applied.
func (d *DB) Update(ctx context.Context, fn func(kvstore.Txn) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := &txn{d: d, writes: map[string][]byte{}}
	if err := fn(t); err != nil {
		return err
	}
	for k, v := range t.writes {
		if v == nil {
			d.tree.Delete(item{k: []byte(k)})
		} else {
			d.tree.ReplaceOrInsert(item{k: []byte(k), v: v})
		}
	}
	return nil
}

// View runs fn under the read lock; a write in it fails the View.
func (d *DB) View(ctx context.Context, fn func(kvstore.Txn) error) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	t := &txn{d: d, readOnly: true}
	if err := fn(t); err != nil {
		return err
	}
	return t.err
}

// txn buffers writes (nil value = delete) and reads through them.
type txn struct {
	d        *DB
	writes   map[string][]byte
	readOnly bool
	err      error // a write attempted in a read-only transaction
}

func (t *txn) Get(key []byte) ([]byte, error) {
	if v, ok := t.writes[string(key)]; ok {
		return bytes.Clone(v), nil
	}
	it, ok := t.d.tree.Get(item{k: key})
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
	var out []kvstore.Pair
	// Merge the tree with buffered writes in the range.
	merged := map[string][]byte{}
	visit := func(it item) bool {
		merged[string(it.k)] = it.v
		// Buffered deletes may hide tree items, so collect a margin.
		return limit <= 0 || len(merged) < limit+len(t.writes)
	}
	if end == nil {
		t.d.tree.AscendGreaterOrEqual(item{k: begin}, visit)
	} else {
		t.d.tree.AscendRange(item{k: begin}, item{k: end}, visit)
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
	for _, k := range keys {
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, kvstore.Pair{Key: []byte(k), Value: bytes.Clone(merged[k])})
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
