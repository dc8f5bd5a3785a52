package metatest

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// testCheck runs the cases of the whole-volume scans, fsck's checks and
// chunk compaction.
func testCheck(t *testing.T, ns newStoreFunc) {
	t.Run("Scans", func(t *testing.T) { testScans(t, ns) })
	t.Run("Clean", func(t *testing.T) { testCheckClean(t, ns) })
	t.Run("CleanWithTrash", func(t *testing.T) { testCheckTrash(t, ns) })
	t.Run("Damage", func(t *testing.T) { testCheckDamage(t, ns) })
	t.Run("CompactChunk", func(t *testing.T) { testCompactChunk(t, ns) })
	t.Run("RandomOpsStayClean", func(t *testing.T) { testCheckRandom(t, ns) })
}

// checkVolume is a small volume with every kind of record fsck looks at.
type checkVolume struct {
	c                 *meta.Session
	st                store.Store
	dir, sub          *meta.Attr
	file, linked, big *meta.Attr
	open              *meta.Attr // unlinked while open
	shared            meta.Slice // in file and, by copy_file_range, in linked
	slices            []meta.Slice
}

func newCheckVolume(t *testing.T, ns newStoreFunc, conf meta.Config) *checkVolume {
	t.Helper()
	st := openStore(t, ns)
	format(t, st, testFormat())
	v := &checkVolume{st: st, c: newClient(t, st, conf)}
	c := v.c
	v.dir = mkdir(t, c, meta.RootIno, "dir")
	v.sub = mkdir(t, c, v.dir.Ino, "sub")
	mk(t, root, c, v.sub.Ino, "link", store.TypeSymlink, 0o777)
	v.file = mkfile(t, c, v.dir.Ino, "file")
	v.shared = newSlice(t, c, 0, 5000)
	write(t, c, v.file.Ino, 0, v.shared)
	s2 := newSlice(t, c, 1000, 100)
	write(t, c, v.file.Ino, 0, s2)
	v.linked = mkfile(t, c, v.sub.Ino, "linked")
	if _, err := c.Link(root, v.linked.Ino, meta.RootIno, []byte("hardlink")); err != nil {
		t.Fatalf("link: %v", err)
	}
	if _, _, err := c.CopyFileRange(root, v.file.Ino, 2000, v.linked.Ino, 0, 500); err != nil {
		t.Fatalf("copy_file_range: %v", err)
	}
	v.big = mkfile(t, c, meta.RootIno, "big")
	s3 := newSlice(t, c, 0, 4096)
	write(t, c, v.big.Ino, 2, s3)
	truncate(t, c, v.big.Ino, 2*meta.ChunkSize+100)
	v.open = mkfile(t, c, meta.RootIno, "open")
	s4 := newSlice(t, c, 0, 10)
	write(t, c, v.open.Ino, 0, s4)
	if _, err := c.Open(root, v.open.Ino, syscall.O_RDWR); err != nil {
		t.Fatalf("open: %v", err)
	}
	wantErr(t, "unlink open file", c.Unlink(root, meta.RootIno, []byte("open")), 0)
	v.slices = []meta.Slice{v.shared, s2, s3, s4}
	return v
}

// check runs a full (or, with path, a subtree) check and returns the
// damage lines.
func (v *checkVolume) check(t *testing.T, path string) ([]string, *meta.CheckResult) {
	t.Helper()
	var got []string
	res, err := meta.Check(root, v.st, meta.CheckOptions{Path: path, OnDamage: func(d meta.Damage) {
		got = append(got, d.String())
	}})
	if err != nil {
		t.Fatalf("check %q: %v", path, err)
	}
	if int(res.Damages) != len(got) {
		t.Errorf("check counts %d problems, reported %d", res.Damages, len(got))
	}
	return got, res
}

func (v *checkVolume) update(t *testing.T, fn func(tx store.Tx) error) {
	t.Helper()
	if err := v.st.Update(root, fn); err != nil {
		t.Fatalf("inject: %v", err)
	}
}

