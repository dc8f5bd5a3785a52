package redis

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// commit checks every value and range the transaction read and applies
// the buffered writes with their index updates, or reports a conflict. A
// transaction that read nothing has nothing to check and commits with a
// plain MULTI/EXEC, which costs the server less than a script. A
// transaction that only read still checks its reads, so they are known to
// have been current when it returns. Adds (kvstore.Adder) need the script.
func (t *txn) commit() error {
	switch {
	case len(t.reads) > 0 || len(t.scans) > 0 || len(t.adds) > 0:
		return t.run(true)
	case len(t.writes) > 0 || len(t.appends) > 0:
		return t.blind()
	}
	return nil
}

// checkGuesses is called when the transaction's function failed. When it
// decided on values remembered from earlier reads, they are checked, so
// that a stale guess gives a conflict (and a retry) rather than a wrong
// error.
func (t *txn) checkGuesses() error {
	if !t.guessed && len(t.cached) == 0 {
		return nil
	}
	if err := t.run(false); errors.Is(err, store.ErrConflict) {
		return err
	}
	return nil
}

// writePlan is the buffered writes in the shape of Redis commands.
type writePlan struct {
	setKeys []string
	setVals []any
	delKeys []string
	appKeys []string // APPEND
	appVals []any
	adds    []addOp
	index   []indexUpdate
}

// addOp is one kvstore.Adder sum for commitLua.
type addOp struct {
	key, idx string // the data key; its sorted set, or key itself when none
	delta    string
	member   string // the key's member in idx ("": none)
}

// indexUpdate adds members to, or removes them from, one sorted set.
type indexUpdate struct {
	key     string
	add     bool
	members []any
}

func (t *txn) plan() writePlan {
	var p writePlan
	adds, rems := map[string]int{}, map[string]int{} // sorted set -> index in p.index
	index := func(k string, add bool) {
		g := scanGroup([]byte(k))
		if g == nil {
			return
		}
		idx, ops := t.d.indexKey(g), adds
		if !add {
			ops = rems
		}
		i, ok := ops[idx]
		if !ok {
			i = len(p.index)
			ops[idx] = i
			p.index = append(p.index, indexUpdate{key: idx, add: add})
		}
		p.index[i].members = append(p.index[i].members, k)
	}
	for k, v := range t.writes {
		rk := t.d.dataKey(k)
		if v == nil {
			p.delKeys = append(p.delKeys, rk)
		} else {
			p.setKeys, p.setVals = append(p.setKeys, rk), append(p.setVals, v)
		}
		index(k, v != nil)
	}
	for k, v := range t.appends {
		p.appKeys, p.appVals = append(p.appKeys, t.d.dataKey(k)), append(p.appVals, v)
		index(k, true)
	}
	for k, n := range t.adds {
		// Whether the key is indexed afterwards depends on the sum, which
		// the script computes.
		rk, idx, member := t.d.dataKey(k), t.d.dataKey(k), ""
		if g := scanGroup([]byte(k)); g != nil {
			idx, member = t.d.indexKey(g), k
		}
		p.adds = append(p.adds, addOp{key: rk, idx: idx, delta: strconv.FormatInt(n, 10), member: member})
	}
	return p
}

// blind commits writes that depend on no read with MULTI/EXEC.
func (t *txn) blind() error {
	p := t.plan()
	if t.d.cache != nil {
		keys := t.writeKeys(true)
		t.d.cache.BeginWrite(keys)
		defer t.d.cache.EndWrite(keys)
	}
	_, err := t.d.c.TxPipelined(t.ctx, func(pipe redis.Pipeliner) error {
		if len(p.setKeys) > 0 {
			kv := make([]any, 0, 2*len(p.setKeys))
			for i, k := range p.setKeys {
				kv = append(kv, k, p.setVals[i])
			}
			pipe.MSet(t.ctx, kv...)
		}
		if len(p.delKeys) > 0 {
			pipe.Del(t.ctx, p.delKeys...)
		}
		for i, k := range p.appKeys {
			pipe.Append(t.ctx, k, string(p.appVals[i].([]byte)))
		}
		for _, u := range p.index {
			if u.add {
				zs := make([]redis.Z, len(u.members))
				for i, m := range u.members {
					zs[i].Member = m
				}
				pipe.ZAdd(t.ctx, u.key, zs...)
			} else {
				pipe.ZRem(t.ctx, u.key, u.members...)
			}
		}
		return nil
	})
	forget(t.d.recent, t.appends) // their values are not known here
	if err != nil {
		forget(t.d.recent, t.writes) // they may or may not have been applied
		return fmt.Errorf("redis commit: %w", err)
	}
	now := t.d.recent.now()
	for k, v := range t.writes {
		t.d.recent.put(k, v, now)
	}
	return nil
}

// run sends commitScript with the transaction's checks and, with apply,
// its writes.
func (t *txn) run(apply bool) error {
	var p writePlan
	if apply {
		p = t.plan()
	}
	keys, args := t.scriptArgs(&p)
	sent := t.d.recent.now()
	if apply && len(t.appends)+len(t.adds) > 0 {
		// The new values of keys appended or added to are not known
		// here: forget what was remembered of them, and have the cache
		// read them again once the commit has returned.
		forget(t.d.recent, t.appends)
		forget(t.d.recent, t.adds)
		if t.d.cache != nil {
			bk := t.blindKeys()
			t.d.cache.BeginWrite(bk)
			defer t.d.cache.EndWrite(bk)
		}
	}
	ok, err, done := t.runOnWatch(keys, args, apply)
	if done {
		return t.finish(ok, err, apply, sent)
	}
	if apply && t.d.cache != nil {
		// The server reports these writes to the cache's connection
		// like anybody's; until it has, the cache must not serve the
		// keys (see kvcache.Cache.BeginWrite).
		wk := t.writeKeys(false)
		t.d.cache.BeginWrite(wk)
		defer t.d.cache.EndWrite(wk)
	}
	ok, err = commitScript.Run(t.ctx, t.d.c, keys, args...).Int()
	return t.finish(ok, err, apply, sent)
}

