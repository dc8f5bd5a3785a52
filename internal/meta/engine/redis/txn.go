package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// pipeFunc sends the commands fn queues in one round trip: a plain
// pipeline for View, one on the transaction's sticky connection for Update.
type pipeFunc func(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)

// txn is one transaction. Maps are keyed by kvstore key (not Redis key).
type txn struct {
	ctx   context.Context
	d     *DB
	pipe  pipeFunc
	watch bool // Update: WATCH every key and sorted set read
	// armed reports a WATCH that no EXEC has released yet. WATCH goes out
	// inside pipelines, which go-redis does not track, so Update releases it.
	armed   bool
	watched map[string]bool   // Redis keys watched so far
	reads   map[string][]byte // values read so far; nil = missing
	writes  map[string][]byte // buffered writes; nil = delete
}

var _ kvstore.Txn = (*txn)(nil)

func newTxn(ctx context.Context, d *DB, pipe pipeFunc, watch bool) *txn {
	return &txn{ctx: ctx, d: d, pipe: pipe, watch: watch, watched: map[string]bool{},
		reads: map[string][]byte{}, writes: map[string][]byte{}}
}

// queueWatch queues a WATCH of the keys not watched yet; it is called
// while queueing a pipeline, before the reads it protects.
func (t *txn) queueWatch(p redis.Pipeliner, keys ...string) {
	if !t.watch {
		return
	}
	args := []any{"watch"}
	for _, k := range keys {
		if !t.watched[k] {
			t.watched[k] = true
			args = append(args, k)
		}
	}
	if len(args) > 1 {
		p.Do(t.ctx, args...)
		t.armed = true
	}
}

// fetch reads (and in Update watches) the keys whose value the transaction
// does not know yet, in one round trip.
func (t *txn) fetch(keys []string) error {
	var need, rkeys []string
	for _, k := range keys {
		if _, ok := t.writes[k]; ok {
			continue
		}
		if _, ok := t.reads[k]; ok {
			continue
		}
		t.reads[k] = nil // placeholder, also drops duplicates
		need = append(need, k)
		rkeys = append(rkeys, t.d.dataKey(k))
	}
	if len(need) == 0 {
		return nil
	}
	var mget *redis.SliceCmd
	_, err := t.pipe(t.ctx, func(p redis.Pipeliner) error {
		t.queueWatch(p, rkeys...)
		mget = p.MGet(t.ctx, rkeys...)
		return nil
	})
	if err == nil && len(mget.Val()) != len(need) {
		err = fmt.Errorf("MGET of %d keys returned %d values", len(need), len(mget.Val()))
	}
	if err != nil {
		for _, k := range need {
			delete(t.reads, k)
		}
		return fmt.Errorf("redis: %w", err)
	}
	for i, v := range mget.Val() {
		switch v := v.(type) {
		case nil:
		case string:
			t.reads[need[i]] = append([]byte{}, v...)
		default:
			return fmt.Errorf("redis: MGET returned a %T", v)
		}
	}
	return nil
}

// value returns the known value of k (nil when missing); fetch must have
// been called for k.
func (t *txn) value(k string) []byte {
	if v, ok := t.writes[k]; ok {
		return v
	}
	return t.reads[k]
}

func (t *txn) Get(key []byte) ([]byte, error) {
	k := string(key)
	if err := t.fetch([]string{k}); err != nil {
		return nil, err
	}
	return bytes.Clone(t.value(k)), nil
}

func (t *txn) GetMany(keys [][]byte) ([][]byte, error) {
	ks := make([]string, len(keys))
	for i, k := range keys {
		ks[i] = string(k)
	}
	if err := t.fetch(ks); err != nil {
		return nil, err
	}
	out := make([][]byte, len(ks))
	for i, k := range ks {
		out[i] = bytes.Clone(t.value(k))
	}
	return out, nil
}

