package redis

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore/kvcache"
)

// txn is one transaction. Maps are keyed by kvstore key (not Redis key).
type txn struct {
	ctx    context.Context
	d      *DB
	update bool
	reads  map[string][]byte // values read; nil = missing. Update checks them at commit
	writes map[string][]byte // buffered writes; nil = delete
	// appends holds the suffixes to append to keys whose values the
	// transaction has not read (kvstore.Appender), adds the sums to add
	// to such keys (kvstore.Adder). A key is in at most one of writes,
	// appends and adds.
	appends map[string][]byte
	adds    map[string]int64
	scans   []rangeCheck // Update: sorted-set ranges read, checked at commit
	// guessed reports a value taken from DB.recent rather than read.
	guessed bool
	// cached lists the keys whose values came from DB.cache. In Update
	// they are checked at commit like any read; a conflict makes the
	// cache read them again.
	cached []string
	// err is a write attempted in View, which fails the View, or a read
	// that failed where the Txn method has no error to return, which
	// fails the Update.
	err error
}

// rangeCheck is one ZRANGEBYLEX of an Update, checked again at commit.
type rangeCheck struct {
	idx, min, max string
	count         int
	digest        string
}

var _ kvstore.Txn = (*txn)(nil)

func newTxn(ctx context.Context, d *DB, update bool) *txn {
	return &txn{ctx: ctx, d: d, update: update, reads: map[string][]byte{}, writes: map[string][]byte{}}
}

// fetch makes the values of keys known: from the buffered writes, earlier
// reads, the cache, in Update from the values the handle saw recently,
// and otherwise from the server in one round trip. A point read (Get,
// GetMany, GetFollow) remembers small batches in DB.recent; the values of
// a Scan, which may be many, are not remembered. With rule, keys whose
// follow flag is set and that are read from the server also have the key
// their value names read in the same round trip (fetchScript), as a read
// of the transaction.
func (t *txn) fetch(keys []string, point bool, follow []bool, rule *kvstore.FollowRule) error {
	if len(t.appends)+len(t.adds) > 0 {
		for _, k := range keys {
			if err := t.settle(k); err != nil {
				return err
			}
		}
	}
	var need []string
	var needFollow []bool
	var now time.Duration
	for i, k := range keys {
		if _, ok := t.writes[k]; ok {
			continue
		}
		if _, ok := t.reads[k]; ok {
			continue
		}
		if point && t.d.cache != nil {
			if v, ok := t.d.cache.Get(k); ok {
				t.reads[k] = v
				t.cached = append(t.cached, k)
				continue
			}
		}
		if point && now == 0 {
			now = t.d.recent.now()
		}
		if point && t.update {
			if v, ok := t.d.recent.get(k, now); ok {
				t.reads[k] = v
				t.guessed = true
				continue
			}
		}
		t.reads[k] = nil // placeholder, also drops duplicates
		need = append(need, k)
		needFollow = append(needFollow, rule != nil && follow[i])
	}
	if len(need) == 0 {
		return nil
	}
	vals, next, err := t.d.read(t.ctx, need, needFollow, rule)
	if err != nil {
		for _, k := range need {
			delete(t.reads, k)
		}
		return err
	}
	var fkeys []string // keys followed, and their values, for the cache
	var fvals [][]byte
	remember := point && len(need) <= recentBatch
	for i, k := range need {
		t.reads[k] = vals[i]
		if remember {
			t.d.recent.put(k, vals[i], now)
		}
		if next == nil || !needFollow[i] {
			continue
		}
		fk := string(rule.Next(vals[i]))
		if fk == "" {
			continue
		}
		if remember {
			t.d.recent.put(fk, next[i], now)
		}
		_, read := t.reads[fk]
		_, written := t.writes[fk]
		if !read && !written {
			t.reads[fk] = next[i]
			fkeys, fvals = append(fkeys, fk), append(fvals, next[i])
		}
	}
	if point && t.d.cache != nil {
		t.d.cache.Want(append(need, fkeys...), append(vals, fvals...))
	}
	return nil
}

// followMax is the most keys a read with fetchScript may have.
const followMax = 64