func testScans(t *testing.T, ns newStoreFunc) {
	v := newCheckVolume(t, ns, meta.Config{})
	nodes, edges, chunks, symlinks := map[meta.Ino]bool{}, 0, 0, 0
	var cursor []byte
	pages := 0
	for {
		var page []store.InodeRecord
		err := v.st.View(root, func(tx store.Tx) error {
			var err error
			page, cursor, err = tx.ScanInodes(cursor, 3)
			return err
		})
		if err != nil {
			t.Fatalf("scan inodes: %v", err)
		}
		// Engines that list their keyspace (redis) take the limit as a
		// hint; a page still stays near it.
		if len(page) > 10 {
			t.Fatalf("page of %d records, limit 3", len(page))
		}
		pages++
		for _, r := range page {
			switch {
			case r.Err != nil:
				t.Errorf("record of %d: %v", r.Ino, r.Err)
			case r.Node != nil:
				if r.Node.Ino != r.Ino || nodes[r.Ino] {
					t.Errorf("node %d seen twice or under inode %d", r.Node.Ino, r.Ino)
				}
				nodes[r.Ino] = true
			case r.Edge != nil:
				edges++
			case r.Chunk != nil:
				chunks++
			case r.Symlink != nil:
				symlinks++
			}
		}
		if cursor == nil {
			break
		}
	}
	// root dir sub link file linked big open = 8 nodes; entries: dir sub
	// link file linked hardlink big = 7; chunks: file 0, linked 0, big 2,
	// open 0 = 4.
	if len(nodes) != 8 || edges != 7 || chunks != 4 || symlinks != 1 {
		t.Errorf("scan found %d nodes, %d entries, %d chunks, %d symlinks; want 8, 7, 4, 1", len(nodes), edges, chunks, symlinks)
	}
	if pages < 5 {
		t.Errorf("scan of 20 records in pages of 3 took %d pages", pages)
	}
	for _, ino := range []meta.Ino{meta.RootIno, v.dir.Ino, v.file.Ino, v.open.Ino} {
		if !nodes[ino] {
			t.Errorf("scan missed inode %d", ino)
		}
	}
	// Pages may come back short, even empty, before the end.
	var refs []store.SliceRefRecord
	for cursor = nil; ; {
		var page []store.SliceRefRecord
		if err := v.st.View(root, func(tx store.Tx) error {
			var err error
			page, cursor, err = tx.ScanSliceRefs(cursor, 10)
			return err
		}); err != nil {
			t.Fatalf("scan slice refs: %v", err)
		}
		refs = append(refs, page...)
		if cursor == nil {
			break
		}
	}
	if len(refs) != 1 || refs[0].Id != v.shared.Id || refs[0].Extra != 1 {
		t.Errorf("slice refs %+v, want one of slice %d with 1 extra", refs, v.shared.Id)
	}

	// Deletion queues page too.
	for i := range 5 {
		f := mkfile(t, v.c, meta.RootIno, "del"+string(rune('a'+i)))
		write(t, v.c, f.Ino, 0, newSlice(t, v.c, 0, 10))
		wantErr(t, "unlink", v.c.Unlink(root, meta.RootIno, []byte("del"+string(rune('a'+i)))), 0)
	}
	if err := v.c.FlushDeletions(root); err != nil {
		t.Fatalf("flush: %v", err)
	}
	pending, err := meta.PendingSlices(root, v.st)
	if err != nil || len(pending) != 5 {
		t.Errorf("pending slices %v, %v; want 5", pending, err)
	}
	var got []store.Slice
	cursor = nil
	for {
		var page []store.Slice
		if err := v.st.View(root, func(tx store.Tx) error {
			var err error
			page, cursor, err = tx.ScanDelSlices(cursor, 2)
			return err
		}); err != nil {
			t.Fatalf("scan deleted slices: %v", err)
		}
		got = append(got, page...)
		if cursor == nil {
			break
		}
	}
	if len(got) != 5 {
		t.Errorf("paged scan of deleted slices found %d, want 5", len(got))
	}
}

