package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Options says where an engine's guarantees differ (see package store's
// doc).
type Options struct {
	// ScanRepeats: a whole-family scan (ScanInodes, ScanSliceRefs, ...)
	// may return a record twice even on an unchanged store (redis, whose
	// listing is SCAN).
	ScanRepeats bool
}

// Run checks the semantics of every store.Tx method, of Update and of
// View on stores newStore returns; each must be empty and is closed when
// its case ends.
func Run(t *testing.T, newStore func(t *testing.T) store.Store, opts Options) {
	cases := []struct {
		name string
		fn   func(t *testing.T, st store.Store, opts Options)
	}{
		{"Nodes", testNodes},
		{"Edges", testEdges},
		{"EdgePages", testEdgePages},
		{"SymlinksXattrs", testSymlinksXattrs},
		{"Chunks", testChunks},
		{"SliceRefsCounters", testSliceRefsCounters},
		{"SessionsLocks", testSessionsLocks},
		{"Unsynced", testUnsynced},
		{"Queues", testQueues},
		{"Scans", testScans},
		{"ReadYourWrites", testReadYourWrites},
		{"Atomicity", testAtomicity},
		{"WriteInView", testWriteInView},
		{"ConcurrentUpdates", testConcurrentUpdates},
		{"BatchReads", testBatchReads},
		{"BulkWrites", testBulkWrites},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := newStore(t)
			t.Cleanup(func() { st.Close() })
			c.fn(t, st, opts)
		})
	}
}

var ctx = context.Background()

// update runs fn in st.Update, failing t on error.
func update(t *testing.T, st store.Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := st.Update(ctx, fn); err != nil {
		t.Fatalf("update: %v", err)
	}
}

// view runs fn in st.View, failing t on error.
func view(t *testing.T, st store.Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := st.View(ctx, fn); err != nil {
		t.Fatalf("view: %v", err)
	}
}

func wantNotFound(what string, err error) error {
	if !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%s: %v, want store.ErrNotFound", what, err)
	}
	return nil
}

func testNodes(t *testing.T, st store.Store, _ Options) {
	big := &store.Node{Ino: math.MaxUint64 >> 1, Type: store.TypeSocket, Flags: 0x21, Mode: 0o7777,
		Uid: math.MaxUint32, Gid: 7, Atime: -1, Mtime: math.MinInt64, Ctime: math.MaxInt64,
		Atimensec: 999999999, Mtimensec: 1, Ctimensec: 2, Nlink: math.MaxUint32, Length: math.MaxUint64,
		Rdev: 8<<8 | 1, Parent: math.MaxUint64 - 1}
	dir := &store.Node{Ino: 2, Type: store.TypeDir, Mode: 0o755, Nlink: 2, Length: 4096, Parent: 1}
	view(t, st, func(tx store.Tx) error {
		_, err := tx.Node(2)
		return wantNotFound("Node of a missing inode", err)
	})
	update(t, st, func(tx store.Tx) error {
		tx.SetNode(big)
		tx.SetNode(dir)
		return nil
	})
	view(t, st, func(tx store.Tx) error {
		for _, want := range []*store.Node{big, dir} {
			got, err := tx.Node(want.Ino)
			if err != nil || *got != *want {
				return fmt.Errorf("Node(%d) = %+v, %v; want %+v", want.Ino, got, err, want)
			}
		}
		ns, err := tx.Nodes([]store.Ino{3, dir.Ino, big.Ino, 3, dir.Ino})
		if err != nil || len(ns) != 5 {
			return fmt.Errorf("Nodes: %d nodes, %v; want 5", len(ns), err)
		}
		if ns[0] != nil || ns[3] != nil {
			return fmt.Errorf("Nodes: missing inode 3 gives %+v, %+v; want nil", ns[0], ns[3])
		}
		if ns[1] == nil || *ns[1] != *dir || ns[4] == nil || *ns[4] != *dir || ns[2] == nil || *ns[2] != *big {
			return fmt.Errorf("Nodes: %+v %+v %+v; want the nodes in the order asked", ns[1], ns[2], ns[4])
		}
		if ns, err := tx.Nodes(nil); err != nil || len(ns) != 0 {
			return fmt.Errorf("Nodes(nil) = %v, %v", ns, err)
		}
		return nil
	})
	changed := *dir
	changed.Nlink, changed.Mtime = 3, 42
	update(t, st, func(tx store.Tx) error {
		tx.SetNode(&changed)
		tx.DeleteNode(big.Ino)
		tx.DeleteNode(12345) // missing: no error
		return nil
	})
	view(t, st, func(tx store.Tx) error {
		if got, err := tx.Node(dir.Ino); err != nil || *got != changed {
			return fmt.Errorf("Node after SetNode = %+v, %v; want %+v", got, err, changed)
		}
		_, err := tx.Node(big.Ino)
		return wantNotFound("Node after DeleteNode", err)
	})
}

