package metaserver

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/google/btree"

	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/metaserver/wire"
)

// The state is an ordered set of pairs (key, value, and the index of the
// log record that last wrote the pair) kept in pages: byte blocks of up
// to pageMax bytes, each holding a run of pairs in key order, indexed by
// a B-tree of pages by their first key.
//
// A page is written once and never changed: a write makes new pages for
// the one it changes and swaps them into the index. So a clone of the
// index (copy-on-write, see btree.Clone) is a snapshot that shares every
// page with the tree it was cloned from, readers need no lock, and two
// states share what neither has changed since.
//
// Within a page each pair is
//
//	uvarint shared | uvarint len(rest) | rest | uvarint len(value) | value | uvarint rev
//
// where the key is the first shared bytes of the previous pair's key
// followed by rest. Keys share long prefixes here ('A', an inode number
// and a kind byte begin every key of a file or a directory's entries), so
// a node's key takes a byte or two, and a page is one allocation for
// about fifty pairs where a tree of pairs had a 40-byte item and an
// allocation for each.
const (
	pageMax = 4096        // a page is split once its pairs take more
	pageMin = pageMax / 4 // a smaller page is merged with the next
)

// page is a run of pairs in key order, never written after it is made.
type page struct {
	data  []byte
	first []byte // the first pair's key, in data
	n     int    // pairs
}

func pageLess(a, b *page) bool { return bytes.Compare(a.first, b.first) < 0 }

// tree is the state: pages indexed by first key. A tree is written by one
// goroutine; a clone may be read by any number at once.
type tree struct {
	pages *btree.BTreeG[*page]
	n     int // pairs
	bytes int // bytes of page data
}

func newTree() *tree { return &tree{pages: btree.NewG(16, pageLess)} }

// Clone returns a copy of t that shares its pages; writes to either do
// not show in the other.
func (t *tree) Clone() *tree { return &tree{pages: t.pages.Clone(), n: t.n, bytes: t.bytes} }

// Len returns the number of pairs.
func (t *tree) Len() int { return t.n }

// Pages returns the number of pages and the bytes their pairs take.
func (t *tree) Pages() (n, bytes int) { return t.pages.Len(), t.bytes }

// item is one pair as a reader sees it. Its value is the page's bytes
// (never written); its key is the reader's own unless said otherwise.
type item struct {
	k, v []byte
	rev  uint64
}

func (it item) key() []byte { return it.k }
func (it item) val() []byte { return it.v }

// cursor walks the pairs of one page.
type cursor struct {
	data []byte
	off  int
	key  []byte // the current pair's key, rebuilt in a buffer of the cursor's
	val  []byte
	rev  uint64
}

func (c *cursor) reset(p *page) { c.data, c.off = p.data, 0 }

func (c *cursor) uvarint() int {
	v, n := binary.Uvarint(c.data[c.off:])
	c.off += n
	return int(v)
}

// next moves to the next pair, and reports false at the page's end.
func (c *cursor) next() bool {
	if c.off >= len(c.data) {
		return false
	}
	shared := c.uvarint()
	rest := c.uvarint()
	c.key = append(c.key[:shared], c.data[c.off:c.off+rest]...)
	c.off += rest
	vlen := c.uvarint()
	c.val = c.data[c.off : c.off+vlen : c.off+vlen]
	c.off += vlen
	c.rev = uint64(c.uvarint())
	return true
}

// pageFor returns the page that holds key if t has it: the last page whose
// first key is not after key, or the first page. It is nil only when t is
// empty.
func (t *tree) pageFor(key []byte) *page {
	var p *page
	t.pages.DescendLessOrEqual(&page{first: key}, func(q *page) bool { p = q; return false })
	if p == nil {
		p, _ = t.pages.Min()
	}
	return p
}

// Get returns key's pair (with key itself as its key) and whether t has it.
func (t *tree) Get(key []byte) (item, bool) {
	p := t.pageFor(key)
	if p == nil {
		return item{}, false
	}
	return p.get(key)
}