func testCheckClean(t *testing.T, ns newStoreFunc) {
	v := newCheckVolume(t, ns, meta.Config{})
	got, res := v.check(t, "")
	if len(got) != 0 {
		t.Fatalf("clean volume has problems:\n%s", strings.Join(got, "\n"))
	}
	if res.Inodes != 8 {
		t.Errorf("checked %d inodes, want 8", res.Inodes)
	}
	for _, s := range v.slices {
		if _, ok := res.Slices[meta.SliceKey{Id: s.Id, Size: s.Size}]; !ok {
			t.Errorf("slice %d missing from the referenced slices", s.Id)
		}
	}
	if u := res.Slices[meta.SliceKey{Id: v.shared.Id, Size: v.shared.Size}]; u.Refs != 2 {
		t.Errorf("shared slice named %d times, want 2", u.Refs)
	}
	refs, err := meta.ReferencedSlices(root, v.st, nil)
	if err != nil {
		t.Fatalf("referenced slices: %v", err)
	}
	if len(refs) != len(res.Slices) {
		t.Errorf("ReferencedSlices found %d slices, Check %d", len(refs), len(res.Slices))
	}
	got, res = v.check(t, "/dir")
	if len(got) != 0 {
		t.Fatalf("clean subtree has problems:\n%s", strings.Join(got, "\n"))
	}
	// dir sub link file linked
	if res.Inodes != 5 || len(res.Slices) != 2 {
		t.Errorf("subtree check: %d inodes, %d slices; want 5, 2", res.Inodes, len(res.Slices))
	}
	if _, err := meta.Check(root, v.st, meta.CheckOptions{Path: "/nope", OnDamage: func(meta.Damage) {}}); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("check of a missing path: %v, want ENOENT", err)
	}
	if p := meta.InodePath(root, v.st, v.file.Ino); p != "/dir/file" {
		t.Errorf("path of /dir/file: %q", p)
	}

	// An unfinished truncation leaves chunks past the end on purpose.
	for idx := range uint32(40) {
		write(t, v.c, v.big.Ino, idx+3, newSlice(t, v.c, 0, 10))
	}
	// A client that leaves the leftovers to its background loop, closed
	// before that loop first runs.
	bg, err := meta.NewSession(root, v.st, meta.Config{TruncateSyncBatches: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bg.SetAttr(root, v.big.Ino, meta.SetSize, &meta.Attr{Length: 10})
	if cerr := bg.Close(root); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("truncate: %v", err)
	}
	if ss, err := v.c.ReadChunk(root, v.big.Ino, 42); err != nil || len(ss) == 0 {
		// Another client's background loop may have finished it.
		t.Logf("the truncation is finished already (%v); the leftover case is not exercised", err)
	}
	if got, _ := v.check(t, ""); len(got) != 0 {
		t.Fatalf("problems with a truncation under way:\n%s", strings.Join(got, "\n"))
	}
}