func testEdges(t *testing.T, st store.Store, _ Options) {
	dir := &store.Node{Ino: 10, Type: store.TypeDir, Mode: 0o755, Nlink: 2, Parent: 1}
	names := [][]byte{{0}, []byte("A"), []byte("a"), []byte("a\x00"), []byte("ab"), {0x7f}, {0x80},
		bytes.Repeat([]byte{0xff}, 255)}
	view(t, st, func(tx store.Tx) error {
		if _, _, err := tx.NodeEdge(dir.Ino, []byte("a")); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("NodeEdge of a missing directory: %v, want store.ErrNotFound", err)
		}
		_, err := tx.Edge(dir.Ino, []byte("a"))
		return wantNotFound("Edge of a missing entry", err)
	})
	update(t, st, func(tx store.Tx) error {
		tx.SetNode(dir)
		// Set in reverse order: Edges must sort them.
		for i := len(names) - 1; i >= 0; i-- {
			tx.SetEdge(dir.Ino, store.Edge{Name: names[i], Ino: store.Ino(100 + i), Type: store.TypeFile})
		}
		tx.SetEdge(dir.Ino+1, store.Edge{Name: []byte("other"), Ino: 99, Type: store.TypeDir})
		return nil
	})
	view(t, st, func(tx store.Tx) error {
		n, e, err := tx.NodeEdge(dir.Ino, []byte("none"))
		if err != nil || n == nil || *n != *dir || e.Ino != 0 {
			return fmt.Errorf("NodeEdge of a missing name = %+v, %+v, %v; want the directory and Ino 0", n, e, err)
		}
		n, e, err = tx.NodeEdge(dir.Ino, []byte("ab"))
		if err != nil || n == nil || *n != *dir || e.Ino != 104 || e.Type != store.TypeFile || string(e.Name) != "ab" {
			return fmt.Errorf("NodeEdge = %+v, %+v, %v", n, e, err)
		}
		for i, name := range names {
			e, err := tx.Edge(dir.Ino, name)
			if err != nil || e.Ino != store.Ino(100+i) || !bytes.Equal(e.Name, name) {
				return fmt.Errorf("Edge(%q) = %+v, %v", name, e, err)
			}
		}
		es, err := tx.Edges(dir.Ino, nil, 0)
		if err != nil {
			return err
		}
		var got [][]byte
		for _, e := range es {
			got = append(got, e.Name)
		}
		if !reflect.DeepEqual(got, names) {
			return fmt.Errorf("Edges = %q; want %q (byte order, this directory only)", got, names)
		}
		return nil
	})
	update(t, st, func(tx store.Tx) error {
		tx.DeleteEdge(dir.Ino, []byte("a"))
		tx.SetEdge(dir.Ino, store.Edge{Name: []byte("ab"), Ino: 7, Type: store.TypeSymlink})
		return nil
	})
	view(t, st, func(tx store.Tx) error {
		if _, err := tx.Edge(dir.Ino, []byte("a")); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("Edge after DeleteEdge: %v", err)
		}
		e, err := tx.Edge(dir.Ino, []byte("ab"))
		if err != nil || e.Ino != 7 || e.Type != store.TypeSymlink {
			return fmt.Errorf("Edge after replacing = %+v, %v", e, err)
		}
		es, err := tx.Edges(dir.Ino, nil, 0)
		if err != nil || len(es) != len(names)-1 {
			return fmt.Errorf("Edges after a delete: %d, %v; want %d", len(es), err, len(names)-1)
		}
		return nil
	})
}

// testEdgePages pages through a directory with every limit and checks
// that the pages visit each entry once, in order; after may be a name that
// does not exist.
func testEdgePages(t *testing.T, st store.Store, _ Options) {
	const dir, n = store.Ino(20), 23
	var want []string
	update(t, st, func(tx store.Tx) error {
		for i := range n {
			name := fmt.Sprintf("f%03d", i*2)
			want = append(want, name)
			tx.SetEdge(dir, store.Edge{Name: []byte(name), Ino: store.Ino(1000 + i), Type: store.TypeFile})
		}
		return nil
	})
	for _, limit := range []int{1, 2, 5, 22, 23, 100} {
		var got []string
		var after []byte
		for pages := 0; ; pages++ {
			if pages > n+1 {
				t.Fatalf("limit %d: more pages than entries", limit)
			}
			var es []store.Edge
			view(t, st, func(tx store.Tx) error {
				var err error
				es, err = tx.Edges(dir, after, limit)
				return err
			})
			if len(es) > limit {
				t.Fatalf("limit %d: a page of %d entries", limit, len(es))
			}
			for _, e := range es {
				got = append(got, string(e.Name))
			}
			if len(es) < limit {
				break
			}
			after = es[len(es)-1].Name
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: pages gave %q, want %q", limit, got, want)
		}
	}
	view(t, st, func(tx store.Tx) error {
		es, err := tx.Edges(dir, []byte("f003"), 2) // between f002 and f004
		if err != nil || len(es) != 2 || string(es[0].Name) != "f004" || string(es[1].Name) != "f006" {
			return fmt.Errorf("Edges after a missing name: %+v, %v; want f004, f006", es, err)
		}
		es, err = tx.Edges(dir, []byte("f044"), 10)
		if err != nil || len(es) != 0 {
			return fmt.Errorf("Edges after the last name: %+v, %v", es, err)
		}
		return nil
	})
}

