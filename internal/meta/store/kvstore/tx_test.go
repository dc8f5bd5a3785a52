package kvstore

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/sluicefs/sluice/internal/meta/store"
)

func TestNodeRoundTrip(t *testing.T) {
	nodes := []*store.Node{
		{Ino: 1, Type: store.TypeDir, Mode: 0o777, Nlink: 2, Length: 4096, Parent: 1},
		{Ino: math.MaxUint64, Type: store.TypeSocket, Flags: 3, Mode: 0o7777, Uid: math.MaxUint32, Gid: 7,
			Atime: -1, Mtime: math.MinInt64, Ctime: math.MaxInt64, Atimensec: 999999999, Mtimensec: 1, Ctimensec: 2,
			Nlink: math.MaxUint32, Length: math.MaxUint64, Rdev: 8<<8 | 1, Parent: math.MaxUint64 - 1},
	}
	for _, n := range nodes {
		b := encodeNode(n)
		if len(b) != nodeSize {
			t.Fatalf("encoded node is %d bytes, want %d", len(b), nodeSize)
		}
		got, err := decodeNode(n.Ino, b)
		if err != nil {
			t.Fatal(err)
		}
		if *got != *n {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, n)
		}
		if _, err := decodeNode(n.Ino, b[:len(b)-1]); err == nil {
			t.Fatalf("short record decoded")
		}
		bad := bytes.Clone(b)
		bad[0] = 2
		if _, err := decodeNode(n.Ino, bad); err == nil {
			t.Fatalf("record of an unknown version decoded")
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	cases := []struct{ in, want []byte }{
		{[]byte("a"), []byte("b")},
		{[]byte("a\xff"), []byte("b")},
		{[]byte("a\xfe\xff\xff"), []byte("a\xff")},
		{[]byte("\xff\xff"), nil},
		{nil, nil},
	}
	for _, c := range cases {
		if got := prefixEnd(c.in); !bytes.Equal(got, c.want) || (c.want == nil) != (got == nil) {
			t.Errorf("prefixEnd(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestKeyOrder checks that keys sort as the scans assume: inodes and chunk
// indexes numerically, entries by name bytes, and each inode's records
// inside its own prefix.
func TestKeyOrder(t *testing.T) {
	inos := []store.Ino{1, 2, 255, 256, 1 << 32, math.MaxUint64}
	for i := 1; i < len(inos); i++ {
		if bytes.Compare(inoKey(inos[i-1], 'I', nil), inoKey(inos[i], 'I', nil)) >= 0 {
			t.Errorf("node key of %d does not sort before %d", inos[i-1], inos[i])
		}
	}
	idxs := []uint32{0, 1, 255, 256, math.MaxUint32}
	for i := 1; i < len(idxs); i++ {
		if bytes.Compare(chunkKey(7, idxs[i-1]), chunkKey(7, idxs[i])) >= 0 {
			t.Errorf("chunk key %d does not sort before %d", idxs[i-1], idxs[i])
		}
	}
	for _, ino := range inos {
		prefix := inoKey(ino, 'D', nil)
		end := prefixEnd(prefix)
		for _, name := range [][]byte{{0}, []byte("a"), bytes.Repeat([]byte{0xff}, 255)} {
			k := inoKey(ino, 'D', name)
			if bytes.Compare(k, prefix) < 0 || (end != nil && bytes.Compare(k, end) >= 0) {
				t.Errorf("entry %q of %d falls outside its prefix", name, ino)
			}
		}
		for _, other := range []byte{'I', 'S', 'X', 'C'} {
			k := inoKey(ino, other, []byte("a"))
			if bytes.Compare(k, prefix) >= 0 && (end == nil || bytes.Compare(k, end) < 0) {
				t.Errorf("%c record of %d falls inside the entry prefix", other, ino)
			}
		}
	}
}

// mapTxn is a Txn over a plain map, enough to drive tx in unit tests.
type mapTxn map[string][]byte

func (m mapTxn) Get(k []byte) ([]byte, error) { return bytes.Clone(m[string(k)]), nil }
func (m mapTxn) GetMany(ks [][]byte) ([][]byte, error) {
	out := make([][]byte, len(ks))
	for i, k := range ks {
		out[i], _ = m.Get(k)
	}
	return out, nil
}
func (m mapTxn) Scan(begin, end []byte, limit int) ([]Pair, error) {
	var keys []string
	for k := range m {
		if k >= string(begin) && (end == nil || k < string(end)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	out := make([]Pair, len(keys))
	for i, k := range keys {
		out[i] = Pair{Key: []byte(k), Value: bytes.Clone(m[k])}
	}
	return out, nil
}
func (m mapTxn) Set(k, v []byte) {
	if v == nil {
		v = []byte{}
	}
	m[string(k)] = bytes.Clone(v)
}
func (m mapTxn) Delete(k []byte) { delete(m, string(k)) }

func TestRecords(t *testing.T) {
	x := &tx{t: mapTxn{}}
	// Entries, including names that need the 0-byte successor of after.
	names := [][]byte{[]byte("a"), []byte("a\x00"), []byte("a\x00b"), []byte("b"), {0xff}}
	for i, name := range names {
		x.SetEdge(5, store.Edge{Name: name, Ino: store.Ino(100 + i), Type: store.TypeFile})
	}
	x.SetEdge(6, store.Edge{Name: []byte("other"), Ino: 9, Type: store.TypeDir})
	var got [][]byte
	var after []byte
	for {
		es, err := x.Edges(5, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			got = append(got, e.Name)
		}
		if len(es) < 2 {
			break
		}
		after = es[len(es)-1].Name
	}
	if !reflect.DeepEqual(got, names) {
		t.Fatalf("paged entries %q, want %q", got, names)
	}
	if e, err := x.Edge(5, []byte("a\x00")); err != nil || e.Ino != 101 || e.Type != store.TypeFile {
		t.Fatalf("edge: %+v, %v", e, err)
	}
	x.DeleteEdge(5, []byte("a\x00"))
	if _, err := x.Edge(5, []byte("a\x00")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted edge: %v", err)
	}

	// Nodes in a batch, one missing.
	x.SetNode(&store.Node{Ino: 3, Type: store.TypeFile, Nlink: 1})
	ns, err := x.Nodes([]store.Ino{3, 4})
	if err != nil || ns[0] == nil || ns[0].Ino != 3 || ns[1] != nil {
		t.Fatalf("nodes: %+v, %v", ns, err)
	}

	// Chunks.
	x.AppendSlice(3, 2, store.Slice{Id: 1, Len: 1})
	x.AppendSlice(3, 2, store.Slice{Id: 2, Len: 2})
	x.SetChunk(3, 7, []store.Slice{{Id: 3}})
	if idxs, err := x.ChunkIndexes(3, 0, 0); err != nil || !slices.Equal(idxs, []uint32{2, 7}) {
		t.Fatalf("chunk indexes: %v, %v", idxs, err)
	}
	if idxs, _ := x.ChunkIndexes(3, 3, 0); !slices.Equal(idxs, []uint32{7}) {
		t.Fatalf("chunk indexes from 3: %v", idxs)
	}
	if ss, _ := x.Chunk(3, 2); len(ss) != 2 || ss[1].Id != 2 {
		t.Fatalf("chunk 2: %+v", ss)
	}
	x.SetChunk(3, 7, nil)
	if ss, err := x.Chunk(3, 7); err != nil || len(ss) != 0 {
		t.Fatalf("emptied chunk: %+v, %v", ss, err)
	}

	// Xattrs, symlinks, counters, slice references.
	x.SetXattr(3, "user.b", []byte("2"))
	x.SetXattr(3, "user.a", nil)
	x.SetXattr(4, "user.c", []byte("3"))
	if names, _ := x.XattrNames(3); !slices.Equal(names, []string{"user.a", "user.b"}) {
		t.Fatalf("xattr names: %q", names)
	}
	if v, err := x.Xattr(3, "user.a"); err != nil || len(v) != 0 {
		t.Fatalf("empty xattr: %q, %v", v, err)
	}
	x.SetSymlink(3, []byte("t"))
	if v, err := x.Symlink(3); err != nil || string(v) != "t" {
		t.Fatalf("symlink: %q, %v", v, err)
	}
	if v, err := x.Counter("n"); err != nil || v != 0 {
		t.Fatalf("unset counter: %d, %v", v, err)
	}
	x.SetCounter("n", -5)
	if v, _ := x.Counter("n"); v != -5 {
		t.Fatalf("counter: %d", v)
	}
	x.SetSliceRef(9, 4096, 2)
	if v, _ := x.SliceRef(9, 4096); v != 2 {
		t.Fatalf("slice ref: %d", v)
	}
	x.SetSliceRef(9, 4096, 0)
	if v, _ := x.SliceRef(9, 4096); v != 0 {
		t.Fatalf("cleared slice ref: %d", v)
	}

	// Sessions, sustained inodes and deletion queues.
	x.SetSession(store.Session{Sid: 1, Heartbeat: 10, Info: []byte(`{"a":1}`)})
	x.SetSession(store.Session{Sid: 2, Heartbeat: 20})
	x.SetSustained(1, 30, true)
	x.SetSustained(1, 31, true)
	x.SetSustained(2, 32, true)
	x.SetSustained(1, 31, false)
	if ss, err := x.Sessions(); err != nil || len(ss) != 2 || ss[1].Heartbeat != 20 {
		t.Fatalf("sessions: %+v, %v", ss, err)
	}
	if inos, err := x.Sustained(1); err != nil || !slices.Equal(inos, []store.Ino{30}) {
		t.Fatalf("sustained of session 1: %v, %v", inos, err)
	}
	x.DeleteSession(1)
	if ss, _ := x.Sessions(); len(ss) != 1 || ss[0].Sid != 2 {
		t.Fatalf("sessions after delete: %+v", ss)
	}
	x.SetDelFile(store.DelFile{Ino: 40, Length: 1 << 40, Expire: 99}, true)
	if fs, err := x.DelFiles(10); err != nil || len(fs) != 1 || fs[0] != (store.DelFile{Ino: 40, Length: 1 << 40, Expire: 99}) {
		t.Fatalf("deleted files: %+v, %v", fs, err)
	}
	x.SetDelSlice(50, 4096, true)
	x.SetDelSlice(51, 1, true)
	if ss, err := x.DelSlices(1); err != nil || len(ss) != 1 || ss[0].Id != 50 || ss[0].Size != 4096 {
		t.Fatalf("deleted slices: %+v, %v", ss, err)
	}
	if x.err != nil {
		t.Fatalf("write error: %v", x.err)
	}
}

// followTxn is a mapTxn that reads followed keys itself (Follower) and
// counts its calls.
type followTxn struct {
	mapTxn
	calls int
}

func (f *followTxn) GetFollow(keys [][]byte, follow []bool, rule FollowRule) (vals, next [][]byte, err error) {
	f.calls++
	vals, _ = f.GetMany(keys)
	next = make([][]byte, len(keys))
	for i, v := range vals {
		if k := rule.Next(v); follow[i] && k != nil {
			next[i], _ = f.Get(k)
		}
	}
	return vals, next, nil
}

// TestLookup checks Lookup with and without a Follower: the directory,
// the entry and its node, with each of them missing in turn.
func TestLookup(t *testing.T) {
	for _, follower := range []bool{false, true} {
		m := mapTxn{}
		var txn Txn = m
		f := &followTxn{mapTxn: m}
		if follower {
			txn = f
		}
		x := &tx{t: txn}
		x.SetNode(&store.Node{Ino: 5, Type: store.TypeDir, Nlink: 2})
		x.SetNode(&store.Node{Ino: 7, Type: store.TypeFile, Nlink: 1, Length: 3})
		x.SetEdge(5, store.Edge{Name: []byte("f"), Ino: 7, Type: store.TypeFile})
		x.SetEdge(5, store.Edge{Name: []byte("gone"), Ino: 8, Type: store.TypeFile})
		cases := []struct {
			parent  store.Ino
			name    string
			err     error
			entry   store.Ino
			node    bool
			wantLen uint64
		}{
			{parent: 5, name: "f", entry: 7, node: true, wantLen: 3},
			{parent: 5, name: "missing"},
			{parent: 5, name: "gone", entry: 8},
			{parent: 6, name: "f", err: store.ErrNotFound},
		}
		for _, c := range cases {
			dir, e, n, err := x.Lookup(c.parent, []byte(c.name))
			if !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
				t.Fatalf("follower %v: lookup %d/%s: %v, want %v", follower, c.parent, c.name, err, c.err)
			}
			if err != nil {
				continue
			}
			if dir == nil || dir.Ino != 5 || e.Ino != c.entry || (n != nil) != c.node {
				t.Fatalf("follower %v: lookup %d/%s = %+v, %+v, %+v", follower, c.parent, c.name, dir, e, n)
			}
			if n != nil && (n.Ino != 7 || n.Length != c.wantLen) {
				t.Fatalf("follower %v: node %+v", follower, n)
			}
		}
		if follower && f.calls != len(cases) {
			t.Fatalf("%d reads for %d lookups, want one each", f.calls, len(cases))
		}
	}
}
