package metaserver

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/btree"
	"github.com/klauspost/compress/zstd"

	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/wire"
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

// A page nobody has read or written for a while is compressed (zstd,
// about a seventh of its size for a volume's records) by the apply loop
// in small steps while no commit waits (see tree.compact), and a reader that
// meets a compressed page decompresses it for itself and tells the loop,
// which puts the page back uncompressed (tree.open): what is in use stays
// fast, and what is not costs little memory.

// page is a run of pairs in key order, never written after it is made
// (but for the marks used and dense, which are atomic).
type page struct {
	data  []byte        // the pairs; nil while compressed
	z     []byte        // the pairs compressed, while data is nil
	first []byte        // the first pair's key
	n     int           // pairs
	used  atomic.Uint32 // the tree clock's tick when last read or made
	dense atomic.Bool   // compression would not save enough: do not try again
}

func pageLess(a, b *page) bool { return bytes.Compare(a.first, b.first) < 0 }

// held is the memory p's pairs take: their allocations.
func (p *page) held() int { return cap(p.data) + cap(p.z) }

// content returns p's pairs, decompressing them when p is compressed.
func (p *page) content() []byte {
	if p.data != nil {
		return p.data
	}
	d, err := zstdDecoder().DecodeAll(p.z, make([]byte, 0, pageMax))
	if err != nil {
		// unreachable: the bytes were compressed by this process and
		// never written since: only memory corruption gets here.
		panic(fmt.Sprintf("metaserver: compressed page starting %q does not decompress: %v", p.first, err))
	}
	return d
}

var (
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
		if err != nil {
			panic(err) // unreachable: constant options never fail
		}
		return e
	})
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderLowmem(true))
		if err != nil {
			panic(err) // unreachable: constant options never fail
		}
		return d
	})
)

// pageClock is what a tree and its clones share: the clock that stamps
// pages with their last use, and where readers send the compressed pages
// they met.
type pageClock struct {
	now    atomic.Uint32 // ticks, advanced by the apply loop
	opened chan *page
}

// tree is the state: pages indexed by first key. A tree is written by one
// goroutine; a clone may be read by any number at once.
type tree struct {
	pages  *btree.BTreeG[*page]
	clock  *pageClock
	n      int // pairs
	bytes  int // bytes of page data, compressed or not
	zpages int // pages compressed
	zbytes int // bytes of compressed pages

	scratch []byte // applyWrites' buffer (the writer's; clones leave it be)
}

func newTree() *tree {
	return &tree{pages: btree.NewG(16, pageLess), clock: &pageClock{opened: make(chan *page, 256)}}
}

// Clone returns a copy of t that shares its pages; writes to either do
// not show in the other.
func (t *tree) Clone() *tree {
	c := *t
	c.pages = t.pages.Clone()
	return &c
}

// Len returns the number of pairs.
func (t *tree) Len() int { return t.n }

// Pages returns the number of pages and the bytes their pairs take.
func (t *tree) Pages() (n, bytes int) { return t.pages.Len(), t.bytes }

// read returns p's pairs for a reader, and stamps p as used now. A
// compressed page is decompressed for this read, and handed to the loop
// to be kept open.
func (t *tree) read(p *page) []byte {
	if now := t.clock.now.Load(); p.used.Load() != now {
		p.used.Store(now)
	}
	if p.data != nil {
		return p.data
	}
	select {
	case t.clock.opened <- p:
	default:
	}
	return p.content()
}

// add puts the new page p into t.
func (t *tree) add(p *page) {
	p.used.Store(t.clock.now.Load())
	if old, ok := t.pages.ReplaceOrInsert(p); ok {
		t.drop(old)
	}
	t.bytes += p.held()
	if p.data == nil {
		t.zpages++
		t.zbytes += cap(p.z)
	}
}

// remove takes p out of t.
func (t *tree) remove(p *page) {
	if _, ok := t.pages.Delete(p); ok {
		t.drop(p)
	}
}