func testSymlinksXattrs(t *testing.T, st store.Store, _ Options) {
	target := bytes.Repeat([]byte("x/"), 2000)
	view(t, st, func(tx store.Tx) error {
		if _, err := tx.Symlink(5); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("Symlink of a missing inode: %v", err)
		}
		if names, err := tx.XattrNames(5); err != nil || len(names) != 0 {
			return fmt.Errorf("XattrNames of an inode without any: %q, %v", names, err)
		}
		_, err := tx.Xattr(5, "user.a")
		return wantNotFound("Xattr of a missing name", err)
	})
	update(t, st, func(tx store.Tx) error {
		tx.SetSymlink(5, target)
		tx.SetXattr(5, "user.b", []byte("2"))
		tx.SetXattr(5, "user.a", []byte("1"))
		tx.SetXattr(5, "user.empty", nil)
		tx.SetXattr(6, "user.other", []byte("x"))
		return nil
	})
	view(t, st, func(tx store.Tx) error {
		if got, err := tx.Symlink(5); err != nil || !bytes.Equal(got, target) {
			return fmt.Errorf("Symlink = %d bytes, %v; want %d", len(got), err, len(target))
		}
		if v, err := tx.Xattr(5, "user.a"); err != nil || string(v) != "1" {
			return fmt.Errorf("Xattr = %q, %v", v, err)
		}
		if v, err := tx.Xattr(5, "user.empty"); err != nil || len(v) != 0 {
			return fmt.Errorf("empty Xattr = %q, %v; want an empty value, not ErrNotFound", v, err)
		}
		names, err := tx.XattrNames(5)
		slices.Sort(names)
		if err != nil || !slices.Equal(names, []string{"user.a", "user.b", "user.empty"}) {
			return fmt.Errorf("XattrNames = %q, %v", names, err)
		}
		return nil
	})
	update(t, st, func(tx store.Tx) error {
		tx.DeleteSymlink(5)
		tx.DeleteXattr(5, "user.a")
		return nil
	})
	view(t, st, func(tx store.Tx) error {
		if _, err := tx.Symlink(5); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("Symlink after DeleteSymlink: %v", err)
		}
		if names, err := tx.XattrNames(5); err != nil || len(names) != 2 {
			return fmt.Errorf("XattrNames after a delete: %q, %v", names, err)
		}
		_, err := tx.Xattr(5, "user.a")
		return wantNotFound("Xattr after DeleteXattr", err)
	})
}

func testChunks(t *testing.T, st store.Store, _ Options) {
	const ino = store.Ino(30)
	s1 := store.Slice{Pos: 0, Id: 1, Size: 100, Off: 0, Len: 100}
	s2 := store.Slice{Pos: 50, Id: math.MaxUint64, Size: math.MaxUint32, Off: 7, Len: 10}
	hole := store.Slice{Pos: 10, Len: 5}
	idxs := []uint32{0, 1, 255, 256, 70000, math.MaxUint32}
	view(t, st, func(tx store.Tx) error {
		ss, err := tx.Chunk(ino, 0)
		if err != nil || len(ss) != 0 {
			return fmt.Errorf("Chunk with no slices = %v, %v; want none and no error", ss, err)
		}
		return nil
	})
	update(t, st, func(tx store.Tx) error {
		for i := len(idxs) - 1; i >= 0; i-- {
			tx.AppendSlice(ino, idxs[i], s1)
		}
		tx.AppendSlice(ino, 0, s2)
		tx.AppendSlice(ino, 0, hole)
		tx.SetChunk(ino+1, 3, []store.Slice{s2})
		return nil
	})
	view(t, st, func(tx store.Tx) error {
		if ss, err := tx.Chunk(ino, 0); err != nil || !slices.Equal(ss, []store.Slice{s1, s2, hole}) {
			return fmt.Errorf("Chunk after appends = %+v, %v; want the slices in append order", ss, err)
		}
		got, err := tx.ChunkIndexes(ino, 0, 0)
		if err != nil || !slices.Equal(got, idxs) {
			return fmt.Errorf("ChunkIndexes = %v, %v; want %v (ascending, this inode only)", got, err, idxs)
		}
		got, err = tx.ChunkIndexes(ino, 2, 2)
		if err != nil || !slices.Equal(got, []uint32{255, 256}) {
			return fmt.Errorf("ChunkIndexes from 2, limit 2 = %v, %v; want [255 256]", got, err)
		}
		got, err = tx.ChunkIndexes(ino, 256, 0)
		if err != nil || !slices.Equal(got, []uint32{256, 70000, math.MaxUint32}) {
			return fmt.Errorf("ChunkIndexes from 256 = %v, %v (from is included)", got, err)
		}
		return nil
	})
	update(t, st, func(tx store.Tx) error {
		tx.SetChunk(ino, 0, []store.Slice{s2})
		tx.SetChunk(ino, 1, nil)
		tx.SetChunk(ino, 255, []store.Slice{})
		return nil
	})
	view(t, st, func(tx store.Tx) error {
		if ss, err := tx.Chunk(ino, 0); err != nil || !slices.Equal(ss, []store.Slice{s2}) {
			return fmt.Errorf("Chunk after SetChunk = %+v, %v", ss, err)
		}
		if ss, err := tx.Chunk(ino, 1); err != nil || len(ss) != 0 {
			return fmt.Errorf("Chunk after SetChunk(nil) = %+v, %v", ss, err)
		}
		got, err := tx.ChunkIndexes(ino, 0, 0)
		if want := []uint32{0, 256, 70000, math.MaxUint32}; err != nil || !slices.Equal(got, want) {
			return fmt.Errorf("ChunkIndexes after emptying two chunks = %v, %v; want %v", got, err, want)
		}
		return nil
	})
}

