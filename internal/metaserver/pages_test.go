package metaserver

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/wire"
)

// model is what a tree must hold: value and rev by key.
type model map[string]item

func (m model) clone() model {
	c := make(model, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func (m model) keys() []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// inodes counts the node records of m.
func (m model) inodes() int64 {
	n := int64(0)
	for k := range m {
		if kvstore.IsNodeKey([]byte(k)) {
			n++
		}
	}
	return n
}

// randomKey returns a key shaped as a volume's: 'A', an inode number, a
// kind and, for entries and chunks, a name or an index; a few are short
// keys of other shapes.
func randomKey(r *rand.Rand) []byte {
	ino := uint64(r.IntN(300))
	k := append([]byte{'A'}, binary.BigEndian.AppendUint64(nil, ino)...)
	switch r.IntN(5) {
	case 0, 1:
		return append(k, 'I')
	case 2:
		return append(append(k, 'D'), fmt.Sprintf("f%d", r.IntN(40))...)
	case 3:
		return append(append(k, 'C'), binary.BigEndian.AppendUint32(nil, uint32(r.IntN(3)))...)
	default:
		return []byte(fmt.Sprintf("K%d", r.IntN(50)))
	}
}

func randomValue(r *rand.Rand) []byte {
	n := r.IntN(120)
	if r.IntN(200) == 0 {
		n = 3*pageMax + r.IntN(100) // a value bigger than a page
	}
	v := make([]byte, n)
	random := r.IntN(2) == 0 // or a few distinct bytes, as records mostly are
	for i := range v {
		if random {
			v[i] = byte(r.IntN(256))
		} else {
			v[i] = byte(r.IntN(3))
		}
	}
	return v
}

// check compares t with m in every way a reader sees t, and checks the
// pages' own invariants.
func check(t *testing.T, tr *tree, m model, r *rand.Rand) {
	t.Helper()
	if tr.Len() != len(m) {
		t.Fatalf("Len %d, want %d", tr.Len(), len(m))
	}
	keys := m.keys()
	var got []string
	tr.Ascend(func(it item) bool {
		want, ok := m[string(it.key())]
		if !ok || !bytes.Equal(it.val(), want.v) || it.rev != want.rev {
			t.Fatalf("Ascend: %q=%x@%d, model has %v %x@%d", it.key(), it.val(), it.rev, ok, want.v, want.rev)
		}
		got = append(got, string(it.key()))
		return true
	})
	if !slices.Equal(got, keys) {
		t.Fatalf("Ascend gave %d keys, model has %d", len(got), len(keys))
	}
	for range 50 {
		k := randomKey(r)
		it, ok := tr.Get(k)
		want, wok := m[string(k)]
		if ok != wok || ok && (!bytes.Equal(it.val(), want.v) || it.rev != want.rev) {
			t.Fatalf("Get %q: %v %x@%d, want %v %x@%d", k, ok, it.val(), it.rev, wok, want.v, want.rev)
		}
	}
	for range 20 {
		a, b := randomKey(r), randomKey(r)
		if bytes.Compare(a, b) > 0 {
			a, b = b, a
		}
		var end []byte
		if r.IntN(4) > 0 {
			end = b
		}
		limit := 0
		if r.IntN(2) == 0 {
			limit = 1 + r.IntN(10)
		}
		var want []string
		for _, k := range keys {
			if k >= string(a) && (end == nil || k < string(end)) && (limit == 0 || len(want) < limit) {
				want = append(want, k)
			}
		}
		var have []string
		for _, it := range scan(tr, wire.Range{Begin: a, End: end}, limit) {
			have = append(have, string(it.key()))
		}
		if !slices.Equal(have, want) {
			t.Fatalf("scan [%q, %q) limit %d: %q, want %q", a, end, limit, have, want)
		}
	}
	bytes_, n, zpages, zbytes := 0, 0, 0, 0
	var prev []byte
	tr.pages.Ascend(func(p *page) bool {
		if p.n == 0 || len(p.content()) == 0 {
			t.Fatalf("empty page")
		}
		if (p.data == nil) == (p.z == nil) {
			t.Fatalf("page %q: data %d bytes, compressed %d", p.first, len(p.data), len(p.z))
		}
		if p.data == nil {
			zpages++
			zbytes += cap(p.z)
		}
		if slack := func(b []byte) bool { return cap(b) > len(b)*5/4+16 }; slack(p.data) || slack(p.z) {
			t.Fatalf("page %q holds %d+%d bytes in allocations of %d+%d: more than an allocation of their size",
				p.first, len(p.data), len(p.z), cap(p.data), cap(p.z))
		}
		if p.n > 1 && len(p.content()) > pageMax {
			t.Fatalf("page of %d pairs takes %d bytes", p.n, len(p.content()))
		}
		if prev != nil && bytes.Compare(prev, p.first) >= 0 {
			t.Fatalf("pages out of order")
		}
		prev = p.first
		bytes_ += p.held()
		n += p.n
		return true
	})
	if _, b := tr.Pages(); b != bytes_ || n != len(m) || zpages != tr.zpages || zbytes != tr.zbytes {
		t.Fatalf("pages hold %d pairs in %d bytes, %d compressed in %d; the tree counts %d in %d, %d in %d",
			n, bytes_, zpages, zbytes, len(m), b, tr.zpages, tr.zbytes)
	}
}

// TestPagesAgainstModel applies random commits to a tree and to a map,
// and compares them after each, along with snapshots (clones) taken on
// the way, which later commits must leave as they were.
func TestPagesAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tr, m := newTree(), model{}
	type snap struct {
		t *tree
		m model
	}
	var snaps []snap
	inodes := int64(0)
	var zat []byte
	compressed := 0
	for index := uint64(1); index <= 2000; index++ {
		n := 1 + r.IntN(8)
		if r.IntN(50) == 0 {
			n = 300 // a bulk commit, as a load makes
		}
		ws := make([]wire.Write, n)
		for i := range ws {
			k := randomKey(r)
			if i > 0 && r.IntN(4) == 0 {
				k = ws[r.IntN(i)].Key // several writes to one key, in order
			}
			if r.IntN(3) == 0 {
				ws[i] = wire.Write{Key: k, Delete: true}
				delete(m, string(k))
			} else {
				ws[i] = wire.Write{Key: k, Value: randomValue(r)}
				m[string(k)] = item{v: ws[i].Value, rev: index}
			}
		}
		inodes += applyWrites(tr, ws, index)
		if inodes != m.inodes() {
			t.Fatalf("commit %d: applyWrites counted %d inodes, the model has %d", index, inodes, m.inodes())
		}
		if tr.Len() != len(m) {
			t.Fatalf("commit %d: Len %d, want %d", index, tr.Len(), len(m))
		}
		if index%10 == 0 {
			check(t, tr, m, r)
			checkCounts(t, tr)
		}
		if r.IntN(100) == 0 {
			snaps = append(snaps, snap{tr.Clone(), m.clone()})
		}
		// The loop's other work: its clock, compressing idle pages in
		// steps, and opening those readers met compressed.
		if r.IntN(5) == 0 {
			tr.clock.now.Add(1)
		}
		if r.IntN(3) == 0 {
			zat, _, _ = tr.compact(zat, 2, 1+r.IntN(40), 1+r.IntN(8))
		}
		for len(tr.clock.opened) > 0 && r.IntN(2) == 0 {
			tr.open(<-tr.clock.opened)
		}
		compressed = max(compressed, tr.zpages)
	}
	if compressed == 0 {
		t.Fatal("no page was ever compressed")
	}
	for _, s := range snaps {
		check(t, s.t, s.m, r)
	}
	pages, size := tr.Pages()
	t.Logf("%d pairs in %d pages, %d bytes", tr.Len(), pages, size)
}

// checkCounts checks that each page of tr counts the pairs it holds.
func checkCounts(t *testing.T, tr *tree) {
	t.Helper()
	tr.pages.Ascend(func(p *page) bool {
		var c cursor
		c.reset(p.content())
		n := 0
		for c.next() {
			n++
		}
		if n != p.n {
			t.Fatalf("page starting %q holds %d pairs and counts %d", p.first, n, p.n)
		}
		return true
	})
}

// TestLoaderRefusesDisorder: a checkpoint's pairs come in key order; one
// that does not is refused rather than loaded wrong.
func TestLoaderRefusesDisorder(t *testing.T) {
	l := newLoader()
	for _, k := range []string{"a", "b", "c"} {
		if !l.add([]byte(k), []byte("v"), 0) {
			t.Fatalf("add %q refused", k)
		}
	}
	if l.add([]byte("b"), nil, 0) || l.add([]byte("c"), nil, 0) {
		t.Fatal("a key not after the last was accepted")
	}
	tr := l.tree()
	if tr.Len() != 3 {
		t.Fatalf("Len %d", tr.Len())
	}
	if it, ok := tr.Get([]byte("b")); !ok || string(it.val()) != "v" {
		t.Fatalf("Get b: %v %q", ok, it.val())
	}
}

// TestLoaderMatchesWrites: a tree loaded from pairs in order reads as the
// tree the same pairs were written into.
func TestLoaderMatchesWrites(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m := model{}
	var ws []wire.Write
	for range 5000 {
		k, v := randomKey(r), randomValue(r)
		ws = append(ws, wire.Write{Key: k, Value: v})
		m[string(k)] = item{v: v}
	}
	written := newTree()
	applyWrites(written, ws, 0)
	l := newLoader()
	for _, k := range m.keys() {
		l.add([]byte(k), m[k].v, 0)
	}
	loaded := l.tree()
	check(t, written, m, r)
	check(t, loaded, m, r)
}

// TestCompactAndOpen: idle pages are compressed, and only idle ones; a
// reader reads a compressed page as it was, and the loop opens it again.
func TestCompactAndOpen(t *testing.T) {
	tr := newTree()
	var ws []wire.Write
	for i := range 2000 {
		k := append([]byte{'A'}, binary.BigEndian.AppendUint64(nil, uint64(i))...)
		ws = append(ws, wire.Write{Key: append(k, 'I'), Value: bytes.Repeat([]byte{byte(i % 7)}, 73)})
	}
	applyWrites(tr, ws, 1)
	pages, size := tr.Pages()
	if _, n, _ := tr.compact(nil, 2, 1<<20, 1<<20); n != 0 {
		t.Fatalf("compressed %d pages used just now", n)
	}
	tr.clock.now.Add(1)
	key := ws[1000].Key
	tr.Get(key) // used at tick 1
	tr.clock.now.Add(1)
	at, n, saved := tr.compact(nil, 2, 1<<20, 1<<20)
	if at != nil || n != pages-1 || saved <= size/2 {
		t.Fatalf("compressed %d of %d pages, saving %d of %d bytes, stopped at %q", n, pages, saved, size, at)
	}
	snap := tr.Clone()
	for _, w := range ws {
		if it, ok := snap.Get(w.Key); !ok || !bytes.Equal(it.val(), w.Value) {
			t.Fatalf("Get %q from compressed pages: %v", w.Key, ok)
		}
	}
	opened := 0
	for len(tr.clock.opened) > 0 {
		if tr.open(<-tr.clock.opened) {
			opened++
		}
	}
	if opened == 0 || tr.zpages != pages-1-opened {
		t.Fatalf("opened %d pages, %d of %d still compressed", opened, tr.zpages, pages)
	}
}

// BenchmarkPageGet reads random node records of a tree of 100,000 small
// files' records.
//
//	go test -run XXX -bench PageGet ./internal/metaserver
func BenchmarkPageGet(b *testing.B) {
	tr := newTree()
	key := func(ino uint64, kind byte, rest ...byte) []byte {
		k := append([]byte{'A'}, binary.BigEndian.AppendUint64(nil, ino)...)
		return append(append(k, kind), rest...)
	}
	var ws []wire.Write
	for i := uint64(0); i < 100_000; i++ {
		ws = append(ws,
			wire.Write{Key: key(1000+i, 'I'), Value: make([]byte, 73)},
			wire.Write{Key: key(2+i/1000, 'D', []byte(fmt.Sprintf("file-%06d", i%1000))...), Value: make([]byte, 9)},
			wire.Write{Key: key(1000+i, 'C', 0, 0, 0, 0), Value: make([]byte, 24)})
	}
	applyWrites(tr, ws, 1)
	r := rand.New(rand.NewPCG(5, 6))
	b.ResetTimer()
	for range b.N {
		if _, ok := tr.Get(ws[3*r.IntN(100_000)].Key); !ok {
			b.Fatal("missing")
		}
	}
}

// BenchmarkSplice rewrites a full page of node records with one of them
// changed, as most commits do to each page they touch.
func BenchmarkSplice(b *testing.B) {
	var ws []wire.Write
	for i := range 200 {
		k := append([]byte{'A'}, binary.BigEndian.AppendUint64(nil, uint64(1000+i))...)
		ws = append(ws, wire.Write{Key: append(k, 'I'), Value: make([]byte, 73)})
	}
	tr := newTree()
	applyWrites(tr, ws, 1)
	p, _ := tr.pages.Min()
	one := []wire.Write{ws[p.n/2]}
	b.ReportMetric(float64(len(p.data)), "page-bytes")
	b.ResetTimer()
	var scratch []byte
	for range b.N {
		_, scratch, _, _, _ = splice(scratch, p.data, p.n, one, []int{0}, 2)
	}
}

// BenchmarkApplyCreate applies what a create commits (the new node, its
// entry, the directory's node) to a tree of 100,000 files' records, and
// clones the tree every 8 commits as the apply loop does for each batch
// it hands the syncer: the loop's work per create.
//
//	go test -run XXX -bench ApplyCreate -benchmem ./internal/metaserver
func BenchmarkApplyCreate(b *testing.B) {
	key := func(ino uint64, kind byte, rest ...byte) []byte {
		k := append([]byte{'A'}, binary.BigEndian.AppendUint64(nil, ino)...)
		return append(append(k, kind), rest...)
	}
	tr := newTree()
	var ws []wire.Write
	for i := uint64(0); i < 100_000; i++ {
		ws = append(ws,
			wire.Write{Key: key(1000+i, 'I'), Value: make([]byte, 73)},
			wire.Write{Key: key(2+i/1000, 'D', []byte(fmt.Sprintf("file-%06d", i%1000))...), Value: make([]byte, 9)})
	}
	applyWrites(tr, ws, 1)
	commits := make([][]wire.Write, b.N)
	for i := range commits {
		dir := uint64(500 + i%16)
		commits[i] = []wire.Write{
			{Key: key(200_000+uint64(i), 'I'), Value: make([]byte, 73)},
			{Key: key(dir, 'D', []byte(fmt.Sprintf("f%07d", i))...), Value: make([]byte, 9)},
			{Key: key(dir, 'I'), Value: make([]byte, 73)},
		}
	}
	b.ResetTimer()
	for i := range b.N {
		applyWrites(tr, commits[i], uint64(2+i))
		if i%8 == 7 {
			tr.Clone()
		}
	}
}