func (t *tree) drop(p *page) {
	t.bytes -= p.held()
	if p.data == nil {
		t.zpages--
		t.zbytes -= cap(p.z)
	}
}

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
	data  []byte
	off   int
	start int    // where the current pair's encoding begins
	key   []byte // the current pair's key, rebuilt in a buffer of the cursor's
	val   []byte
	rev   uint64
}

func (c *cursor) reset(data []byte) { c.data, c.off = data, 0 }

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
	c.start = c.off
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
	return search(t.read(p), key)
}

// search finds key among the pairs encoded in data without rebuilding
// their keys: with m the length of the prefix key shares with the key
// before, a key that shares more than m with its predecessor is still
// below key, one that shares fewer is past it, and only one that shares
// exactly m needs its rest compared.
func search(data []byte, key []byte) (item, bool) {
	m, off := 0, 0
	uvarint := func() int {
		v, n := binary.Uvarint(data[off:])
		off += n
		return int(v)
	}
	for off < len(data) {
		shared := uvarint()
		rlen := uvarint()
		rest := data[off : off+rlen]
		off += rlen
		vlen := uvarint()
		val := data[off : off+vlen : off+vlen]
		off += vlen
		rev := uvarint()
		switch {
		case shared > m:
			continue // same bytes as the last key up to past m: still below
		case shared < m:
			return item{}, false // a greater byte where the last key matched
		}
		// The key is key[:m] + rest: compare from m on.
		i := 0
		for i < len(rest) && m+i < len(key) && rest[i] == key[m+i] {
			i++
		}
		switch {
		case i == len(rest) && m+i == len(key):
			return item{k: key, v: val, rev: uint64(rev)}, true
		case i == len(rest) || (m+i < len(key) && rest[i] < key[m+i]):
			m += i // below key (a prefix of it, or a smaller byte)
		default:
			return item{}, false // past key
		}
	}
	return item{}, false
}

// Ascend calls fn for every pair in key order until fn returns false.
// The item's key is valid only until fn returns. It does not count as a
// use of the pages (a checkpoint reads every one).
func (t *tree) Ascend(fn func(item) bool) { t.ascend(nil, nil, false, fn) }

// AscendRange calls fn for the pairs from begin (nil: the first) up to but
// not including end (nil: to the last), in key order, until fn returns
// false. The item's key is valid only until fn returns.
func (t *tree) AscendRange(begin, end []byte, fn func(item) bool) { t.ascend(begin, end, true, fn) }