func (p *page) get(key []byte) (item, bool) {
	var c cursor
	c.reset(p)
	for c.next() {
		switch bytes.Compare(c.key, key) {
		case 0:
			return item{k: key, v: c.val, rev: c.rev}, true
		case 1:
			return item{}, false
		}
	}
	return item{}, false
}

// Ascend calls fn for every pair in key order until fn returns false.
// The item's key is valid only until fn returns.
func (t *tree) Ascend(fn func(item) bool) { t.AscendRange(nil, nil, fn) }

// AscendRange calls fn for the pairs from begin (nil: the first) up to but
// not including end (nil: to the last), in key order, until fn returns
// false. The item's key is valid only until fn returns.
func (t *tree) AscendRange(begin, end []byte, fn func(item) bool) {
	start := t.pageFor(begin)
	if start == nil {
		return
	}
	var c cursor
	t.pages.AscendGreaterOrEqual(start, func(p *page) bool {
		if end != nil && bytes.Compare(p.first, end) >= 0 {
			return false
		}
		c.reset(p)
		for c.next() {
			if begin != nil && bytes.Compare(c.key, begin) < 0 {
				continue
			}
			if end != nil && bytes.Compare(c.key, end) >= 0 {
				return false
			}
			if !fn(item{k: c.key, v: c.val, rev: c.rev}) {
				return false
			}
		}
		return true
	})
}

// pair is a pair being rewritten: its key and value point into a page or
// a write, both of which stay unchanged while it is in use.
type pair struct {
	k, v []byte
	rev  uint64
}

// pairs appends p's pairs to out, their keys copied into buffers of a few
// kilobytes each.
func (p *page) pairs(out []pair) []pair {
	var c cursor
	c.reset(p)
	var keys []byte
	for c.next() {
		if cap(keys)-len(keys) < len(c.key) {
			keys = make([]byte, 0, max(2*len(p.data), len(c.key)))
		}
		at := len(keys)
		keys = append(keys, c.key...)
		out = append(out, pair{k: keys[at:len(keys):len(keys)], v: c.val, rev: c.rev})
	}
	return out
}

// encoder builds pages from pairs given in key order.
type encoder struct {
	buf  []byte
	prev []byte
	n    int
}

func (e *encoder) add(k, v []byte, rev uint64) {
	shared := 0
	if e.n > 0 {
		for shared < len(k) && shared < len(e.prev) && k[shared] == e.prev[shared] {
			shared++
		}
	}
	e.buf = binary.AppendUvarint(e.buf, uint64(shared))
	e.buf = binary.AppendUvarint(e.buf, uint64(len(k)-shared))
	e.buf = append(e.buf, k[shared:]...)
	e.buf = binary.AppendUvarint(e.buf, uint64(len(v)))
	e.buf = append(e.buf, v...)
	e.buf = binary.AppendUvarint(e.buf, rev)
	e.prev = append(e.prev[:0], k...)
	e.n++
}

// page returns the pairs added since the last call as a page of its own
// allocation, and starts the next page.
func (e *encoder) page() *page {
	data := bytes.Clone(e.buf)
	// The first pair shares nothing: its key starts at its third byte or
	// later, after two uvarints.
	p := &page{data: data, n: e.n}
	var c cursor
	c.reset(p)
	c.uvarint()
	klen := c.uvarint()
	p.first = data[c.off : c.off+klen : c.off+klen]
	e.buf, e.n = e.buf[:0], 0
	return p
}

// build makes pages of ps (in key order), of about equal size, none over
// pageMax bytes unless it holds one pair bigger than that.
func build(ps []pair) []*page {
	size := 0
	for _, p := range ps {
		size += len(p.k) + len(p.v) + 8
	}
	target := size / max(1, (size+pageMax-1)/pageMax)
	var e encoder
	var out []*page
	for i, p := range ps {
		if e.n > 0 && len(e.buf)+len(p.k)+len(p.v)+8 > pageMax {
			out = append(out, e.page())
		}
		e.add(p.k, p.v, p.rev)
		if len(e.buf) >= target && i < len(ps)-1 {
			out = append(out, e.page())
		}
	}
	if e.n > 0 {
		out = append(out, e.page())
	}
	return out
}