func testSliceRefsCounters(t *testing.T, st store.Store, _ Options) {
	view(t, st, func(tx store.Tx) error {
		if v, err := tx.SliceRef(7, 100); err != nil || v != 0 {
			return fmt.Errorf("SliceRef of an unshared slice = %d, %v; want 0", v, err)
		}
		if v, err := tx.Counter("never"); err != nil || v != 0 {
			return fmt.Errorf("unset Counter = %d, %v; want 0", v, err)
		}
		_, err := tx.Setting()
		return wantNotFound("Setting of an unformatted store", err)
	})
	update(t, st, func(tx store.Tx) error {
		tx.SetSliceRef(7, 100, 3)
		tx.SetSliceRef(8, 100, 1)
		tx.SetCounter("c", -5)
		tx.SetCounter("big", math.MaxInt64)
		tx.SetSetting([]byte(`{"Name":"x"}`))
		return nil
	})
	view(t, st, func(tx store.Tx) error {
		if v, err := tx.SliceRef(7, 100); err != nil || v != 3 {
			return fmt.Errorf("SliceRef = %d, %v; want 3", v, err)
		}
		if v, err := tx.SliceRef(7, 101); err != nil || v != 0 {
			return fmt.Errorf("SliceRef of another size = %d, %v; want 0", v, err)
		}
		if v, err := tx.Counter("c"); err != nil || v != -5 {
			return fmt.Errorf("Counter = %d, %v; want -5", v, err)
		}
		if v, err := tx.Counter("big"); err != nil || v != math.MaxInt64 {
			return fmt.Errorf("Counter = %d, %v", v, err)
		}
		if v, err := tx.Setting(); err != nil || string(v) != `{"Name":"x"}` {
			return fmt.Errorf("Setting = %q, %v", v, err)
		}
		return nil
	})
	update(t, st, func(tx store.Tx) error {
		tx.SetSliceRef(7, 100, 0)
		tx.SetCounter("c", 0)
		tx.SetSetting(nil)
		return nil
	})
	view(t, st, func(tx store.Tx) error {
		if v, err := tx.SliceRef(7, 100); err != nil || v != 0 {
			return fmt.Errorf("SliceRef after setting 0 = %d, %v", v, err)
		}
		if v, err := tx.Counter("c"); err != nil || v != 0 {
			return fmt.Errorf("Counter set to 0 = %d, %v", v, err)
		}
		if _, err := tx.Setting(); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("Setting after an empty SetSetting: %v; want ErrNotFound", err)
		}
		refs, err := scanAll(tx.ScanSliceRefs)
		if err != nil {
			return err
		}
		if want := []store.SliceRefRecord{{Id: 8, Size: 100, Extra: 1}}; !slices.Equal(uniq(refs), want) {
			return fmt.Errorf("ScanSliceRefs after SetSliceRef 0 = %+v; want %+v (0 deletes the record)", refs, want)
		}
		return nil
	})
}