func (t *tree) ascend(begin, end []byte, use bool, fn func(item) bool) {
	start := t.pageFor(begin)
	if start == nil {
		return
	}
	var c cursor
	t.pages.AscendGreaterOrEqual(start, func(p *page) bool {
		if end != nil && bytes.Compare(p.first, end) >= 0 {
			return false
		}
		if use {
			c.reset(t.read(p))
		} else {
			c.reset(p.content())
		}
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
	data := p.content()
	c.reset(data)
	var keys []byte
	for c.next() {
		if cap(keys)-len(keys) < len(c.key) {
			keys = make([]byte, 0, max(2*len(data), len(c.key)))
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
	p := openPage(data, e.n)
	e.buf, e.n = e.buf[:0], 0
	return p
}

// openPage returns a page of n pairs encoded in data.
func openPage(data []byte, n int) *page {
	// The first pair shares nothing: its key follows two uvarints.
	var c cursor
	c.reset(data)
	c.uvarint()
	klen := c.uvarint()
	return &page{data: data, n: n, first: data[c.off : c.off+klen : c.off+klen]}
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
		// The writes up to the next page's first key fall into p. The
		// next page is looked up (a descent of the index) only when a
		// write follows, or when p is left small.
		var next *page
		found := p == nil
		findNext := func() {
			if !found {
				found = true
				t.pages.AscendGreaterOrEqual(p, func(q *page) bool {
					if q == p {
						return true
					}
					next = q
					return false
				})
			}
		}
		if i+1 < len(order) {
			findNext()
		}
		j := i + 1
		for j < len(order) && (next == nil || bytes.Compare(ws[order[j]].Key, next.first) < 0) {
			j++
		}
		if p != nil {
			// Most commits change a pair or two of a page and leave it
			// between pageMin and pageMax: then the page is copied with
			// the changes spliced in.
			var data []byte
			var n, added int
			var delta int64
			data, t.scratch, n, added, delta = splice(t.scratch, p.content(), p.n, ws, order[i:j], index)
			if len(data) <= pageMax && n > 0 && len(data) < pageMin {
				findNext()
			}
			if len(data) <= pageMax && n > 0 && (len(data) >= pageMin || next == nil) {
				inodes += delta
				t.n += added
				np := openPage(data, n)
				if !bytes.Equal(np.first, p.first) {
					t.remove(p)
				} // else np takes p's place in one step (add)
				t.add(np)
				i = j
				continue
			}
		}
		findNext()
		var old []pair
		if p != nil {
			old = p.pairs(make([]pair, 0, p.n+j-i))
		}
		merged, added, delta := merge(old, ws, order[i:j], index)
		inodes += delta
		t.n += added
		if p != nil {
			t.remove(p)
		}
		// A page left small takes in the next one, which no write of
		// this call may still need (they are sorted; the next group
		// looks its page up again).
		if next != nil && pairsSize(merged) < pageMin {
			merged = next.pairs(merged)
			t.remove(next)
		}
		if len(merged) > 0 {
			for _, np := range build(merged) {
				t.add(np)
			}
		}
		i = j
	}
	return inodes
}

// splice applies the writes ws[order[...]] (sorted by key, in commit
// order within a key) to the pairs encoded in data (pairs of them), and
// returns the new encoding (its own allocation), its pairs, how many it
// has more than data, and the change in node records. Pairs the writes
// leave alone are copied as they are encoded, a run of them at a time,
// except the first after a change, whose shared prefix is counted again;
// those after the last write are not even decoded.
//
// scratch is a buffer to encode into, returned grown for the next call.
func splice(scratch, data []byte, pairs int, ws []wire.Write, order []int, index uint64) (out, grown []byte, n, added int, inodes int64) {
	e := encoder{buf: scratch[:0], prev: make([]byte, 0, 64)}
	c := cursor{key: make([]byte, 0, 64)}
	c.reset(data)
	have := c.next()
	seen := 0 // pairs of data before c's
	// run: where the run of old pairs to copy as they are begins (-1:
	// none); the pair before c's is its last, and e.prev is not yet its
	// key.
	run := -1
	// verbatim: the pair emitted last is the old pair before c's (or
	// nothing was emitted and c is at the first), so c's encoding holds.
	verbatim := true
	flush := func() {
		if run >= 0 {
			e.buf = append(e.buf, data[run:c.start]...)
			run = -1
		}
	}
	emitOld := func() {
		if verbatim {
			if run < 0 {
				run = c.start
			}
			e.prev = append(e.prev[:0], c.key...)
			e.n++
		} else {
			e.add(c.key, c.val, c.rev)
			verbatim = true
		}
		seen++
		have = c.next()
		if !have {
			c.start = len(data)
		}
	}
	for k := 0; k < len(order); {
		key := ws[order[k]].Key
		for have && bytes.Compare(c.key, key) < 0 {
			emitOld()
		}
		flush()
		had := have && bytes.Equal(c.key, key)
		var val []byte
		if had {
			val = c.val
		}
		var exists bool
		var a int
		var d int64
		k, exists, val, a, d = settle(ws, order, k, had, val)
		added, inodes = added+a, inodes+d
		if had {
			seen++
			have = c.next() // past the old pair, written anew below or dropped
			if !have {
				c.start = len(data)
			}
		}
		if exists {
			e.add(key, val, index)
		}
		verbatim = false // the next old pair follows another key now
	}
	if have {
		emitOld() // encoded anew: it follows another key now
		flush()
		if have {
			// The rest as it is: its first pair follows the old pair
			// before it, as in data.
			e.buf = append(e.buf, data[c.start:]...)
			e.n += pairs - seen
		}
	}
	return bytes.Clone(e.buf), e.buf, e.n, added, inodes
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
		had := i < len(old) && bytes.Equal(old[i].k, key)
		var val []byte
		if had {
			val = old[i].v
			i++
		}
		var exists bool
		var a int
		var d int64
		k, exists, val, a, d = settle(ws, order, k, had, val)
		added, inodes = added+a, inodes+d
		if exists {
			out = append(out, pair{k: key, v: val, rev: index})
		}
	}
	return append(out, old[i:]...), added, inodes
}

// settle applies the writes to one key, ws[order[k]] and those after it
// with the same key, in order, to what the key held (had: a pair with
// value val). It returns where the next key's writes start, whether the
// key then has a pair and its value, and the change in pairs and in node
// records.
func settle(ws []wire.Write, order []int, k int, had bool, val []byte) (next int, exists bool, v []byte, added int, inodes int64) {
	key := ws[order[k]].Key
	exists, v = had, val
	for ; k < len(order) && bytes.Equal(ws[order[k]].Key, key); k++ {
		if w := ws[order[k]]; w.Delete {
			exists = false
		} else {
			exists, v = true, w.Value
		}
	}
	switch {
	case exists && !had:
		added = 1
	case !exists && had:
		added = -1
	}
	if kvstore.IsNodeKey(key) {
		inodes = int64(added)
	}
	return k, exists, v, added, inodes
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
	l.t.add(l.e.page())
}

// tree returns the tree built.
func (l *loader) tree() *tree {
	l.flush()
	return l.t
}

// compact looks at up to visit pages after the one starting at key after
// (nil: from the first) and compresses those that have not been used for
// idle ticks, at most limit of them. It returns the first key of the
// last page it looked at, to go on after next time (nil when it reached
// the end), how many pages it compressed and the bytes that saved.
func (t *tree) compact(after []byte, idle uint32, visit, limit int) (next []byte, n, saved int) {
	now := t.clock.now.Load()
	var todo []*page
	seen := 0
	next = nil
	visitor := func(p *page) bool {
		if after != nil && bytes.Equal(p.first, after) {
			return true
		}
		seen++
		next = p.first
		if p.data != nil && !p.dense.Load() && now-p.used.Load() >= idle {
			todo = append(todo, p)
		}
		return seen < visit && len(todo) < limit
	}
	if after == nil {
		t.pages.Ascend(visitor)
	} else {
		t.pages.AscendGreaterOrEqual(&page{first: after}, visitor)
	}
	if seen < visit && len(todo) < limit {
		next = nil // the end: start again from the first page
	}
	var scratch []byte
	for _, p := range todo {
		scratch = zstdEncoder().EncodeAll(p.data, scratch[:0])
		if len(scratch) > len(p.data)*3/4 {
			p.dense.Store(true)
			continue
		}
		// Of its own length: an allocation sized for the worst case
		// would keep twice the bytes.
		zp := &page{z: bytes.Clone(scratch), first: bytes.Clone(p.first), n: p.n}
		used := p.used.Load()
		t.add(zp)
		zp.used.Store(used)
		n++
		saved += len(p.data) - len(zp.z)
	}
	if next != nil {
		next = bytes.Clone(next)
	}
	return next, n, saved
}

// open puts p, a compressed page a reader met, back into t decompressed,
// if t still holds it, and reports whether it did.
func (t *tree) open(p *page) bool {
	if cur, ok := t.pages.Get(p); !ok || cur != p {
		return false
	}
	t.add(openPage(bytes.Clone(p.content()), p.n)) // exactly as long as the pairs
	return true
}