// testCheckTrash checks that files in the trash are neither damage nor
// unreferenced data.
func testCheckTrash(t *testing.T, ns newStoreFunc) {
	st := openStore(t, ns)
	f := testFormat()
	f.TrashDays = 1
	format(t, st, f)
	c := newClient(t, st, meta.Config{})
	d := mkdir(t, c, meta.RootIno, "d")
	file := mkfile(t, c, d.Ino, "f")
	s := newSlice(t, c, 0, 100)
	write(t, c, file.Ino, 0, s)
	wantErr(t, "unlink into the trash", c.Unlink(root, d.Ino, []byte("f")), 0)
	var got []string
	if _, err := meta.Check(root, st, meta.CheckOptions{OnDamage: func(d meta.Damage) { got = append(got, d.String()) }}); err != nil {
		t.Fatalf("check: %v", err)
	}
	if len(got) != 0 {
		t.Fatalf("volume with a trash has problems:\n%s", strings.Join(got, "\n"))
	}
	refs, err := meta.ReferencedSlices(root, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := refs[meta.SliceKey{Id: s.Id, Size: s.Size}]; !ok {
		t.Fatalf("slice of a file in the trash is not referenced: gc would delete it")
	}
	if p := meta.InodePath(root, st, file.Ino); !strings.HasPrefix(p, "/"+meta.TrashName+"/") {
		t.Errorf("path of a file in the trash: %q", p)
	}
}

func testCheckDamage(t *testing.T, ns newStoreFunc) {
	cases := []struct {
		name   string
		path   string // "" for the whole volume
		inject func(v *checkVolume, tx store.Tx) error
		want   []string // substrings, one damage line each
	}{
		{"entry of a missing inode", "", func(v *checkVolume, tx store.Tx) error {
			tx.SetEdge(v.dir.Ino, store.Edge{Name: []byte("ghost"), Ino: 999999, Type: store.TypeFile})
			return nil
		}, []string{"inode 999999: missing, but named by 1 entries"}},
		{"entry of a missing inode in the subtree", "/dir", func(v *checkVolume, tx store.Tx) error {
			tx.SetEdge(v.sub.Ino, store.Edge{Name: []byte("ghost"), Ino: 999999, Type: store.TypeFile})
			return nil
		}, []string{"inode 999999: missing, but named by an entry"}},
		{"damage outside the subtree", "/dir", func(v *checkVolume, tx store.Tx) error {
			tx.SetEdge(meta.RootIno, store.Edge{Name: []byte("ghost"), Ino: 999999, Type: store.TypeFile})
			return nil
		}, nil},
		{"wrong entry type", "", func(v *checkVolume, tx store.Tx) error {
			tx.SetEdge(v.dir.Ino, store.Edge{Name: []byte("file"), Ino: v.file.Ino, Type: store.TypeDir})
			return nil
		}, []string{"gives type 2", "directory link count 3, want 4"}},
		{"file link count", "", func(v *checkVolume, tx store.Tx) error {
			return setNode(tx, v.file.Ino, func(n *store.Node) { n.Nlink = 3 })
		}, []string{"link count 3, but 1 entries"}},
		{"directory link count", "/dir", func(v *checkVolume, tx store.Tx) error {
			return setNode(tx, v.sub.Ino, func(n *store.Node) { n.Nlink = 7 })
		}, []string{"directory link count 7, want 2"}},
		{"directory parent", "", func(v *checkVolume, tx store.Tx) error {
			return setNode(tx, v.sub.Ino, func(n *store.Node) { n.Parent = meta.RootIno })
		}, []string{"directory parent is 1"}},
		{"file parent", "", func(v *checkVolume, tx store.Tx) error {
			return setNode(tx, v.file.Ino, func(n *store.Node) { n.Parent = v.sub.Ino })
		}, []string{"parent is"}},
		{"orphan inode", "", func(v *checkVolume, tx store.Tx) error {
			tx.DeleteEdge(v.dir.Ino, []byte("file"))
			return nil
		}, []string{"no entry names it (link count 1)"}},
		{"chunk of a missing inode", "", func(v *checkVolume, tx store.Tx) error {
			tx.SetChunk(888888, 0, []store.Slice{{Id: 77, Size: 10, Len: 10}})
			return nil
		}, []string{"inode 888888: no attribute record, but 1 chunk records"}},
		{"slice past its size", "", func(v *checkVolume, tx store.Tx) error {
			tx.AppendSlice(v.file.Ino, 0, store.Slice{Pos: 0, Id: 4242, Size: 100, Off: 50, Len: 100})
			return nil
		}, []string{"reads 50+100 of a 100-byte slice"}},
		{"slice out of the chunk", "/dir", func(v *checkVolume, tx store.Tx) error {
			tx.AppendSlice(v.file.Ino, 0, store.Slice{Pos: meta.ChunkSize - 10, Id: 4243, Size: 100, Len: 100})
			return nil
		}, []string{"leaves the chunk"}},
		{"data past the end", "", func(v *checkVolume, tx store.Tx) error {
			return setNode(tx, v.big.Ino, func(n *store.Node) { n.Length = 100 })
		}, []string{"chunk 2 holds data past the end"}},
		{"symlink target missing", "", func(v *checkVolume, tx store.Tx) error {
			e, err := tx.Edge(v.sub.Ino, []byte("link"))
			tx.DeleteSymlink(e.Ino)
			return err
		}, []string{"symlink without a target record"}},
		{"reference count of an unreferenced slice", "", func(v *checkVolume, tx store.Tx) error {
			tx.SetSliceRef(5555, 10, 2)
			return nil
		}, []string{"slice 5555 (10 bytes): reference count record (2 extra) but no chunk names it"}},
		{"wrong reference count", "", func(v *checkVolume, tx store.Tx) error {
			tx.SetSliceRef(v.shared.Id, v.shared.Size, 3)
			return nil
		}, []string{"2 chunk entries name it, but its reference count says 4"}},
		{"referenced slice queued for deletion", "", func(v *checkVolume, tx store.Tx) error {
			tx.SetDelSlice(v.shared.Id, v.shared.Size, true)
			return nil
		}, []string{"is queued for deletion but chunk 0 still names it"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := newCheckVolume(t, ns, meta.Config{})
			v.update(t, func(tx store.Tx) error { return tc.inject(v, tx) })
			got, _ := v.check(t, tc.path)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for _, w := range tc.want {
				found := false
				for _, g := range got {
					found = found || strings.Contains(g, w)
				}
				if !found {
					t.Errorf("no problem mentions %q:\n%s", w, strings.Join(got, "\n"))
				}
			}
		})
	}
}

// setNode changes the stored attributes of ino with fn.
func setNode(tx store.Tx, ino meta.Ino, fn func(*store.Node)) error {
	n, err := tx.Node(ino)
	if err != nil {
		return err
	}
	fn(n)
	tx.SetNode(n)
	return nil
}

func testCompactChunk(t *testing.T, ns newStoreFunc) {
	rec := &deleteRecorder{ids: map[uint64]uint32{}}
	v := newCheckVolume(t, ns, meta.Config{DeleteSlice: rec.delete})
	c := v.c
	clean := func(when string) {
		t.Helper()
		if got, _ := v.check(t, ""); len(got) != 0 {
			t.Fatalf("problems %s:\n%s", when, strings.Join(got, "\n"))
		}
	}
	old, err := c.ReadChunk(root, v.file.Ino, 0)
	if err != nil || len(old) != 2 {
		t.Fatalf("read chunk: %v %v", old, err)
	}
	repl := newSlice(t, c, 0, 5000)

	// A list that changed since it was read is not replaced.
	stale := []meta.Slice{old[1]}
	if _, err := c.CompactChunk(root, v.file.Ino, 0, stale, []meta.Slice{repl}); !errors.Is(err, meta.ErrChunkChanged) {
		t.Fatalf("compact with a stale list: %v, want ErrChunkChanged", err)
	}
	wantChunk(t, c, v.file.Ino, 0, old...)
	if _, err := c.CompactChunk(root, v.dir.Ino, 0, old, []meta.Slice{repl}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("compact a directory: %v, want EINVAL", err)
	}
	// A replacement may keep entries of the old list, not invent them.
	forged := old[1]
	forged.Len--
	if _, err := c.CompactChunk(root, v.file.Ino, 0, old, []meta.Slice{forged}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("compact into a changed entry of an old slice: %v, want EINVAL", err)
	}
	wantChunk(t, c, v.file.Ino, 0, old...)

	released, err := c.CompactChunk(root, v.file.Ino, 0, old, []meta.Slice{repl})
	if err != nil {
		t.Fatalf("compact: %v", err)
	}
	wantChunk(t, c, v.file.Ino, 0, repl)
	// The private slice is released; the one shared with "linked" is not.
	if len(released) != 1 || released[0] != old[1] {
		t.Fatalf("released %+v, want only %+v (%+v is still named by another file)", released, old[1], v.shared)
	}
	if err := c.DeleteReleased(root, released); err != nil {
		t.Fatalf("delete released: %v", err)
	}
	if !rec.has(old[1].Id) || rec.has(v.shared.Id) {
		t.Fatalf("deleted %v: want %d and not %d", rec.deleted(), old[1].Id, v.shared.Id)
	}
	dels, err := meta.ReferencedSlices(root, v.st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := dels[meta.SliceKey{Id: old[1].Id, Size: old[1].Size}]; ok {
		t.Errorf("released slice %d is still referenced", old[1].Id)
	}
	clean("after compaction")

	// Slices appended after the list was read stay on top of the
	// replacement; entries of one new slice at several offsets are one
	// reference each, and entries nothing shows can be dropped.
	old, _ = c.ReadChunk(root, v.file.Ino, 0)
	late := newSlice(t, c, 100, 10)
	write(t, c, v.file.Ino, 0, late)
	split := newSlice(t, c, 0, 0)
	split.Size = 4000
	a, b := split, split
	a.Len = 1000
	b.Pos, b.Off, b.Len = 3000, 1000, 2000
	kept := old[0]
	kept.Pos, kept.Off, kept.Len = 1000, 1000, 2000 // not one of old's entries
	if _, err := c.CompactChunk(root, v.file.Ino, 0, old, []meta.Slice{a, kept, b}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("compact keeping part of an old entry: %v, want EINVAL", err)
	}
	released, err = c.CompactChunk(root, v.file.Ino, 0, old, []meta.Slice{old[0], a, b})
	if err != nil {
		t.Fatalf("compact under a later write: %v", err)
	}
	if len(released) != 0 {
		t.Errorf("released %+v though every slice is kept", released)
	}
	wantChunk(t, c, v.file.Ino, 0, old[0], a, b, late)
	clean("after a partial compaction")
	released, err = c.CompactChunk(root, v.file.Ino, 0, []meta.Slice{old[0], a, b}, []meta.Slice{a})
	if err != nil {
		t.Fatalf("compact dropping entries: %v", err)
	}
	if len(released) != 1 || released[0] != old[0] {
		t.Errorf("released %+v, want %+v alone (an entry of the split slice remains)", released, old[0])
	}
	wantChunk(t, c, v.file.Ino, 0, a, late)
	clean("after dropping one entry of a slice")
	truncate(t, c, v.file.Ino, 0)
	if err := c.FlushDeletions(root); err != nil {
		t.Fatal(err)
	}
	if !rec.has(split.Id) || !rec.has(late.Id) {
		t.Errorf("slices of a truncated file not deleted: %v", rec.deleted())
	}
	clean("after truncating the compacted file")

	// A chunk of holes only compacts to nothing.
	truncate(t, c, v.big.Ino, 0)
	truncate(t, c, v.big.Ino, 1000)
	wantErr(t, "punch", c.Fallocate(root, v.big.Ino, meta.FallocPunchHole|meta.FallocKeepSize, 0, 1000), 0)
	holes, _ := c.ReadChunk(root, v.big.Ino, 0)
	if len(holes) == 0 {
		t.Fatal("no hole slices to compact")
	}
	if _, err := c.CompactChunk(context.Background(), v.big.Ino, 0, holes, nil); err != nil {
		t.Fatalf("compact holes: %v", err)
	}
	wantChunk(t, c, v.big.Ino, 0)
}

// testCheckRandom runs random operations of every kind that changes
// records fsck looks at, then checks that the volume is clean: fsck must
// not report what the core itself does.
func testCheckRandom(t *testing.T, ns newStoreFunc) {
	st := openStore(t, ns)
	format(t, st, testFormat())
	c := newClient(t, st, meta.Config{})
	seed := modelSeed(t)
	rng := rand.New(rand.NewPCG(seed, 3))
	dirs := []meta.Ino{meta.RootIno}
	wrote := 0
	names := []string{"a", "b", "c", "d", "e"}
	pick := func() (meta.Ino, string) { return dirs[rng.IntN(len(dirs))], names[rng.IntN(len(names))] }
	var files []meta.Ino // every file made; some are gone by now
	file := func() meta.Ino {
		if len(files) == 0 {
			return 0
		}
		return files[rng.IntN(len(files))]
	}
	for i := 0; i < 400; i++ {
		d, n := pick()
		switch rng.IntN(11) {
		case 0:
			if a, err := c.Mknod(root, d, []byte(n), meta.NewNode{Type: store.TypeDir, Mode: 0o755}); err == nil {
				dirs = append(dirs, a.Ino)
			}
		case 1, 2:
			if a, err := c.Mknod(root, d, []byte(n), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err == nil {
				files = append(files, a.Ino)
			}
		case 3:
			if f := file(); f != 0 {
				pos := uint32(rng.IntN(10000))
				if _, err := Write(root, c, f, uint32(rng.IntN(2)), newSlice(t, c, pos, uint32(1+rng.IntN(5000)))); err == nil {
					wrote++
				}
			}
		case 4:
			if f := file(); f != 0 {
				c.Link(root, f, d, []byte(n))
			}
		case 5:
			c.Unlink(root, d, []byte(n))
		case 6:
			d2, n2 := pick()
			c.Rename(root, d, []byte(n), d2, []byte(n2), uint32(rng.IntN(3)))
		case 7:
			if f := file(); f != 0 {
				c.SetAttr(root, f, meta.SetSize, &meta.Attr{Length: uint64(rng.IntN(2 * meta.ChunkSize))})
			}
		case 8:
			if f, g := file(), file(); f != 0 && g != 0 {
				c.CopyFileRange(root, f, uint64(rng.IntN(8000)), g, uint64(rng.IntN(8000)), uint64(rng.IntN(8000)))
			}
		case 9:
			if a, err := c.Lookup(root, d, []byte(n)); err == nil && a.Type == store.TypeFile {
				if _, err := c.Open(root, a.Ino, syscall.O_RDWR); err == nil {
					c.Unlink(root, d, []byte(n)) // may or may not be its last name
				}
			}
		case 10:
			c.Rmdir(root, d, []byte(n))
			c.Fallocate(root, file(), meta.FallocPunchHole|meta.FallocKeepSize, uint64(rng.IntN(5000)), 100)
		}
	}
	// fsck reads the volume in many transactions and wants it idle: the
	// client's background deletions, running beside it, would show a
	// chunk dropped between two of its reads as a problem. So the client
	// stops (ending its session deletes the files it kept open), and a
	// second one runs the deletion queue and stops before the last check.
	if err := c.Close(root); err != nil {
		t.Fatalf("close: %v", err)
	}
	for round, what := range []string{"after random operations", "after the deletion queue ran"} {
		if round == 1 {
			c := newClient(t, st, meta.Config{})
			if err := c.FlushDeletions(root); err != nil {
				t.Fatalf("flush: %v", err)
			}
			if err := c.Close(root); err != nil {
				t.Fatalf("close: %v", err)
			}
		}
		var got []string
		res, err := meta.Check(root, st, meta.CheckOptions{OnDamage: func(d meta.Damage) { got = append(got, d.String()) }})
		if err != nil {
			t.Fatalf("check: %v", err)
		}
		if len(got) > 0 {
			t.Fatalf("%s (seed %d): %d problems:\n%s", what, seed, len(got), strings.Join(got, "\n"))
		}
		if res.Inodes < 5 || wrote < 5 {
			t.Fatalf("%s (seed %d): only %d inodes and %d writes; the operations did too little", what, seed, res.Inodes, wrote)
		}
	}
}