func testSessionsLocks(t *testing.T, st store.Store, _ Options) {
	s1 := store.Session{Sid: 1, Heartbeat: 100, Info: []byte(`{"host":"a"}`)}
	s2 := store.Session{Sid: math.MaxUint64, Heartbeat: -1}
	update(t, st, func(tx store.Tx) error {
		tx.SetSession(s1)
		tx.SetSession(s2)
		tx.SetSustained(1, 40, true)
		tx.SetSustained(1, 41, true)
		tx.SetSustained(2, 42, true)
		tx.SetLock(40, store.LockFlock, store.LockRecord{Sid: 1, Owner: 9, Data: []byte{'R'}})
		tx.SetLock(40, store.LockPosix, store.LockRecord{Sid: 1, Owner: 9, Data: []byte("ranges")})
		tx.SetLock(40, store.LockPosix, store.LockRecord{Sid: 2, Owner: math.MaxUint64, Data: []byte("r2")})
		tx.SetLockedInode(1, 40, true)
		tx.SetLockedInode(1, 43, true)
		return nil
	})
	sortLocks := func(rs []store.LockRecord) []store.LockRecord {
		slices.SortFunc(rs, func(a, b store.LockRecord) int {
			if a.Sid != b.Sid {
				return cmpU(a.Sid, b.Sid)
			}
			return cmpU(a.Owner, b.Owner)
		})
		return rs
	}
	view(t, st, func(tx store.Tx) error {
		ss, err := tx.Sessions()
		slices.SortFunc(ss, func(a, b store.Session) int { return cmpU(a.Sid, b.Sid) })
		if err != nil || len(ss) != 2 || ss[0].Sid != 1 || ss[0].Heartbeat != 100 || string(ss[0].Info) != string(s1.Info) ||
			ss[1].Sid != s2.Sid || ss[1].Heartbeat != -1 {
			return fmt.Errorf("Sessions = %+v, %v", ss, err)
		}
		inos, err := tx.Sustained(1)
		slices.Sort(inos)
		if err != nil || !slices.Equal(inos, []store.Ino{40, 41}) {
			return fmt.Errorf("Sustained(1) = %v, %v", inos, err)
		}
		fl, err := tx.Locks(40, store.LockFlock)
		if err != nil || len(fl) != 1 || fl[0].Sid != 1 || fl[0].Owner != 9 || string(fl[0].Data) != "R" {
			return fmt.Errorf("flocks = %+v, %v", fl, err)
		}
		pl, err := tx.Locks(40, store.LockPosix)
		pl = sortLocks(pl)
		if err != nil || len(pl) != 2 || string(pl[0].Data) != "ranges" || pl[1].Owner != math.MaxUint64 {
			return fmt.Errorf("POSIX locks = %+v, %v", pl, err)
		}
		if none, err := tx.Locks(41, store.LockPosix); err != nil || len(none) != 0 {
			return fmt.Errorf("locks of an unlocked inode = %+v, %v", none, err)
		}
		li, err := tx.LockedInodes(1)
		slices.Sort(li)
		if err != nil || !slices.Equal(li, []store.Ino{40, 43}) {
			return fmt.Errorf("LockedInodes = %v, %v", li, err)
		}
		return nil
	})
	update(t, st, func(tx store.Tx) error {
		tx.DeleteSession(1)
		tx.SetSustained(1, 40, false)
		tx.SetLock(40, store.LockPosix, store.LockRecord{Sid: 1, Owner: 9})
		tx.SetLockedInode(1, 43, false)
		return nil
	})
	view(t, st, func(tx store.Tx) error {
		if ss, err := tx.Sessions(); err != nil || len(ss) != 1 || ss[0].Sid != s2.Sid {
			return fmt.Errorf("Sessions after a delete = %+v, %v", ss, err)
		}
		if inos, err := tx.Sustained(1); err != nil || !slices.Equal(inos, []store.Ino{41}) {
			return fmt.Errorf("Sustained after unsetting one = %v, %v", inos, err)
		}
		if pl, err := tx.Locks(40, store.LockPosix); err != nil || len(pl) != 1 || pl[0].Sid != 2 {
			return fmt.Errorf("POSIX locks after an empty SetLock = %+v, %v (empty Data deletes)", pl, err)
		}
		if li, err := tx.LockedInodes(1); err != nil || !slices.Equal(li, []store.Ino{40}) {
			return fmt.Errorf("LockedInodes after unsetting one = %v, %v", li, err)
		}
		return nil
	})
}

func testUnsynced(t *testing.T, st store.Store, _ Options) {
	a := store.UnsyncedSlice{Id: 7, Size: 10, Ino: 40, Idx: 0}
	b := store.UnsyncedSlice{Id: 7, Size: 4 << 20, Ino: 40, Idx: 3}
	c := store.UnsyncedSlice{Id: math.MaxUint64, Size: math.MaxUint32, Ino: math.MaxUint64, Idx: math.MaxUint32}
	other := store.UnsyncedSlice{Id: 8, Size: 1, Ino: 41, Idx: 1}
	sorted := func(us []store.UnsyncedSlice) []store.UnsyncedSlice {
		slices.SortFunc(us, func(x, y store.UnsyncedSlice) int {
			if x.Id != y.Id {
				return cmpU(x.Id, y.Id)
			}
			return cmpU(uint64(x.Size), uint64(y.Size))
		})
		return us
	}
	update(t, st, func(tx store.Tx) error {
		tx.SetUnsynced(1, c, true)
		tx.SetUnsynced(1, b, true)
		tx.SetUnsynced(1, a, true)
		tx.SetUnsynced(2, other, true)
		return nil
	})
	view(t, st, func(tx store.Tx) error {
		got, err := tx.Unsynced(1)
		if want := []store.UnsyncedSlice{a, b, c}; err != nil || !slices.Equal(sorted(got), want) {
			return fmt.Errorf("Unsynced(1) = %+v, %v; want %+v", got, err, want)
		}
		if none, err := tx.Unsynced(3); err != nil || len(none) != 0 {
			return fmt.Errorf("Unsynced of a session without records = %+v, %v", none, err)
		}
		return nil
	})
	update(t, st, func(tx store.Tx) error {
		tx.SetUnsynced(1, store.UnsyncedSlice{Id: b.Id, Size: b.Size}, false) // the key alone forgets
		tx.SetUnsynced(1, c, false)
		tx.SetUnsynced(1, other, false) // another session's: nothing to forget here
		return nil
	})
	view(t, st, func(tx store.Tx) error {
		if got, err := tx.Unsynced(1); err != nil || !slices.Equal(got, []store.UnsyncedSlice{a}) {
			return fmt.Errorf("Unsynced(1) after forgetting two = %+v, %v; want only %+v", got, err, a)
		}
		if got, err := tx.Unsynced(2); err != nil || !slices.Equal(got, []store.UnsyncedSlice{other}) {
			return fmt.Errorf("Unsynced(2) = %+v, %v; want %+v (session 1's forget must not touch it)", got, err, other)
		}
		return nil
	})
}