// read reads keys (kvstore keys) in one round trip. With rule, and when
// some key's follow flag is set, it also returns, at the same index, the
// value of the key each such key's value names (rule.Next).
func (d *DB) read(ctx context.Context, keys []string, follow []bool, rule *kvstore.FollowRule) (vals, next [][]byte, err error) {
	rkeys := make([]string, len(keys))
	for i, k := range keys {
		rkeys[i] = d.dataKey(k)
	}
	if rule != nil && len(keys) <= followMax && slices.Contains(follow, true) {
		args := make([]any, 4, 4+len(keys))
		args[0], args[1] = d.dataKey(rule.Prefix), rule.Suffix
		args[2], args[3] = rule.ValueLen, rule.From+1
		for _, f := range follow {
			if f {
				args = append(args, "1")
			} else {
				args = append(args, "0")
			}
		}
		return d.readFollow(ctx, rkeys, args)
	}
	res, err := d.c.MGet(ctx, rkeys...).Result()
	if err == nil && len(res) != len(keys) {
		err = fmt.Errorf("MGET of %d keys returned %d values", len(keys), len(res))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("redis: %w", err)
	}
	vals, err = values(res)
	return vals, nil, err
}

func (d *DB) readFollow(ctx context.Context, rkeys []string, args []any) (vals, next [][]byte, err error) {
	res, err := fetchScript.Run(ctx, d.c, rkeys, args...).Slice()
	if err == nil && len(res) != 2*len(rkeys) {
		err = fmt.Errorf("fetch script for %d keys returned %d values", len(rkeys), len(res))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("redis: %w", err)
	}
	all, err := values(res)
	if err != nil {
		return nil, nil, err
	}
	return all[:len(rkeys)], all[len(rkeys):], nil
}

// values converts a reply of bulk strings and nils, from go-redis
// (string) or readResp ([]byte).
func values(res []any) ([][]byte, error) {
	out := make([][]byte, len(res))
	for i, v := range res {
		switch v := v.(type) {
		case nil:
		case string:
			out[i] = []byte(v)
		case []byte:
			out[i] = v
		default:
			return nil, fmt.Errorf("redis: read returned a %T", v)
		}
	}
	return out, nil
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
	if err := t.fetch([]string{k}, true, nil, nil); err != nil {
		return nil, err
	}
	return bytes.Clone(t.value(k)), nil
}

func (t *txn) GetMany(keys [][]byte) ([][]byte, error) {
	ks := make([]string, len(keys))
	for i, k := range keys {
		ks[i] = string(k)
	}
	if err := t.fetch(ks, true, nil, nil); err != nil {
		return nil, err
	}
	out := make([][]byte, len(ks))
	for i, k := range ks {
		out[i] = bytes.Clone(t.value(k))
	}
	return out, nil
}

var _ kvstore.Follower = (*txn)(nil)

// GetFollow reads keys and the keys their values name (rule) in one
// round trip: keys the transaction or the cache already knows are not
// read again, and a followed key whose entry was known is read after.
func (t *txn) GetFollow(keys [][]byte, follow []bool, rule kvstore.FollowRule) (vals, next [][]byte, err error) {
	ks := make([]string, len(keys))
	for i, k := range keys {
		ks[i] = string(k)
	}
	if err := t.fetch(ks, true, follow, &rule); err != nil {
		return nil, nil, err
	}
	var fks []string
	for i, k := range ks {
		if fk := rule.Next(t.value(k)); follow[i] && fk != nil {
			fks = append(fks, string(fk))
		}
	}
	if err := t.fetch(fks, true, nil, nil); err != nil {
		return nil, nil, err
	}
	vals, next = make([][]byte, len(ks)), make([][]byte, len(ks))
	for i, k := range ks {
		v := t.value(k)
		vals[i] = bytes.Clone(v)
		if fk := rule.Next(v); follow[i] && fk != nil {
			next[i] = bytes.Clone(t.value(string(fk)))
		}
	}
	return vals, next, nil
}

// members returns up to count (0: all) members of the sorted set idx
// between the ZRANGEBYLEX bounds min and max; Update checks the range
// again at commit.
func (t *txn) members(idx, min, max string, count int) ([]string, error) {
	ms, err := t.d.c.ZRangeByLex(t.ctx, idx, &redis.ZRangeBy{Min: min, Max: max, Count: int64(count)}).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	if t.update {
		t.scans = append(t.scans, rangeCheck{idx: idx, min: min, max: max, count: count, digest: rangeDigest(ms)})
	}
	return ms, nil
}

