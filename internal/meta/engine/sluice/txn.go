package sluice

import (
	"bytes"
	"context"
	"errors"
	"slices"

	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/wire"
)

// txn reads the server's snapshot through its buffered writes (a nil
// value is a delete) and records what it read for the commit.
type txn struct {
	ctx      context.Context
	db       *DB
	snap     uint64
	writes   map[string][]byte
	reads    [][]byte
	ranges   []wire.Range
	readOnly bool
	err      error // a write attempted in a read-only transaction
}

var (
	_ kvstore.MultiScanner = (*txn)(nil)
	_ kvstore.Follower     = (*txn)(nil)
)

// status turns a read's reply status into an error.
func (t *txn) status(f wire.Frame) error {
	switch f.Kind {
	case wire.StatusOK:
		return nil
	case wire.StatusNoSnapshot:
		return errNoSnapshot
	}
	return replyError(f)
}

func (t *txn) Get(key []byte) ([]byte, error) {
	vs, err := t.GetMany([][]byte{key})
	if err != nil {
		return nil, err
	}
	return vs[0], nil
}

func (t *txn) GetMany(keys [][]byte) ([][]byte, error) {
	out := make([][]byte, len(keys))
	var remote [][]byte
	var at []int
	for i, k := range keys {
		if v, ok := t.writes[string(k)]; ok {
			out[i] = bytes.Clone(v)
			continue
		}
		remote = append(remote, k)
		at = append(at, i)
	}
	if len(remote) == 0 {
		return out, nil
	}
	f, err := t.db.do(t.ctx, wire.OpGet, func(b *wire.Buf) {
		b.U64(t.snap)
		b.Uvarint(uint64(len(remote)))
		for _, k := range remote {
			b.Bytes(k)
		}
	})
	if err != nil {
		return nil, err
	}
	if err := t.status(f); err != nil {
		return nil, err
	}
	r := wire.NewReader(f.Body)
	t.snap = r.U64()
	if n := r.Count(1); n != len(remote) && r.Err() == nil {
		return nil, errors.New("metadata server: wrong number of values")
	}
	for _, i := range at {
		out[i] = readValue(r)
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	if !t.readOnly {
		for _, k := range remote {
			t.reads = append(t.reads, bytes.Clone(k))
		}
	}
	return out, nil
}

// readValue reads a value as the server writes it (byte present, then
// bytes): nil when absent, empty but not nil when present and empty.
func readValue(r *wire.Reader) []byte {
	if r.Byte() != 1 {
		return nil
	}
	if v := r.Bytes(); v != nil {
		return v
	}
	return []byte{}
}

// GetFollow reads keys and the keys their values name in one request
// (a lookup: the entry, then its node). When this transaction wrote one
// of them, the server's values may not be the ones to follow, so it
// reads one step at a time.
func (t *txn) GetFollow(keys [][]byte, follow []bool, rule kvstore.FollowRule) (vals, next [][]byte, err error) {
	local := false
	for _, k := range keys {
		if _, ok := t.writes[string(k)]; ok {
			local = true
		}
	}
	if local || len(t.writes) > 0 {
		return t.followLocally(keys, follow, rule)
	}
	wr := wire.Follow{Prefix: []byte(rule.Prefix), Suffix: []byte(rule.Suffix), From: rule.From, ValueLen: rule.ValueLen}
	f, err := t.db.do(t.ctx, wire.OpGetFollow, func(b *wire.Buf) {
		b.U64(t.snap)
		b.Follow(wr)
		b.Uvarint(uint64(len(keys)))
		for i, k := range keys {
			b.Bytes(k)
			if follow[i] {
				b.Byte(1)
			} else {
				b.Byte(0)
			}
		}
	})
	if err != nil {
		return nil, nil, err
	}
	if err := t.status(f); err != nil {
		return nil, nil, err
	}
	r := wire.NewReader(f.Body)
	t.snap = r.U64()
	if n := r.Count(1); n != len(keys) && r.Err() == nil {
		return nil, nil, errors.New("metadata server: wrong number of values")
	}
	vals, next = make([][]byte, len(keys)), make([][]byte, len(keys))
	for i := range keys {
		vals[i] = readValue(r)
		if follow[i] {
			next[i] = readValue(r)
		}
	}
	if err := r.Done(); err != nil {
		return nil, nil, err
	}
	if !t.readOnly {
		for i, k := range keys {
			t.reads = append(t.reads, bytes.Clone(k))
			if follow[i] {
				if nk := wr.Next(vals[i]); nk != nil {
					t.reads = append(t.reads, nk)
				}
			}
		}
	}
	return vals, next, nil
}

// followLocally does what GetFollow does in two reads.
func (t *txn) followLocally(keys [][]byte, follow []bool, rule kvstore.FollowRule) (vals, next [][]byte, err error) {
	if vals, err = t.GetMany(keys); err != nil {
		return nil, nil, err
	}
	next = make([][]byte, len(keys))
	var nks [][]byte
	var at []int
	for i := range keys {
		if follow[i] {
			if nk := rule.Next(vals[i]); nk != nil {
				nks = append(nks, nk)
				at = append(at, i)
			}
		}
	}
	if len(nks) == 0 {
		return vals, next, nil
	}
	nv, err := t.GetMany(nks)
	if err != nil {
		return nil, nil, err
	}
	for j, i := range at {
		next[i] = nv[j]
	}
	return vals, next, nil
}

func (t *txn) Scan(begin, end []byte, limit int) ([]kvstore.Pair, error) {
	out, err := t.ScanMany([]kvstore.Range{{Begin: begin, End: end}}, limit)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// ScanMany scans every range in one request. With a limit, each range
// asks the server for limit pairs more than this transaction's writes
// could hide.
func (t *txn) ScanMany(ranges []kvstore.Range, limit int) ([][]kvstore.Pair, error) {
	ask := limit
	if limit > 0 {
		ask += len(t.writes)
	}
	f, err := t.db.do(t.ctx, wire.OpScan, func(b *wire.Buf) {
		b.U64(t.snap)
		b.Varint(int64(ask))
		b.Uvarint(uint64(len(ranges)))
		for _, r := range ranges {
			b.Range(wire.Range{Begin: r.Begin, End: r.End})
		}
	})
	if err != nil {
		return nil, err
	}
	if err := t.status(f); err != nil {
		return nil, err
	}
	r := wire.NewReader(f.Body)
	t.snap = r.U64()
	if n := r.Count(1); n != len(ranges) && r.Err() == nil {
		return nil, errors.New("metadata server: wrong number of ranges")
	}
	out := make([][]kvstore.Pair, len(ranges))
	for i, rg := range ranges {
		n := r.Count(2)
		merged := make(map[string][]byte, n)
		var last []byte
		for j := 0; j < n; j++ {
			k := r.Bytes()
			v := r.Bytes()
			if v == nil {
				v = []byte{}
			}
			merged[string(k)] = v
			last = k
		}
		if r.Err() != nil {
			break
		}
		if !t.readOnly {
			seen := wire.Range{Begin: bytes.Clone(rg.Begin), End: bytes.Clone(rg.End)}
			if ask > 0 && n >= ask {
				seen.End = append(bytes.Clone(last), 0)
			}
			t.ranges = append(t.ranges, seen)
		}
		for k, v := range t.writes {
			if k >= string(rg.Begin) && (rg.End == nil || k < string(rg.End)) {
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
		if limit > 0 && len(keys) > limit {
			keys = keys[:limit]
		}
		ps := make([]kvstore.Pair, len(keys))
		for j, k := range keys {
			ps[j] = kvstore.Pair{Key: []byte(k), Value: merged[k]}
		}
		out[i] = ps
	}
	if err := r.Done(); err != nil {
		return nil, err
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