func testQueues(t *testing.T, st store.Store, _ Options) {
	files := []store.DelFile{{Ino: 50, Length: 0, Expire: 10}, {Ino: 50, Length: 1 << 40, Expire: -1}, {Ino: 51, Length: 7, Expire: 0}}
	dels := []store.Slice{{Id: 1, Size: 10}, {Id: 1, Size: 11}, {Id: math.MaxUint64, Size: math.MaxUint32}}
	truncs := []store.Truncation{{Ino: 52, From: 3}, {Ino: 53, From: math.MaxUint32}}
	update(t, st, func(tx store.Tx) error {
		for _, f := range files {
			tx.SetDelFile(f, true)
		}
		for _, s := range dels {
			tx.SetDelSlice(s.Id, s.Size, true)
		}
		for _, tr := range truncs {
			tx.SetTruncation(tr, true)
		}
		return nil
	})
	view(t, st, func(tx store.Tx) error {
		fs, err := tx.DelFiles(0)
		if err != nil || !sameSet(fs, files) {
			return fmt.Errorf("DelFiles = %+v, %v; want %+v", fs, err, files)
		}
		if fs, err := tx.DelFiles(2); err != nil || len(fs) != 2 {
			return fmt.Errorf("DelFiles(2) = %+v, %v", fs, err)
		}
		ss, err := tx.DelSlices(0)
		if err != nil || !sameSet(ss, dels) {
			return fmt.Errorf("DelSlices = %+v, %v; want %+v", ss, err, dels)
		}
		if ss, err := tx.DelSlices(1); err != nil || len(ss) != 1 {
			return fmt.Errorf("DelSlices(1) = %+v, %v", ss, err)
		}
		ts, err := tx.Truncations(0)
		if err != nil || !sameSet(ts, truncs) {
			return fmt.Errorf("Truncations = %+v, %v; want %+v", ts, err, truncs)
		}
		return nil
	})
	update(t, st, func(tx store.Tx) error {
		tx.SetDelFile(files[1], false)
		tx.SetDelSlice(dels[0].Id, dels[0].Size, false)
		tx.SetTruncation(store.Truncation{Ino: 52}, false) // From does not matter
		return nil
	})
	view(t, st, func(tx store.Tx) error {
		if fs, err := tx.DelFiles(0); err != nil || !sameSet(fs, []store.DelFile{files[0], files[2]}) {
			return fmt.Errorf("DelFiles after removing one = %+v, %v", fs, err)
		}
		if ss, err := tx.DelSlices(0); err != nil || !sameSet(ss, dels[1:]) {
			return fmt.Errorf("DelSlices after removing one = %+v, %v", ss, err)
		}
		if ts, err := tx.Truncations(0); err != nil || !sameSet(ts, truncs[1:]) {
			return fmt.Errorf("Truncations after removing one = %+v, %v", ts, err)
		}
		return nil
	})
}