// finish reports the outcome ok (1: applied) or err of a commit sent at
// sent.
func (t *txn) finish(ok int, err error, apply bool, sent time.Duration) error {
	switch {
	case err != nil:
		// The writes may or may not have been applied.
		forget(t.d.recent, t.reads)
		forget(t.d.recent, t.writes)
		return fmt.Errorf("redis commit: %w", err)
	case ok != 1:
		forget(t.d.recent, t.reads)
		if t.d.cache != nil {
			t.d.cache.Refresh(t.cached)
		}
		return fmt.Errorf("%w: a key read by the transaction changed", store.ErrConflict)
	}
	for k, v := range t.reads {
		t.d.recent.put(k, v, sent)
	}
	if apply {
		for k, v := range t.writes {
			t.d.recent.put(k, v, sent)
		}
	}
	return nil
}

// runOnWatch runs commitScript on the cache's connection, where the
// server reports no change this handle makes (NOLOOP; Redis 7.0 reports
// a script's writes all the same, see kvcache.RefetchDelay), so that after a
// successful commit every value it read or wrote is current in the cache
// until an invalidation says otherwise. done is false when the connection
// is down or the server has not loaded the script yet: nothing was sent
// or run, and the caller uses the pool.
func (t *txn) runOnWatch(keys []string, args []any, apply bool) (ok int, err error, done bool) {
	if t.d.watch == nil {
		return 0, nil, false
	}
	cmd := make([]string, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "EVALSHA", commitScript.Hash(), strconv.Itoa(len(keys)))
	cmd = append(cmd, keys...)
	for _, a := range args {
		switch a := a.(type) {
		case string:
			cmd = append(cmd, a)
		case []byte:
			cmd = append(cmd, string(a))
		default:
			return 0, nil, false
		}
	}
	// The cache learns the outcome where the reply arrives: by the time
	// this goroutine runs again, later changes of the keys may have been
	// reported and read.
	v, err := t.d.watch.Call(t.ctx, cmd, func(seq uint64, v any) {
		if n, ok := v.(int64); ok && n == 1 {
			t.d.cache.Committed(seq, t.reads, t.writes, apply)
		}
	})
	var re respError
	replied := errors.As(err, &re) // the server answered with an error
	_, moved := redirection(re)
	switch {
	case replied && strings.HasPrefix(string(re), "NOSCRIPT"):
		return 0, nil, false // nothing ran; the pool loads the script
	case replied && moved:
		// The cluster moved the volume's slot: nothing ran. The pool
		// follows the redirection; the next session of the cache finds the
		// new master.
		t.d.watch.Drop()
		return 0, nil, false
	case replied || (err != nil && t.ctx.Err() != nil):
		return 0, err, true
	case err != nil:
		// The connection is down or broke (kvcache.ErrNoSession, or lost with
		// the command perhaps applied): the pool runs the commit, as
		// go-redis retries one on a broken connection. Had the first
		// one applied, its checks now fail and kvstore retries the
		// transaction, which then finds its own writes.
		return 0, nil, false
	}
	n, isInt := v.(int64)
	if !isInt {
		return 0, fmt.Errorf("commit script returned %T", v), true
	}
	return int(n), nil, true
}

// writeKeys returns the keys the transaction writes, and with blind
// those it appends or adds to.
func (t *txn) writeKeys(blind bool) []string {
	var keys []string
	if blind {
		keys = t.blindKeys()
	}
	for k := range t.writes {
		keys = append(keys, k)
	}
	return keys
}

// scriptArgs returns the KEYS and ARGV of commitScript for the
// transaction's checks and the writes of p.
func (t *txn) scriptArgs(p *writePlan) ([]string, []any) {
	n := len(t.reads) + len(t.scans) + len(p.setKeys) + len(p.delKeys) + len(p.appKeys) + 2*len(p.adds) + len(p.index)
	keys := make([]string, 0, n)
	args := make([]any, 0, 7+2*len(t.reads)+4*len(t.scans)+len(p.setKeys)+len(p.appKeys)+2*len(p.adds)+len(t.writes)+len(t.appends)+2*len(p.index))
	args = append(args, strconv.Itoa(len(t.reads)), strconv.Itoa(len(t.scans)),
		strconv.Itoa(len(p.setKeys)), strconv.Itoa(len(p.delKeys)), strconv.Itoa(len(p.appKeys)),
		strconv.Itoa(len(p.adds)), strconv.Itoa(len(p.index)))
	for k, v := range t.reads {
		keys = append(keys, t.d.dataKey(k))
		args = appendValueCheck(args, v)
	}
	for _, s := range t.scans {
		keys = append(keys, s.idx)
		args = append(args, s.min, s.max, strconv.Itoa(s.count), s.digest)
	}
	keys = append(keys, p.setKeys...)
	args = append(args, p.setVals...)
	keys = append(keys, p.delKeys...)
	keys = append(keys, p.appKeys...)
	args = append(args, p.appVals...)
	for _, a := range p.adds {
		keys = append(keys, a.key, a.idx)
		args = append(args, a.delta, a.member)
	}
	for _, u := range p.index {
		keys = append(keys, u.key)
		op := "r"
		if u.add {
			op = "a"
		}
		args = append(args, op, strconv.Itoa(len(u.members)))
		args = append(args, u.members...)
	}
	return keys, args
}