// applyWrites applies ws to t as written by record index, in their order,
// and returns how many inodes (node records) that added, less those it
// removed.
//
// The writes are sorted by key (keeping the order of writes to one key)
// and applied a page at a time: each page they touch is read once and
// rewritten once, however many of the writes fall into it.
func applyWrites(t *tree, ws []wire.Write, index uint64) (inodes int64) {
	if len(ws) == 0 {
		return 0
	}
	order := make([]int, len(ws))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return bytes.Compare(ws[a].Key, ws[b].Key) })
	for i := 0; i < len(order); {
		p := t.pageFor(ws[order[i]].Key)
		// The writes up to the next page's first key fall into p.
		var next *page
		if p != nil {
			t.pages.AscendGreaterOrEqual(p, func(q *page) bool {
				if q == p {
					return true
				}
				next = q
				return false
			})
		}
		j := i + 1
		for j < len(order) && (next == nil || bytes.Compare(ws[order[j]].Key, next.first) < 0) {
			j++
		}
		var old []pair
		if p != nil {
			old = p.pairs(make([]pair, 0, p.n+j-i))
		}
		merged, added, delta := merge(old, ws, order[i:j], index)
		inodes += delta
		t.n += added
		if p != nil {
			t.pages.Delete(p)
			t.bytes -= len(p.data)
		}
		// A page left small takes in the next one, which no write of
		// this call may still need (they are sorted; the next group
		// looks its page up again).
		if next != nil && pairsSize(merged) < pageMin {
			merged = next.pairs(merged)
			t.pages.Delete(next)
			t.bytes -= len(next.data)
		}
		if len(merged) > 0 {
			for _, np := range build(merged) {
				t.pages.ReplaceOrInsert(np)
				t.bytes += len(np.data)
			}
		}
		i = j
	}
	return inodes
}

func pairsSize(ps []pair) int {
	n := 0
	for _, p := range ps {
		n += len(p.k) + len(p.v) + 4
	}
	return n
}

// merge applies the writes ws[order[...]] (sorted by key, in commit order
// within a key) to old (sorted), and returns the result, how many pairs
// it has more than old, and the change in node records.
func merge(old []pair, ws []wire.Write, order []int, index uint64) (out []pair, added int, inodes int64) {
	out = make([]pair, 0, len(old)+len(order))
	i := 0
	for k := 0; k < len(order); {
		key := ws[order[k]].Key
		for i < len(old) && bytes.Compare(old[i].k, key) < 0 {
			out = append(out, old[i])
			i++
		}
		cur, exists := pair{}, false
		if i < len(old) && bytes.Equal(old[i].k, key) {
			cur, exists = old[i], true
			i++
		}
		had := exists
		node := kvstore.IsNodeKey(key)
		for ; k < len(order) && bytes.Equal(ws[order[k]].Key, key); k++ {
			w := ws[order[k]]
			if w.Delete {
				exists = false
			} else {
				cur, exists = pair{k: key, v: w.Value, rev: index}, true
			}
		}
		switch {
		case exists && !had:
			added++
			if node {
				inodes++
			}
		case !exists && had:
			added--
			if node {
				inodes--
			}
		}
		if exists {
			out = append(out, cur)
		}
	}
	return append(out, old[i:]...), added, inodes
}

// loader builds a tree from pairs given in strictly increasing key order,
// as a checkpoint holds them, filling each page.
type loader struct {
	t *tree
	e encoder
}

func newLoader() *loader { return &loader{t: newTree()} }

// add appends a pair; it reports false, adding nothing, when k is not
// after the key added before it.
func (l *loader) add(k, v []byte, rev uint64) bool {
	if l.t.n > 0 && bytes.Compare(k, l.e.prev) <= 0 {
		return false
	}
	if l.e.n > 0 && len(l.e.buf)+len(k)+len(v)+8 > pageMax {
		l.flush()
	}
	l.e.add(k, v, rev)
	l.t.n++
	return true
}

func (l *loader) flush() {
	if l.e.n == 0 {
		return
	}
	p := l.e.page()
	l.t.pages.ReplaceOrInsert(p)
	l.t.bytes += len(p.data)
}

// tree returns the tree built.
func (l *loader) tree() *tree {
	l.flush()
	return l.t
}