// testScans fills every family the Scan methods page through and checks,
// for several page sizes, that the pages hold every record, each once
// (unless opts.ScanRepeats), and nothing else.
func testScans(t *testing.T, st store.Store, opts Options) {
	const n = 37
	var want []string // InodeRecords, described
	var wantRefs []store.SliceRefRecord
	var wantFiles []store.DelFile
	var wantSlices []store.Slice
	update(t, st, func(tx store.Tx) error {
		for i := range n {
			ino := store.Ino(1000 + i*7)
			node := &store.Node{Ino: ino, Type: store.TypeFile, Mode: 0o644, Nlink: 1, Parent: 1}
			tx.SetNode(node)
			want = append(want, describe(store.InodeRecord{Ino: ino, Node: node}))
			switch i % 3 {
			case 0:
				e := store.Edge{Name: fmt.Appendf(nil, "e%d", i), Ino: ino + 1, Type: store.TypeFile}
				tx.SetEdge(ino, e)
				want = append(want, describe(store.InodeRecord{Ino: ino, Edge: &e}))
			case 1:
				ss := []store.Slice{{Id: uint64(i + 1), Size: 10, Len: 10}}
				tx.SetChunk(ino, uint32(i), ss)
				want = append(want, describe(store.InodeRecord{Ino: ino, Chunk: &store.ChunkRecord{Idx: uint32(i), Slices: ss}}))
			case 2:
				target := fmt.Appendf(nil, "t%d", i)
				tx.SetSymlink(ino, target)
				want = append(want, describe(store.InodeRecord{Ino: ino, Symlink: target}))
			}
			tx.SetXattr(ino, "user.skipped", []byte("x")) // not reported
			r := store.SliceRefRecord{Id: uint64(5000 + i), Size: uint32(i), Extra: int64(i + 1)}
			tx.SetSliceRef(r.Id, r.Size, r.Extra)
			wantRefs = append(wantRefs, r)
			f := store.DelFile{Ino: ino, Length: uint64(i), Expire: int64(i)}
			tx.SetDelFile(f, true)
			wantFiles = append(wantFiles, f)
			s := store.Slice{Id: uint64(9000 + i), Size: uint32(i)}
			tx.SetDelSlice(s.Id, s.Size, true)
			wantSlices = append(wantSlices, s)
		}
		return nil
	})
	for _, limit := range []int{1, 5, 1000} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			var recs []store.InodeRecord
			var refs []store.SliceRefRecord
			var files []store.DelFile
			var slicesGot []store.Slice
			view(t, st, func(tx store.Tx) error {
				var err error
				if recs, err = scanAllLimit(tx.ScanInodes, limit); err != nil {
					return err
				}
				if refs, err = scanAllLimit(tx.ScanSliceRefs, limit); err != nil {
					return err
				}
				if files, err = scanAllLimit(tx.ScanDelFiles, limit); err != nil {
					return err
				}
				slicesGot, err = scanAllLimit(tx.ScanDelSlices, limit)
				return err
			})
			var got []string
			for _, r := range recs {
				if r.Err != nil {
					t.Fatalf("ScanInodes: record of inode %d: %v", r.Ino, r.Err)
				}
				got = append(got, describe(r))
			}
			checkVisits(t, "ScanInodes", got, want, opts)
			checkVisits(t, "ScanSliceRefs", refs, wantRefs, opts)
			checkVisits(t, "ScanDelFiles", files, wantFiles, opts)
			checkVisits(t, "ScanDelSlices", slicesGot, wantSlices, opts)
		})
	}
}

// testReadYourWrites checks that reads inside an Update see its own
// writes, before it commits.
func testReadYourWrites(t *testing.T, st store.Store, _ Options) {
	old := &store.Node{Ino: 60, Type: store.TypeDir, Mode: 0o755, Nlink: 2, Parent: 1}
	update(t, st, func(tx store.Tx) error {
		tx.SetNode(old)
		tx.SetEdge(60, store.Edge{Name: []byte("gone"), Ino: 61, Type: store.TypeFile})
		tx.AppendSlice(62, 0, store.Slice{Id: 1, Size: 1, Len: 1})
		tx.SetCounter("n", 1)
		return nil
	})
	update(t, st, func(tx store.Tx) error {
		changed := *old
		changed.Nlink = 3
		tx.SetNode(&changed)
		tx.SetNode(&store.Node{Ino: 63, Type: store.TypeFile, Nlink: 1, Parent: 60})
		tx.DeleteEdge(60, []byte("gone"))
		tx.SetEdge(60, store.Edge{Name: []byte("new"), Ino: 63, Type: store.TypeFile})
		tx.AppendSlice(62, 0, store.Slice{Id: 2, Size: 1, Len: 1})
		tx.AppendSlice(62, 5, store.Slice{Id: 3, Size: 1, Len: 1})
		tx.SetCounter("n", 2)
		tx.SetXattr(63, "user.x", []byte("v"))
		tx.SetSliceRef(2, 1, 4)
		tx.SetDelSlice(3, 1, true)
		if n, err := tx.Node(60); err != nil || n.Nlink != 3 {
			return fmt.Errorf("Node after SetNode in the same Update = %+v, %v", n, err)
		}
		if ns, err := tx.Nodes([]store.Ino{63, 60}); err != nil || ns[0] == nil || ns[1] == nil || ns[1].Nlink != 3 {
			return fmt.Errorf("Nodes after SetNode in the same Update = %+v, %v", ns, err)
		}
		if _, err := tx.Edge(60, []byte("gone")); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("Edge deleted in the same Update: %v", err)
		}
		n, e, err := tx.NodeEdge(60, []byte("new"))
		if err != nil || n.Nlink != 3 || e.Ino != 63 {
			return fmt.Errorf("NodeEdge after writes in the same Update = %+v, %+v, %v", n, e, err)
		}
		if es, err := tx.Edges(60, nil, 0); err != nil || len(es) != 1 || string(es[0].Name) != "new" {
			return fmt.Errorf("Edges after writes in the same Update = %+v, %v", es, err)
		}
		if ss, err := tx.Chunk(62, 0); err != nil || len(ss) != 2 || ss[1].Id != 2 {
			return fmt.Errorf("Chunk after AppendSlice in the same Update = %+v, %v", ss, err)
		}
		if idx, err := tx.ChunkIndexes(62, 0, 0); err != nil || !slices.Equal(idx, []uint32{0, 5}) {
			return fmt.Errorf("ChunkIndexes after AppendSlice in the same Update = %v, %v", idx, err)
		}
		if v, err := tx.Counter("n"); err != nil || v != 2 {
			return fmt.Errorf("Counter after SetCounter in the same Update = %d, %v", v, err)
		}
		if v, err := tx.Xattr(63, "user.x"); err != nil || string(v) != "v" {
			return fmt.Errorf("Xattr after SetXattr in the same Update = %q, %v", v, err)
		}
		if v, err := tx.SliceRef(2, 1); err != nil || v != 4 {
			return fmt.Errorf("SliceRef after SetSliceRef in the same Update = %d, %v", v, err)
		}
		if ss, err := tx.DelSlices(0); err != nil || len(ss) != 1 || ss[0].Id != 3 {
			return fmt.Errorf("DelSlices after SetDelSlice in the same Update = %+v, %v", ss, err)
		}
		return nil
	})
}

