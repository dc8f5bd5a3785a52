package metaserver

import (
	"bytes"

	"github.com/google/btree"

	"github.com/sluicefs/sluice/internal/meta/store/kvstore"

	"github.com/sluicefs/sluice/internal/metaserver/wire"
)

// item is one pair, key and value in one allocation (kv, the key its
// first klen bytes), with the index of the log record that last wrote
// it: 40 bytes in the tree's nodes, and one object for the collector.
type item struct {
	kv   []byte
	rev  uint64
	klen uint32
}

func (it item) key() []byte { return it.kv[:it.klen:it.klen] }
func (it item) val() []byte { return it.kv[it.klen:] }

// probe returns an item to look key up with.
func probe(key []byte) item { return item{kv: key, klen: uint32(len(key))} }

// newItem copies k and v into one allocation, or into arena when it has
// room (see arena).
func newItem(k, v []byte, rev uint64, a *arena) item {
	var kv []byte
	if a != nil {
		kv = a.alloc(len(k) + len(v))
	} else {
		kv = make([]byte, len(k)+len(v))
	}
	copy(kv, k)
	copy(kv[len(k):], v)
	return item{kv: kv, rev: rev, klen: uint32(len(k))}
}

func less(a, b item) bool { return bytes.Compare(a.key(), b.key()) < 0 }

// arena hands out pieces of large blocks, so that loading a checkpoint
// makes a few large objects instead of one per pair. A block lives as
// long as any pair in it; pairs rewritten later get allocations of their
// own.
type arena struct {
	block []byte
}

const arenaBlock = 1 << 20

func (a *arena) alloc(n int) []byte {
	if n > arenaBlock/16 {
		return make([]byte, n)
	}
	if cap(a.block)-len(a.block) < n {
		a.block = make([]byte, 0, arenaBlock)
	}
	at := len(a.block)
	a.block = a.block[:at+n]
	return a.block[at : at+n : at+n]
}

type tree = btree.BTreeG[item]

func newTree() *tree { return btree.NewG(32, less) }

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

// applyWrites applies ws to t as written by record index, and returns
// how many inodes (node records) that added, less those it removed.
func applyWrites(t *tree, ws []wire.Write, index uint64) (inodes int64) {
	for _, w := range ws {
		node := kvstore.IsNodeKey(w.Key)
		if w.Delete {
			if _, found := t.Delete(probe(w.Key)); found && node {
				inodes--
			}
		} else if _, replaced := t.ReplaceOrInsert(newItem(w.Key, w.Value, index, nil)); !replaced && node {
			inodes++
		}
	}
	return inodes
}

// changed tells whether what a transaction read in snap (keys and
// ranges) is different in cur.
func changed(snap, cur *tree, reads [][]byte, ranges []wire.Range) bool {
	for _, k := range reads {
		a, aok := snap.Get(probe(k))
		b, bok := cur.Get(probe(k))
		if aok != bok || a.rev != b.rev {
			return true
		}
	}
	for _, r := range ranges {
		var as, bs []uint64
		var ak, bk [][]byte
		collect := func(t *tree, revs *[]uint64, keys *[][]byte) {
			visit := func(it item) bool { *revs = append(*revs, it.rev); *keys = append(*keys, it.key()); return true }
			if r.End == nil {
				t.AscendGreaterOrEqual(probe(r.Begin), visit)
			} else {
				t.AscendRange(probe(r.Begin), probe(r.End), visit)
			}
		}
		collect(snap, &as, &ak)
		collect(cur, &bs, &bk)
		if len(as) != len(bs) {
			return true
		}
		for i := range as {
			if as[i] != bs[i] || !bytes.Equal(ak[i], bk[i]) {
				return true
			}
		}
	}
	return false
}

// scan returns up to limit pairs of t in r (limit <= 0: all).
func scan(t *tree, r wire.Range, limit int) []item {
	var out []item
	visit := func(it item) bool {
		out = append(out, it)
		return limit <= 0 || len(out) < limit
	}
	if r.End == nil {
		t.AscendGreaterOrEqual(probe(r.Begin), visit)
	} else {
		t.AscendRange(probe(r.Begin), probe(r.End), visit)
	}
	return out
}
