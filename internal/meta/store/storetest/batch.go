package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Batched reads (store.BatchReader and the store.Read* helpers) and bulk
// writes (store.BulkWriter and store.WriteBulk). Every engine runs these,
// whether it implements the optional interfaces or relies on the
// per-record fallbacks: both must give the same answers.

// model is what the records of a store should be after some Bulks, keyed
// like the store's, to check reads against.
type model struct {
	nodes    map[store.Ino]store.Node
	edges    map[store.Ino]map[string]store.Edge // parent → name → entry
	chunks   map[store.ChunkKey][]store.Slice
	symlinks map[store.Ino][]byte
	xattrs   map[store.Ino]map[string][]byte
	refs     map[[2]uint64]int64 // id, size → extra
}

func newModel() *model {
	return &model{nodes: map[store.Ino]store.Node{}, edges: map[store.Ino]map[string]store.Edge{},
		chunks: map[store.ChunkKey][]store.Slice{}, symlinks: map[store.Ino][]byte{},
		xattrs: map[store.Ino]map[string][]byte{}, refs: map[[2]uint64]int64{}}
}

// apply records b as stored: in order, a later record replacing an earlier
// one with the same key, an empty slice list or a zero reference count
// deleting the record (as SetChunk and SetSliceRef do).
func (m *model) apply(b *store.Bulk) {
	for _, n := range b.Nodes {
		m.nodes[n.Ino] = *n
	}
	for _, e := range b.Edges {
		if m.edges[e.Parent] == nil {
			m.edges[e.Parent] = map[string]store.Edge{}
		}
		m.edges[e.Parent][string(e.Name)] = e.Edge
	}
	for _, c := range b.Chunks {
		if len(c.Slices) == 0 {
			delete(m.chunks, c.ChunkKey)
		} else {
			m.chunks[c.ChunkKey] = c.Slices
		}
	}
	for _, s := range b.Symlinks {
		m.symlinks[s.Ino] = s.Target
	}
	for _, x := range b.Xattrs {
		if m.xattrs[x.Ino] == nil {
			m.xattrs[x.Ino] = map[string][]byte{}
		}
		m.xattrs[x.Ino][x.Name] = x.Value
	}
	for _, r := range b.SliceRefs {
		k := [2]uint64{r.Id, uint64(r.Size)}
		if r.Extra == 0 {
			delete(m.refs, k)
		} else {
			m.refs[k] = r.Extra
		}
	}
}