// testAtomicity checks that an Update whose callback fails commits none
// of its writes, and that one that succeeds commits all of them.
func testAtomicity(t *testing.T, st store.Store, _ Options) {
	boom := errors.New("boom")
	write := func(tx store.Tx, v int64) {
		tx.SetNode(&store.Node{Ino: 70, Type: store.TypeFile, Nlink: 1, Length: uint64(v)})
		tx.SetEdge(1, store.Edge{Name: fmt.Appendf(nil, "f%d", v), Ino: 70, Type: store.TypeFile})
		tx.AppendSlice(70, 0, store.Slice{Id: uint64(v), Size: 1, Len: 1})
		tx.SetCounter("a", v)
		tx.SetDelSlice(uint64(v), 1, true)
	}
	update(t, st, func(tx store.Tx) error { write(tx, 1); return nil })
	err := st.Update(ctx, func(tx store.Tx) error {
		write(tx, 2)
		tx.DeleteEdge(1, []byte("f1"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update returned %v, want the callback's error", err)
	}
	view(t, st, func(tx store.Tx) error {
		n, err := tx.Node(70)
		if err != nil || n.Length != 1 {
			return fmt.Errorf("node after a failed Update = %+v, %v; want the first Update's", n, err)
		}
		es, err := tx.Edges(1, nil, 0)
		if err != nil || len(es) != 1 || string(es[0].Name) != "f1" {
			return fmt.Errorf("entries after a failed Update = %+v, %v", es, err)
		}
		if ss, err := tx.Chunk(70, 0); err != nil || len(ss) != 1 {
			return fmt.Errorf("chunk after a failed Update = %+v, %v", ss, err)
		}
		if v, err := tx.Counter("a"); err != nil || v != 1 {
			return fmt.Errorf("counter after a failed Update = %d, %v", v, err)
		}
		if ss, err := tx.DelSlices(0); err != nil || len(ss) != 1 {
			return fmt.Errorf("slice queue after a failed Update = %+v, %v", ss, err)
		}
		return nil
	})
}

// testWriteInView checks that a write in View fails it and changes
// nothing, whichever statement it is.
func testWriteInView(t *testing.T, st store.Store, _ Options) {
	writes := []struct {
		name string
		fn   func(tx store.Tx) error
	}{
		{"first", func(tx store.Tx) error { tx.SetCounter("v", 1); return nil }},
		{"after a read", func(tx store.Tx) error {
			if _, err := tx.Counter("v"); err != nil {
				return err
			}
			tx.SetCounter("v", 1)
			return nil
		}},
	}
	for _, w := range writes {
		if err := st.View(ctx, w.fn); err == nil {
			t.Errorf("a write in View (%s) succeeded", w.name)
		}
	}
	view(t, st, func(tx store.Tx) error {
		if v, err := tx.Counter("v"); err != nil || v != 0 {
			return fmt.Errorf("counter written in a View = %d, %v; want 0", v, err)
		}
		return nil
	})
}

// testConcurrentUpdates runs read-modify-writes of one counter from many
// goroutines on one handle: conflicts must be retried (Update runs the
// callback again), never lose an increment.
func testConcurrentUpdates(t *testing.T, st store.Store, _ Options) {
	const workers, incs = 6, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers*incs)
	for range workers {
		wg.Go(func() {
			for range incs {
				errs <- st.Update(ctx, func(tx store.Tx) error {
					v, err := tx.Counter("n")
					if err != nil {
						return err
					}
					tx.SetCounter("n", v+1)
					return nil
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	view(t, st, func(tx store.Tx) error {
		if v, err := tx.Counter("n"); err != nil || v != workers*incs {
			return fmt.Errorf("counter = %d, %v after %d increments", v, err, workers*incs)
		}
		return nil
	})
}