// membersValues is members followed by a fetch of their values, in one
// round trip (scanLua). Values the transaction has read or written before
// stay as they were.
func (t *txn) membersValues(idx, min, max string, count int) ([]string, error) {
	res, err := scanScript.Run(t.ctx, t.d.c, []string{idx}, t.d.dataKey(""), min, max, count).Slice()
	if err == nil && len(res)%2 != 0 {
		err = fmt.Errorf("scan script returned %d values, not pairs", len(res))
	}
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	all, err := values(res)
	if err != nil {
		return nil, err
	}
	n := len(all) / 2
	ms := make([]string, n)
	for i := range n {
		if all[i] == nil {
			return nil, fmt.Errorf("redis: scan script returned a nil member")
		}
		ms[i] = string(all[i])
	}
	if t.update {
		t.scans = append(t.scans, rangeCheck{idx: idx, min: min, max: max, count: count, digest: rangeDigest(ms)})
	}
	for i, k := range ms {
		if _, ok := t.writes[k]; ok {
			continue
		}
		if _, ok := t.reads[k]; ok {
			continue
		}
		t.reads[k] = all[n+i]
	}
	return ms, nil
}

// Scan reads the range from the sorted set of the range's scan group, then
// the values, and merges the transaction's buffered writes.
func (t *txn) Scan(begin, end []byte, limit int) ([]kvstore.Pair, error) {
	g, lo, hi, err := scanRange(begin, end)
	if err != nil {
		return nil, err
	}
	if lo >= hi {
		return nil, nil
	}
	if err := t.settleRange(lo, hi); err != nil {
		return nil, err
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
	if !t.update && t.d.cache != nil && len(pending) == 0 && dels == 0 && len(g) == entryGroupLen {
		// A directory the cache knows whole is listed without a round
		// trip (kvcache.Cache.List).
		if ks, vs, ok := t.d.cache.List(string(g), lo, hi, limit); ok {
			out := make([]kvstore.Pair, len(ks))
			for i, k := range ks {
				out[i] = kvstore.Pair{Key: []byte(k), Value: bytes.Clone(vs[i])}
			}
			return out, nil
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
		var ms []string
		if batch > 0 && batch <= scanScriptMax {
			ms, err = t.membersValues(idx, from, "("+hi, batch)
		} else if ms, err = t.members(idx, from, "("+hi, batch); err == nil {
			err = t.fetch(ms, false, nil, nil)
		}
		if err != nil {
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
	if t.d.cache != nil {
		if !t.update && len(g) == entryGroupLen && lo == string(g) && len(out) > 0 &&
			followsValue(string(out[0].Key)) && len(out) <= kvcache.ListMax && (limit <= 0 || len(out) < limit) {
			t.wantListed(out)
		}
		t.d.cache.Fence(string(g))
	}
	return t.addPending(out, found, pending, limit), nil
}

// wantListed asks the cache to follow the entries of a directory a read
// just listed whole from the server. A listing does not fill the cache
// (the cache reads and tracks on its own connection), so without this the
// unlink, rename or open of each listed name read its entry again in a
// round trip of its own: `rm -rf` of a tree on a newly mounted volume ran
// one read script per removal besides its commit. The cache reads the
// entries' current values itself; the listing's are not used.
func (t *txn) wantListed(out []kvstore.Pair) {
	keys := make([]string, len(out))
	vals := make([][]byte, len(out))
	for i, p := range out {
		keys[i], vals[i] = string(p.Key), p.Value
	}
	t.d.cache.Want(keys, vals)
}

// addPending adds to out, the stored pairs a scan found, the buffered sets
// of its range that it did not find, and returns up to limit of them in
// key order.
func (t *txn) addPending(out []kvstore.Pair, found map[string]bool, pending []string, limit int) []kvstore.Pair {
	for _, k := range pending {
		if !found[k] {
			out = append(out, kvstore.Pair{Key: []byte(k), Value: bytes.Clone(t.writes[k])})
		}
	}
	slices.SortFunc(out, func(a, b kvstore.Pair) int { return bytes.Compare(a.Key, b.Key) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// scanRange checks that [begin, end) lies inside one scan group and
// returns the group with the bounds as strings.
func scanRange(begin, end []byte) (g []byte, lo, hi string, err error) {
	g = scanGroup(begin)
	if g == nil || end == nil || bytes.Compare(end, groupEnd(g)) > 0 {
		return nil, "", "", fmt.Errorf("redis engine: scan range [%q, %q) is not inside one scan group", begin, end)
	}
	return g, string(begin), string(end), nil
}

var _ kvstore.MultiScanner = (*txn)(nil)

// ScanMany scans the ranges in two round trips however many they are: one
// pipeline of a ZRANGEBYLEX per range, then one read of the values of
// every member. Each range is then what Scan returns for it, and in Update
// each is checked at commit like Scan's. A range whose first page was cut
// short by limit while buffered deletes hid some of it (rare: kvstore
// batches only unlimited scans) is finished by Scan.
func (t *txn) ScanMany(ranges []kvstore.Range, limit int) ([][]kvstore.Pair, error) {
	type part struct {
		g        []byte
		lo, hi   string
		pending  []string // buffered sets in the range
		dels     int      // buffered deletes in the range
		batch    int      // the ZRANGEBYLEX count (0: all)
		idx, min string
		cmd      *redis.StringSliceCmd
	}
	parts := make([]part, len(ranges))
	pipe := t.d.c.Pipeline()
	for i, r := range ranges {
		g, lo, hi, err := scanRange(r.Begin, r.End)
		if err != nil {
			return nil, err
		}
		p := &parts[i]
		p.g, p.lo, p.hi = g, lo, hi
		if lo >= hi {
			continue
		}
		if err := t.settleRange(lo, hi); err != nil {
			return nil, err
		}
		for k, v := range t.writes {
			if k >= lo && k < hi {
				if v == nil {
					p.dels++
				} else {
					p.pending = append(p.pending, k)
				}
			}
		}
		if limit > 0 {
			p.batch = limit + p.dels
		}
		p.idx, p.min = t.d.indexKey(g), "["+lo
		p.cmd = pipe.ZRangeByLex(t.ctx, p.idx, &redis.ZRangeBy{Min: p.min, Max: "(" + hi, Count: int64(p.batch)})
	}
	if pipe.Len() > 0 {
		if _, err := pipe.Exec(t.ctx); err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
	}
	var all []string
	for i := range parts {
		p := &parts[i]
		if p.cmd == nil {
			continue
		}
		ms := p.cmd.Val()
		if t.update {
			t.scans = append(t.scans, rangeCheck{idx: p.idx, min: p.min, max: "(" + p.hi, count: p.batch, digest: rangeDigest(ms)})
		}
		all = append(all, ms...)
	}
	if err := t.fetch(all, false, nil, nil); err != nil {
		return nil, err
	}
	out := make([][]kvstore.Pair, len(ranges))
	fenced := map[string]bool{}
	for i := range parts {
		p := &parts[i]
		if p.cmd == nil {
			continue
		}
		ms := p.cmd.Val()
		var pairs []kvstore.Pair
		found := make(map[string]bool, len(ms))
		for _, m := range ms {
			found[m] = true
			if v := t.value(m); v != nil {
				pairs = append(pairs, kvstore.Pair{Key: []byte(m), Value: bytes.Clone(v)})
			}
		}
		if limit > 0 && len(ms) == p.batch && len(pairs) < limit {
			var err error
			if out[i], err = t.Scan(ranges[i].Begin, ranges[i].End, limit); err != nil {
				return nil, err
			}
			continue
		}
		if g := string(p.g); t.d.cache != nil && !fenced[g] {
			fenced[g] = true
			t.d.cache.Fence(g)
		}
		out[i] = t.addPending(pairs, found, p.pending, limit)
	}
	return out, nil
}

// errWriteInView is the failure of a View whose callback wrote.
var errWriteInView = errors.New("redis: write in a read-only transaction")

func (t *txn) Set(key, value []byte) {
	if !t.update {
		t.err = errWriteInView
		return
	}
	if value == nil {
		value = []byte{}
	}
	t.dropBlind(string(key))
	t.writes[string(key)] = bytes.Clone(value)
}

func (t *txn) Delete(key []byte) {
	if !t.update {
		t.err = errWriteInView
		return
	}
	t.dropBlind(string(key))
	t.writes[string(key)] = nil
}

// dropBlind forgets the appends and adds to k, which the transaction
// replaces.
func (t *txn) dropBlind(k string) {
	delete(t.appends, k)
	delete(t.adds, k)
}

var _ kvstore.Appender = (*txn)(nil)

// Append appends suffix to key's value at commit (APPEND) without reading
// it. A key the transaction has written or read already is written whole
// instead: its value is known, and a read one is checked at commit anyway.
func (t *txn) Append(key, suffix []byte) {
	if !t.update {
		t.err = errWriteInView
		return
	}
	k := string(key)
	if _, ok := t.adds[k]; ok {
		t.settleOrFail(k)
	}
	if v, ok := t.writes[k]; ok {
		t.writes[k] = append(v, suffix...) // v is the transaction's own copy
		return
	}
	if v, ok := t.reads[k]; ok {
		t.writes[k] = append(bytes.Clone(v), suffix...)
		return
	}
	if t.appends == nil {
		t.appends = map[string][]byte{}
	}
	t.appends[k] = append(t.appends[k], suffix...)
}

var _ kvstore.Adder = (*txn)(nil)

// Add adds delta to the counter key at commit (commitLua) without reading
// it; like Append, a key whose value the transaction knows is written
// whole instead.
func (t *txn) Add(key []byte, delta int64) {
	if !t.update {
		t.err = errWriteInView
		return
	}
	k := string(key)
	if _, ok := t.appends[k]; ok {
		t.settleOrFail(k)
	}
	v, written := t.writes[k]
	if !written {
		v, written = t.reads[k]
	}
	if written {
		sum, err := addCounter(k, v, delta)
		if err != nil && t.err == nil {
			t.err = err
		}
		t.writes[k] = sum
		return
	}
	if t.adds == nil {
		t.adds = map[string]int64{}
	}
	t.adds[k] += delta
}

// addCounter returns the value of counter k, v (nil: missing), plus
// delta: the value Add stores, nil when the sum is 0.
func addCounter(k string, v []byte, delta int64) ([]byte, error) {
	var n int64
	switch {
	case len(v) == 8:
		n = int64(binary.BigEndian.Uint64(v))
	case v != nil:
		return nil, fmt.Errorf("redis: counter %q is %d bytes, not 8", k, len(v))
	}
	if n += delta; n == 0 {
		return nil, nil
	}
	return binary.BigEndian.AppendUint64(nil, uint64(n)), nil
}

// settle turns the appends and adds to k, which the transaction is about
// to read, into a write of the whole value: it reads the stored value (a
// read checked at commit like any other) and buffers the result.
func (t *txn) settle(k string) error {
	suffix, app := t.appends[k]
	delta, add := t.adds[k]
	if !app && !add {
		return nil
	}
	t.dropBlind(k)
	if err := t.fetch([]string{k}, true, nil, nil); err != nil {
		if app {
			t.appends[k] = suffix
		}
		if add {
			t.adds[k] = delta
		}
		return err
	}
	if app {
		t.writes[k] = append(bytes.Clone(t.value(k)), suffix...)
		return nil
	}
	sum, err := addCounter(k, t.value(k), delta)
	t.writes[k] = sum
	return err
}

// settleOrFail settles k for a method that cannot return the error: the
// error fails the transaction.
func (t *txn) settleOrFail(k string) {
	if err := t.settle(k); err != nil && t.err == nil {
		t.err = err
	}
}

// settleRange settles the keys in [lo, hi) appended or added to, which a
// scan is about to read.
func (t *txn) settleRange(lo, hi string) error {
	for _, k := range t.blindKeys() {
		if k >= lo && k < hi {
			if err := t.settle(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// blindKeys returns the keys appended or added to.
func (t *txn) blindKeys() []string {
	keys := make([]string, 0, len(t.appends)+len(t.adds))
	for k := range t.appends {
		keys = append(keys, k)
	}
	for k := range t.adds {
		keys = append(keys, k)
	}
	return keys
}