// inos returns every inode with a node, chunk, symlink or xattrs, sorted.
func (m *model) inos() []store.Ino {
	set := map[store.Ino]bool{}
	for ino := range m.nodes {
		set[ino] = true
	}
	for k := range m.chunks {
		set[k.Ino] = true
	}
	for ino := range m.symlinks {
		set[ino] = true
	}
	for ino := range m.xattrs {
		set[ino] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// chunkKeys returns the key of every chunk, sorted.
func (m *model) chunkKeys() []store.ChunkKey {
	return slices.SortedFunc(maps.Keys(m.chunks), func(a, b store.ChunkKey) int {
		if a.Ino != b.Ino {
			return cmpU(uint64(a.Ino), uint64(b.Ino))
		}
		return cmpU(uint64(a.Idx), uint64(b.Idx))
	})
}

// xattrList returns the xattrs of ino sorted by name, nil when none.
func (m *model) xattrList(ino store.Ino) []store.Xattr {
	var out []store.Xattr
	for _, name := range slices.Sorted(maps.Keys(m.xattrs[ino])) {
		out = append(out, store.Xattr{Name: name, Value: m.xattrs[ino][name]})
	}
	return out
}

// bulkVolume returns the records of n inodes from first on, of every kind
// and shape a batch must handle: a directory holding the others' entries;
// files with no chunk, one, several and one of many slices; symlinks,
// short and longer than some engines compare inline; inodes with no
// xattrs and with several, names out of byte order among them, one value
// empty; and shared slices.
func bulkVolume(first store.Ino, n int) *store.Bulk {
	b := &store.Bulk{}
	dir := first
	names := []string{"user.b", "user.a", "security.selinux", "user.\u00e9", "trusted.Z", "user.A"}
	for i := range n {
		ino := first + store.Ino(i)
		node := &store.Node{Ino: ino, Type: store.TypeFile, Mode: 0o644, Nlink: 1, Parent: dir,
			Uid: uint32(i), Mtime: int64(i) * 1000, Mtimensec: uint32(i)}
		switch {
		case i == 0:
			// Its parent is first-1, so that volumes from different first
			// inodes share no directory.
			node.Type, node.Mode, node.Nlink, node.Parent = store.TypeDir, 0o755, 2, first-1
			b.Edges = append(b.Edges, store.BulkEdge{Parent: first - 1,
				Edge: store.Edge{Name: []byte(fmt.Sprintf("dir%d", ino)), Ino: ino, Type: store.TypeDir}})
		case i%4 == 1:
			node.Type, node.Mode = store.TypeSymlink, 0o777
			target := fmt.Sprintf("../target/%d", i)
			if i%8 == 1 {
				target = strings.Repeat("long/", 40) + target
			}
			b.Symlinks = append(b.Symlinks, store.BulkSymlink{Ino: ino, Target: []byte(target)})
		default:
			for idx := range uint32(i % 3) {
				var ss []store.Slice
				for s := range uint32(1 + (i+int(idx))%3) {
					ss = append(ss, store.Slice{Pos: s * 4096, Id: uint64(ino)<<8 | uint64(idx)<<4 | uint64(s),
						Size: 4096, Off: s, Len: 4096 - s})
				}
				b.Chunks = append(b.Chunks, store.BulkChunk{ChunkKey: store.ChunkKey{Ino: ino, Idx: idx * 7}, Slices: ss})
			}
			if i == 2 {
				var ss []store.Slice
				for s := range uint32(600) {
					ss = append(ss, store.Slice{Pos: s, Id: uint64(s) + 1, Size: 1 << 20, Len: 1})
				}
				b.Chunks = append(b.Chunks, store.BulkChunk{ChunkKey: store.ChunkKey{Ino: ino, Idx: 1000}, Slices: ss})
			}
			node.Length = uint64(i) * 100
		}
		if i > 0 {
			typ := node.Type
			b.Edges = append(b.Edges, store.BulkEdge{Parent: dir,
				Edge: store.Edge{Name: []byte(fmt.Sprintf("e%05d", i)), Ino: ino, Type: typ}})
		}
		b.Nodes = append(b.Nodes, node)
		if i%5 != 0 {
			for j := range 1 + i%len(names) {
				v := []byte(fmt.Sprintf("value %d of %d", j, ino))
				if j == 2 {
					v = []byte{}
				}
				b.Xattrs = append(b.Xattrs, store.BulkXattr{Ino: ino, Xattr: store.Xattr{Name: names[j], Value: v}})
			}
		}
		if i%6 == 3 {
			b.SliceRefs = append(b.SliceRefs, store.SliceRefRecord{Id: uint64(ino) << 8, Size: 4096, Extra: int64(i)})
		}
	}
	return b
}

// writeBulk stores b through store.WriteBulk, failing t on error.
func writeBulk(t *testing.T, st store.Store, b *store.Bulk) {
	t.Helper()
	if err := store.WriteBulk(ctx, st, b); err != nil {
		t.Fatalf("WriteBulk of %d records: %v", b.Len(), err)
	}
}

// checkStored fails t unless the records of the inodes m knows, read one
// by one, are m's: each node, entry (and no other entry in the
// directories m knows), chunk (and no other chunk of the inodes), symlink,
// xattr (and no other name) and slice reference.
func checkStored(t *testing.T, st store.Store, m *model) {
	t.Helper()
	// Many short Views: engines with a snapshot need not hold one long.
	inos := m.inos()
	for start := 0; start < len(inos); start += 50 {
		part := inos[start:min(start+50, len(inos))]
		view(t, st, func(tx store.Tx) error {
			for _, ino := range part {
				if err := checkInode(tx, m, ino); err != nil {
					return err
				}
			}
			return nil
		})
	}
	view(t, st, func(tx store.Tx) error {
		for parent, want := range m.edges {
			es, err := tx.Edges(parent, nil, 0)
			if err != nil {
				return fmt.Errorf("Edges(%d): %w", parent, err)
			}
			if len(es) != len(want) {
				return fmt.Errorf("Edges(%d): %d entries, want %d", parent, len(es), len(want))
			}
			for _, e := range es {
				w, ok := want[string(e.Name)]
				if !ok || w.Ino != e.Ino || w.Type != e.Type {
					return fmt.Errorf("entry %q of %d = %+v, want %+v", e.Name, parent, e, w)
				}
				got, err := tx.Edge(parent, e.Name)
				if err != nil || got.Ino != w.Ino || got.Type != w.Type {
					return fmt.Errorf("Edge(%d, %q) = %+v, %v; want %+v", parent, e.Name, got, err, w)
				}
			}
		}
		for k, want := range m.refs {
			got, err := tx.SliceRef(k[0], uint32(k[1]))
			if err != nil || got != want {
				return fmt.Errorf("SliceRef(%d, %d) = %d, %v; want %d", k[0], k[1], got, err, want)
			}
		}
		return nil
	})
}

// checkInode compares the node, chunks, symlink and xattrs of ino, read
// one by one in tx, with m's.
func checkInode(tx store.Tx, m *model, ino store.Ino) error {
	n, err := tx.Node(ino)
	if want, ok := m.nodes[ino]; ok {
		if err != nil || *n != want {
			return fmt.Errorf("Node(%d) = %+v, %v; want %+v", ino, n, err, want)
		}
	} else if err := wantNotFound(fmt.Sprintf("Node(%d)", ino), err); err != nil {
		return err
	}
	idxs, err := tx.ChunkIndexes(ino, 0, 0)
	if err != nil {
		return fmt.Errorf("ChunkIndexes(%d): %w", ino, err)
	}
	var wantIdxs []uint32
	for k := range m.chunks {
		if k.Ino == ino {
			wantIdxs = append(wantIdxs, k.Idx)
		}
	}
	slices.Sort(wantIdxs)
	if !slices.Equal(idxs, wantIdxs) {
		return fmt.Errorf("ChunkIndexes(%d) = %v, want %v", ino, idxs, wantIdxs)
	}
	for _, idx := range idxs {
		ss, err := tx.Chunk(ino, idx)
		if want := m.chunks[store.ChunkKey{Ino: ino, Idx: idx}]; err != nil || !slices.Equal(ss, want) {
			return fmt.Errorf("Chunk(%d, %d) = %d slices, %v; want %d", ino, idx, len(ss), err, len(want))
		}
	}
	target, err := tx.Symlink(ino)
	if want, ok := m.symlinks[ino]; ok {
		if err != nil || !bytes.Equal(target, want) {
			return fmt.Errorf("Symlink(%d) = %q, %v; want %q", ino, target, err, want)
		}
	} else if err := wantNotFound(fmt.Sprintf("Symlink(%d)", ino), err); err != nil {
		return err
	}
	names, err := tx.XattrNames(ino)
	if err != nil {
		return fmt.Errorf("XattrNames(%d): %w", ino, err)
	}
	slices.Sort(names)
	if want := slices.Sorted(maps.Keys(m.xattrs[ino])); !slices.Equal(names, want) {
		return fmt.Errorf("XattrNames(%d) = %q, want %q", ino, names, want)
	}
	for _, name := range names {
		v, err := tx.Xattr(ino, name)
		if want := m.xattrs[ino][name]; err != nil || !bytes.Equal(v, want) {
			return fmt.Errorf("Xattr(%d, %q) = %q, %v; want %q", ino, name, v, err, want)
		}
	}
	return nil
}

// perRecord hides the optional interfaces of a Tx, so that the store.Read*
// helpers take their per-record fallbacks.
type perRecord struct{ store.Tx }

// batchRead is one way to read a batch: the Tx's BatchReader, or a
// helper (batched or per record).
type batchRead struct {
	name     string
	chunks   func(tx store.Tx, keys []store.ChunkKey) ([][]store.Slice, error)
	symlinks func(tx store.Tx, inos []store.Ino) ([][]byte, error)
	xattrs   func(tx store.Tx, inos []store.Ino) ([][]store.Xattr, error)
}

var batchReads = []batchRead{
	{"BatchReader",
		func(tx store.Tx, keys []store.ChunkKey) ([][]store.Slice, error) {
			return tx.(store.BatchReader).Chunks(keys)
		},
		func(tx store.Tx, inos []store.Ino) ([][]byte, error) { return tx.(store.BatchReader).Symlinks(inos) },
		func(tx store.Tx, inos []store.Ino) ([][]store.Xattr, error) {
			return tx.(store.BatchReader).Xattrs(inos)
		}},
	{"helpers", store.ReadChunks, store.ReadSymlinks, store.ReadXattrs},
	{"fallback",
		func(tx store.Tx, keys []store.ChunkKey) ([][]store.Slice, error) {
			return store.ReadChunks(perRecord{tx}, keys)
		},
		func(tx store.Tx, inos []store.Ino) ([][]byte, error) { return store.ReadSymlinks(perRecord{tx}, inos) },
		func(tx store.Tx, inos []store.Ino) ([][]store.Xattr, error) {
			return store.ReadXattrs(perRecord{tx}, inos)
		}},
}

// checkBatch fails unless reading keys and inos the way r does returns
// what m holds: one element per key, in order, nil where there is no
// record.
func checkBatch(tx store.Tx, r batchRead, m *model, keys []store.ChunkKey, inos []store.Ino) error {
	chunks, err := r.chunks(tx, keys)
	if err != nil {
		return fmt.Errorf("chunks: %w", err)
	}
	if len(chunks) != len(keys) {
		return fmt.Errorf("chunks: %d results for %d keys", len(chunks), len(keys))
	}
	for i, k := range keys {
		if want := m.chunks[k]; !slices.Equal(chunks[i], want) {
			return fmt.Errorf("chunks[%d] (%d of %d) = %d slices, want %d", i, k.Idx, k.Ino, len(chunks[i]), len(want))
		}
	}
	targets, err := r.symlinks(tx, inos)
	if err != nil {
		return fmt.Errorf("symlinks: %w", err)
	}
	if len(targets) != len(inos) {
		return fmt.Errorf("symlinks: %d results for %d inodes", len(targets), len(inos))
	}
	for i, ino := range inos {
		want, ok := m.symlinks[ino]
		if (targets[i] != nil) != ok || !bytes.Equal(targets[i], want) {
			return fmt.Errorf("symlinks[%d] (%d) = %q (nil: %v), want %q (exists: %v)", i, ino, targets[i], targets[i] == nil, want, ok)
		}
	}
	xattrs, err := r.xattrs(tx, inos)
	if err != nil {
		return fmt.Errorf("xattrs: %w", err)
	}
	if len(xattrs) != len(inos) {
		return fmt.Errorf("xattrs: %d results for %d inodes", len(xattrs), len(inos))
	}
	for i, ino := range inos {
		want := m.xattrList(ino)
		if !slices.EqualFunc(xattrs[i], want, func(a, b store.Xattr) bool {
			return a.Name == b.Name && bytes.Equal(a.Value, b.Value)
		}) {
			return fmt.Errorf("xattrs[%d] (%d) = %q, want %q", i, ino, xattrs[i], want)
		}
	}
	return nil
}

// errRollback ends an Update whose writes must not be kept.
var errRollback = errors.New("rolled back on purpose")

// batchCases returns the requests the batched reads are checked with,
// over a volume of the inodes from first on as m holds them.
func batchCases(m *model, first store.Ino) []struct {
	name string
	keys []store.ChunkKey
	inos []store.Ino
} {
	all, keys := m.inos(), m.chunkKeys()
	slices.Reverse(all)
	missing := first + 1<<20
	return []struct {
		name string
		keys []store.ChunkKey
		inos []store.Ino
	}{
		{"empty", nil, nil},
		{"one", []store.ChunkKey{keys[0]}, []store.Ino{first + 1}},
		{"missing and duplicates", []store.ChunkKey{
			{Ino: first + 2, Idx: 1000}, {Ino: missing}, keys[1], {Ino: first + 2, Idx: 1}, keys[1], {Ino: first + 2, Idx: 1000},
		}, []store.Ino{missing, first + 1, first + 5, first + 1, first + 4, first + 3, first + 5, missing}},
		{"all", append(keys, store.ChunkKey{Ino: missing, Idx: 3}), append(all, missing)},
	}
}

func testBatchReads(t *testing.T, st store.Store, _ Options) {
	const first = 5000
	m := newModel()
	b := bulkVolume(first, 700) // more than any engine's IN list or ops per request
	writeBulk(t, st, b)
	m.apply(b)
	var isBatch bool
	view(t, st, func(tx store.Tx) error { _, isBatch = tx.(store.BatchReader); return nil })
	if !isBatch {
		t.Logf("%s: no store.BatchReader; checking the per-record fallbacks", st.Name())
	}
	for _, c := range batchCases(m, first) {
		for _, r := range batchReads {
			if r.name == "BatchReader" && !isBatch {
				continue
			}
			t.Run(c.name+"/"+r.name, func(t *testing.T) {
				view(t, st, func(tx store.Tx) error { return checkBatch(tx, r, m, c.keys, c.inos) })
				// In Update too, where reads may lock or be checked at
				// commit; rolled back, so that no engine bound is met.
				err := st.Update(ctx, func(tx store.Tx) error {
					if err := checkBatch(tx, r, m, c.keys, c.inos); err != nil {
						return err
					}
					return errRollback
				})
				if !errors.Is(err, errRollback) {
					t.Fatalf("update: %v", err)
				}
			})
		}
	}
	t.Run("ReadYourWrites", func(t *testing.T) {
		// Batched reads in an Update see its own writes.
		for _, r := range batchReads {
			if r.name == "BatchReader" && !isBatch {
				continue
			}
			err := st.Update(ctx, func(tx store.Tx) error {
				mine := newModel()
				mine.apply(b)
				tx.SetXattr(first+1, "user.new", []byte("new"))
				tx.DeleteXattr(first+2, "user.b")
				tx.SetXattr(first+3, "user.a", []byte("changed"))
				tx.SetXattr(first+5, "user.first", []byte("x"))
				tx.SetChunk(first+4, 9, []store.Slice{{Id: 77, Size: 10, Len: 10}})
				tx.SetChunk(first+2, 0, nil)
				tx.AppendSlice(first+2, 7, store.Slice{Pos: 9, Id: 78, Size: 5, Len: 5})
				tx.SetSymlink(first+4, []byte("now a link"))
				tx.DeleteSymlink(first + 1)
				mine.apply(&store.Bulk{
					Xattrs: []store.BulkXattr{{Ino: first + 1, Xattr: store.Xattr{Name: "user.new", Value: []byte("new")}},
						{Ino: first + 3, Xattr: store.Xattr{Name: "user.a", Value: []byte("changed")}},
						{Ino: first + 5, Xattr: store.Xattr{Name: "user.first", Value: []byte("x")}}},
					Chunks: []store.BulkChunk{{ChunkKey: store.ChunkKey{Ino: first + 4, Idx: 9}, Slices: []store.Slice{{Id: 77, Size: 10, Len: 10}}},
						{ChunkKey: store.ChunkKey{Ino: first + 2}}},
					Symlinks: []store.BulkSymlink{{Ino: first + 4, Target: []byte("now a link")}},
				})
				delete(mine.xattrs[first+2], "user.b")
				delete(mine.symlinks, first+1)
				k := store.ChunkKey{Ino: first + 2, Idx: 7}
				mine.chunks[k] = append(slices.Clone(mine.chunks[k]), store.Slice{Pos: 9, Id: 78, Size: 5, Len: 5})
				keys := []store.ChunkKey{{Ino: first + 4, Idx: 9}, {Ino: first + 2}, k, {Ino: first + 2, Idx: 1000}}
				inos := []store.Ino{first + 1, first + 2, first + 3, first + 4, first + 5, first + 6}
				if err := checkBatch(tx, r, mine, keys, inos); err != nil {
					return fmt.Errorf("%s: %w", r.name, err)
				}
				return errRollback
			})
			if !errors.Is(err, errRollback) {
				t.Fatalf("update: %v", err)
			}
		}
		checkStored(t, st, m) // nothing of the rolled back Updates stayed
	})
}

func testBulkWrites(t *testing.T, st store.Store, _ Options) {
	const first = 10000
	_, isBulk := st.(store.BulkWriter)
	if !isBulk {
		t.Logf("%s: no store.BulkWriter; checking store.WriteBulk's fallback", st.Name())
	}
	// Each case has inodes of its own, from first on.
	cases := []struct {
		name  string
		bulks func(first store.Ino) []*store.Bulk
	}{
		{"Empty", func(store.Ino) []*store.Bulk { return []*store.Bulk{{}} }},
		{"Volume", func(first store.Ino) []*store.Bulk { return []*store.Bulk{bulkVolume(first, 600)} }},
		{"Replace", func(first store.Ino) []*store.Bulk {
			b := bulkVolume(first, 300)
			// The same keys again with other values, some twice in one
			// Bulk (the later wins), and records that delete.
			r := &store.Bulk{}
			for i, n := range b.Nodes[1:] {
				c := *n
				c.Mtime, c.Nlink, c.Length = -1, 7, uint64(i)
				r.Nodes = append(r.Nodes, &c)
				if i%10 == 0 {
					c2 := c
					c2.Uid = 99
					r.Nodes = append(r.Nodes, &c2)
				}
			}
			for _, e := range b.Edges[:100] {
				e.Edge.Ino++
				r.Edges = append(r.Edges, e)
			}
			for i, c := range b.Chunks {
				switch i % 3 {
				case 0:
					c.Slices = nil // deletes the chunk
				case 1:
					c.Slices = []store.Slice{{Pos: 1, Id: uint64(i) + 1<<40, Size: 2, Len: 1}}
				}
				r.Chunks = append(r.Chunks, c)
			}
			for _, s := range b.Symlinks {
				s.Target = append([]byte("new/"), s.Target...)
				r.Symlinks = append(r.Symlinks, s)
				s.Target = append([]byte("newer/"), s.Target...)
				r.Symlinks = append(r.Symlinks, s)
			}
			for i, x := range b.Xattrs {
				if i%2 == 0 {
					x.Value = []byte(fmt.Sprintf("replaced %d", i))
					r.Xattrs = append(r.Xattrs, x)
				}
			}
			r.Xattrs = append(r.Xattrs, store.BulkXattr{Ino: first, Xattr: store.Xattr{Name: "user.added", Value: []byte("1")}})
			for i, ref := range b.SliceRefs {
				ref.Extra = int64(i % 2) // 0 deletes
				r.SliceRefs = append(r.SliceRefs, ref)
			}
			r.SliceRefs = append(r.SliceRefs, store.SliceRefRecord{Id: 1 << 50, Size: 1, Extra: -3})
			return []*store.Bulk{b, r}
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newModel()
			for _, b := range c.bulks(first + store.Ino(i)*10000) {
				writeBulk(t, st, b)
				m.apply(b)
				checkStored(t, st, m)
			}
			// What the batched reads return of it, too.
			if inos := m.inos(); len(inos) > 0 {
				view(t, st, func(tx store.Tx) error {
					return checkBatch(tx, batchReads[1], m, m.chunkKeys(), inos)
				})
			}
		})
	}
	t.Run("Atomic", func(t *testing.T) {
		if !isBulk {
			t.Skip("store.WriteBulk's fallback is not atomic")
		}
		// A failed WriteBulk stores nothing.
		b := bulkVolume(first+store.Ino(len(cases))*10000, 50)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := st.(store.BulkWriter).WriteBulk(cctx, b); err == nil {
			t.Fatal("WriteBulk with a canceled context succeeded")
		}
		view(t, st, func(tx store.Tx) error {
			for _, n := range b.Nodes {
				if _, err := tx.Node(n.Ino); !errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("Node(%d) after a failed WriteBulk: %v, want store.ErrNotFound", n.Ino, err)
				}
			}
			return nil
		})
	})
}