// members returns up to count (0: all) members of the sorted set idx
// between the ZRANGEBYLEX bounds lo and hi, watching the set in Update.
func (t *txn) members(idx, lo, hi string, count int) ([]string, error) {
	var zr *redis.StringSliceCmd
	_, err := t.pipe(t.ctx, func(p redis.Pipeliner) error {
		t.queueWatch(p, idx)
		zr = p.ZRangeByLex(t.ctx, idx, &redis.ZRangeBy{Min: lo, Max: hi, Count: int64(count)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	return zr.Val(), nil
}

// Scan reads the range from the sorted set of the range's scan group, then
// the values, and merges the transaction's buffered writes.
func (t *txn) Scan(begin, end []byte, limit int) ([]kvstore.Pair, error) {
	g := scanGroup(begin)
	if g == nil || end == nil || bytes.Compare(end, groupEnd(g)) > 0 {
		return nil, fmt.Errorf("redis engine: scan range [%q, %q) is not inside one scan group", begin, end)
	}
	lo, hi := string(begin), string(end)
	if lo >= hi {
		return nil, nil
	}
	var pending []string // buffered sets in the range
	dels := 0            // buffered deletes in the range, which may hide stored keys
	for k, v := range t.writes {
		if k >= lo && k < hi {
			if v == nil {
				dels++
			} else {
				pending = append(pending, k)
			}
		}
	}
	idx := t.d.indexKey(g)
	var out []kvstore.Pair
	found := map[string]bool{}
	from := "[" + lo
	for {
		batch := 0
		if limit > 0 {
			batch = limit - len(out) + dels
		}
		ms, err := t.members(idx, from, "("+hi, batch)
		if err != nil {
			return nil, err
		}
		if err := t.fetch(ms); err != nil {
			return nil, err
		}
		for _, m := range ms {
			found[m] = true
			// A missing value is a key deleted since the ZRANGEBYLEX (View),
			// or one this transaction deleted.
			if v := t.value(m); v != nil {
				out = append(out, kvstore.Pair{Key: []byte(m), Value: bytes.Clone(v)})
			}
		}
		if limit <= 0 || len(ms) < batch || len(out) >= limit {
			break
		}
		from = "(" + ms[len(ms)-1]
	}
	for _, k := range pending {
		if !found[k] {
			out = append(out, kvstore.Pair{Key: []byte(k), Value: bytes.Clone(t.writes[k])})
		}
	}
	slices.SortFunc(out, func(a, b kvstore.Pair) int { return bytes.Compare(a.Key, b.Key) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (t *txn) Set(key, value []byte) {
	if value == nil {
		value = []byte{}
	}
	t.writes[string(key)] = bytes.Clone(value)
}

func (t *txn) Delete(key []byte) { t.writes[string(key)] = nil }

// commit sends the buffered writes and their index updates in one
// MULTI/EXEC, which fails when a watched key changed. A transaction that
// only read still runs an empty EXEC, so its reads are known to have been
// consistent when it returns.
func (t *txn) commit(tx *redis.Tx) error {
	if len(t.writes) == 0 && !t.armed {
		return nil
	}
	_, err := tx.TxPipelined(t.ctx, func(p redis.Pipeliner) error {
		if len(t.writes) == 0 {
			p.Ping(t.ctx)
			return nil
		}
		var sets []any
		var dels []string
		adds := map[string][]redis.Z{}
		rems := map[string][]any{}
		for k, v := range t.writes {
			rk := t.d.dataKey(k)
			g := scanGroup([]byte(k))
			if v == nil {
				dels = append(dels, rk)
				if g != nil {
					idx := t.d.indexKey(g)
					rems[idx] = append(rems[idx], k)
				}
				continue
			}
			sets = append(sets, rk, v)
			if g != nil {
				idx := t.d.indexKey(g)
				adds[idx] = append(adds[idx], redis.Z{Member: k})
			}
		}
		if len(sets) > 0 {
			p.MSet(t.ctx, sets...)
		}
		if len(dels) > 0 {
			p.Del(t.ctx, dels...)
		}
		for idx, zs := range adds {
			p.ZAdd(t.ctx, idx, zs...)
		}
		for idx, ms := range rems {
			p.ZRem(t.ctx, idx, ms...)
		}
		return nil
	})
	if err == nil || errors.Is(err, redis.TxFailedErr) || redis.IsExecAbortError(err) {
		t.armed = false // EXEC ran and released the WATCH
	}
	switch {
	case errors.Is(err, redis.TxFailedErr):
		return fmt.Errorf("%w: a key read by the transaction changed", store.ErrConflict)
	case err != nil:
		return fmt.Errorf("redis commit: %w", err)
	}
	return nil
}
