package metaserver

import (
	"bytes"
	"sync"

	"github.com/sluicefs/sluice/internal/wire"
)

// txnKey names a transaction of one client.
type txnKey struct{ client, txn uint64 }

// dedupeCap is how many committed transactions the server remembers, so
// that a commit retried after a lost reply is answered, not applied
// again. A client retries within seconds; this is hours of commits at
// the rates a mount makes.
const dedupeCap = 1 << 16

// dedupe remembers the last dedupeCap committed transactions.
type dedupe struct {
	seen map[txnKey]uint64 // index of the record
	ring []txnKey
	next int
}

func newDedupe() *dedupe {
	return &dedupe{seen: make(map[txnKey]uint64), ring: make([]txnKey, 0, 1024)}
}

func (d *dedupe) add(k txnKey, index uint64) {
	if k.client == 0 {
		return
	}
	if len(d.ring) < dedupeCap {
		d.ring = append(d.ring, k)
	} else {
		delete(d.seen, d.ring[d.next])
		d.ring[d.next] = k
		d.next = (d.next + 1) % dedupeCap
	}
	d.seen[k] = index
}

func (d *dedupe) has(k txnKey) bool {
	_, ok := d.seen[k]
	return k.client != 0 && ok
}

// entries returns the remembered transactions, oldest first.
func (d *dedupe) entries() []dedupeEntry {
	out := make([]dedupeEntry, 0, len(d.ring))
	for i := range d.ring {
		k := d.ring[(d.next+i)%len(d.ring)]
		out = append(out, dedupeEntry{k, d.seen[k]})
	}
	return out
}

type dedupeEntry struct {
	k     txnKey
	index uint64
}

// callTable remembers the last dedupeCap calls of mounts' sessions whose
// effect a commit was (keyed by session and call number; see
// store.WithCall), so that a call sent again after a restart is answered
// rather than run again: its effect is in the records already. The
// apply loop adds (and replay, from the log); connections ask.
type callTable struct {
	mu sync.Mutex
	d  *dedupe
}

func (c *callTable) add(k txnKey, index uint64) {
	if k.client == 0 {
		return
	}
	c.mu.Lock()
	c.d.add(k, index)
	c.mu.Unlock()
}

// applied reports whether call seq of session sid was applied.
func (c *callTable) applied(sid, seq uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.has(txnKey{sid, seq})
}

func (c *callTable) entries() []dedupeEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.entries()
}

// changed tells whether what a transaction read in snap (keys and
// ranges) is different in cur.
func changed(snap, cur *tree, reads [][]byte, ranges []wire.Range) bool {
	for _, k := range reads {
		if snap.pageFor(k) == cur.pageFor(k) {
			continue // one page, never written: k is as it was
		}
		a, aok := snap.Get(k)
		b, bok := cur.Get(k)
		if aok != bok || a.rev != b.rev {
			return true
		}
	}
	for _, r := range ranges {
		as, bs := scan(snap, r, 0), scan(cur, r, 0)
		if len(as) != len(bs) {
			return true
		}
		for i := range as {
			if as[i].rev != bs[i].rev || !bytes.Equal(as[i].k, bs[i].k) {
				return true
			}
		}
	}
	return false
}

// scan returns up to limit pairs of t in r (limit <= 0: all), their keys
// copied.
func scan(t *tree, r wire.Range, limit int) []item {
	var out []item
	t.AscendRange(r.Begin, r.End, func(it item) bool {
		it.k = bytes.Clone(it.k)
		out = append(out, it)
		return limit <= 0 || len(out) < limit
	})
	return out
}
