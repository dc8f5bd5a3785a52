package compact

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/file"
)

const blockSize = 64 << 10

// volume is a real volume for tests: meta over the in-memory engine and
// blocks as files in a temporary directory.
type volume struct {
	ctx context.Context
	st  store.Store
	m   *meta.Session
	obj object.Store
	cs  *chunk.Store
}

func newVolume(t *testing.T) *volume {
	t.Helper()
	ctx := context.Background()
	st := kvstore.New(mem.New(t.Name()))
	if _, err := meta.FormatVolume(ctx, st, &meta.Format{Name: "test", UUID: "u", Storage: "file", Bucket: "b",
		BlockSize: blockSize >> 10}); err != nil {
		t.Fatalf("format: %v", err)
	}
	obj, err := file.New(t.TempDir())
	if err != nil {
		t.Fatalf("object store: %v", err)
	}
	cs := chunk.New(obj, chunk.Config{BlockSize: blockSize})
	m, err := meta.NewSession(ctx, st, meta.Config{DeleteSlice: cs.Delete})
	if err != nil {
		t.Fatalf("meta client: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Errorf("close meta client: %v", err)
		}
	})
	return &volume{ctx: ctx, st: st, m: m, obj: obj, cs: cs}
}

// fragmented creates name in dir and writes size bytes in n overlapping
// pieces, each its own slice, leaving a hole at [hole, hole+4096). It
// returns the inode and the expected content.
func (v *volume) fragmented(t *testing.T, dir meta.Ino, name string, size, n int, hole int, seed uint64) (meta.Ino, []byte) {
	t.Helper()
	a, err := v.m.Mknod(v.ctx, dir, []byte(name), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	want := make([]byte, size)
	rng := rand.New(rand.NewPCG(seed, 1))
	w := v.cs.NewWriter(a.Ino, metatest.Committer{Session: v.m})
	for i := 0; i < n; i++ {
		off := rng.IntN(size - 1)
		p := make([]byte, 1+rng.IntN(min(size-off, 3*blockSize)))
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		if hole >= 0 && off < hole+4096 && off+len(p) > hole {
			continue // keep the hole
		}
		if err := w.Write(v.ctx, p, uint64(off)); err != nil {
			t.Fatalf("write: %v", err)
		}
		if err := w.Flush(v.ctx); err != nil { // one slice per write
			t.Fatalf("flush: %v", err)
		}
		copy(want[off:], p)
	}
	// The first and last bytes make the data span the whole length.
	want[0] = 1
	for _, off := range []int{0, size - 1} {
		if err := w.Write(v.ctx, want[off:off+1], uint64(off)); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	if err := w.Flush(v.ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	return a.Ino, want
}

// read returns the committed content of ino through src and cs.
func read(t *testing.T, ctx context.Context, cs *chunk.Store, src chunk.SliceSource, ino meta.Ino, n int) ([]byte, error) {
	t.Helper()
	p := make([]byte, n)
	err := cs.ReadFile(ctx, src, ino, p, 0)
	return p, err
}

func (v *volume) slices(t *testing.T, ino meta.Ino, idx uint32) []meta.Slice {
	t.Helper()
	ss, err := v.m.ReadChunk(v.ctx, ino, idx)
	if err != nil {
		t.Fatalf("read chunk: %v", err)
	}
	return ss
}

// objects returns the keys of the stored blocks.
func (v *volume) objects(t *testing.T) []string {
	t.Helper()
	infos, err := v.obj.List(v.ctx, "chunks/", "", 0)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	var keys []string
	for _, i := range infos {
		keys = append(keys, i.Key)
	}
	return keys
}

func (v *volume) flushDeletions(t *testing.T) {
	t.Helper()
	if err := v.m.FlushDeletions(v.ctx); err != nil {
		t.Fatalf("flush deletions: %v", err)
	}
}

func TestPolicy(t *testing.T) {
	const mib = 1 << 20
	sl := func(id uint64, pos, size uint32) meta.Slice {
		return meta.Slice{Pos: pos, Id: id, Size: size, Len: size}
	}
	small := func(n int, l uint32) []meta.Slice {
		ss := make([]meta.Slice, n)
		for i := range ss {
			ss[i] = meta.Slice{Id: uint64(i + 1), Size: l, Len: l}
		}
		return ss
	}
	// One slice at two places: what a partial rewrite leaves.
	split := []meta.Slice{{Pos: 1 << 20, Id: 99, Size: 2000, Off: 0, Len: 1000}, {Pos: 2 << 20, Id: 99, Size: 2000, Off: 1000, Len: 1000}}
	tests := []struct {
		name    string
		p       Policy
		ss      []meta.Slice
		due     bool
		keep    []uint64 // ids of the kept entries, in order
		copy    []uint64 // ids whose bytes are copied
		dropped int
		waste   int64
	}{
		{name: "empty"},
		{name: "one slice", ss: []meta.Slice{sl(1, 0, 100)}, keep: []uint64{1}},
		{name: "covered entry dropped", ss: []meta.Slice{sl(1, 10, 50), sl(2, 0, 100)}, due: true, keep: []uint64{2}, dropped: 1, waste: 50},
		{name: "waste within bounds", ss: []meta.Slice{sl(1, 0, 64*mib), sl(2, 0, 4*mib)}, keep: []uint64{1, 2}, waste: 4 * mib},
		{name: "waste past bounds", ss: []meta.Slice{sl(1, 0, 64*mib), sl(2, 0, 16*mib)}, due: true,
			keep: []uint64{2}, copy: []uint64{1}, waste: 16 * mib},
		{name: "least shown first", ss: []meta.Slice{sl(1, 0, 64*mib), sl(2, 0, 8*mib), sl(3, 0, 7*mib), sl(4, 40*mib, 2*mib)},
			p: Policy{Waste: 0.1, MinWaste: 1, MaxCopy: 4 * mib}, due: true, keep: []uint64{1, 3, 4}, copy: []uint64{2}, waste: 17 * mib},
		{name: "until the waste is halved", ss: []meta.Slice{sl(1, 0, 64*mib), sl(2, 0, 8*mib), sl(3, 0, 7*mib), sl(4, 40*mib, 2*mib)},
			p: Policy{Waste: 0.1, MinWaste: 1, MaxShown: 1}, due: true, keep: []uint64{3, 4}, copy: []uint64{1, 2}, waste: 17 * mib},
		{name: "costly slice left for later", ss: []meta.Slice{sl(1, 0, 64*mib), sl(2, 0, 8*mib), sl(3, 0, 7*mib), sl(4, 40*mib, 2*mib)},
			p: Policy{Waste: 0.1, MinWaste: 1}, due: true, keep: []uint64{1, 3, 4}, copy: []uint64{2}, waste: 17 * mib},
		{name: "copy bounded", ss: []meta.Slice{sl(1, 0, 64*mib), sl(2, 0, 16*mib)}, p: Policy{MaxCopy: mib},
			keep: []uint64{1, 2}, waste: 16 * mib},
		{name: "hole kept", ss: []meta.Slice{sl(1, 0, 64*mib), sl(2, 0, 16*mib), {Pos: 100, Len: 100}}, due: true,
			keep: []uint64{2, 0}, copy: []uint64{1}, waste: 16*mib + 100},
		{name: "entries of one slice", ss: split, keep: []uint64{99, 99}},
		{name: "entries of one slice count once", ss: append(spread(49, 100), split...), keep: append(seq(1, 49), 99, 99)},
		{name: "many small", ss: small(51, 100), due: true, copy: []uint64{51}, dropped: 50, waste: 50 * 100},
		{name: "few small", ss: []meta.Slice{sl(1, 0, 100), sl(2, 200, 100)}, keep: []uint64{1, 2}},
		{name: "too many large", ss: spread(200, mib/4), due: true, copy: seq(1, 200)},
		{name: "many large", ss: spread(150, mib/4), keep: seq(1, 150)},
		{name: "tuned", p: Policy{MaxSlices: 2}, ss: []meta.Slice{sl(1, 0, 100), sl(2, 200, 100), {Pos: 50, Len: 10}}, due: true, copy: []uint64{1, 2}, waste: 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := tc.p.Plan(tc.ss)
			var keep, copied []uint64
			for _, s := range plan.Keep {
				keep = append(keep, s.Id)
			}
			seen := map[uint64]bool{}
			for _, g := range plan.Copy {
				if !seen[g.Slice.Id] {
					seen[g.Slice.Id] = true
					copied = append(copied, g.Slice.Id)
				}
			}
			slices.Sort(copied)
			if plan.Due() != tc.due || !slices.Equal(keep, tc.keep) || !slices.Equal(copied, tc.copy) ||
				plan.Dropped != tc.dropped || plan.Waste != tc.waste {
				t.Errorf("Plan: due %v, keep %v, copy %v, dropped %d, waste %d\nwant due %v, keep %v, copy %v, dropped %d, waste %d",
					plan.Due(), keep, copied, plan.Dropped, plan.Waste, tc.due, tc.keep, tc.copy, tc.dropped, tc.waste)
			}
			if plan.Left > plan.Waste || !plan.Due() && plan.Left != plan.Waste {
				t.Errorf("Plan leaves %d of %d bytes wasted", plan.Left, plan.Waste)
			}
			// The plan reads what the list reads.
			checkPlan(t, tc.ss, plan)
		})
	}
}

func seq(from, to uint64) []uint64 {
	var out []uint64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// spread returns n slices of size bytes side by side (and past a chunk,
// cut to fit), each showing all it stores.
func spread(n int, size uint32) []meta.Slice {
	ss := make([]meta.Slice, n)
	step := uint32(meta.ChunkSize / n)
	for i := range ss {
		l := min(size, step)
		ss[i] = meta.Slice{Pos: uint32(i) * step, Id: uint64(i + 1), Size: l, Len: l}
	}
	return ss
}

// checkPlan fails t unless carrying plan out (kept entries, then the
// copied pieces as entries of one new slice) shows, at every byte of the
// chunk, the same slice byte as list.
func checkPlan(t *testing.T, list []meta.Slice, plan Plan) {
	t.Helper()
	const newID = 1 << 60
	entries, _ := layout(newID, plan.Copy)
	repl := append(append([]meta.Slice(nil), plan.Keep...), entries...)
	src := map[uint64]meta.Segment{} // new slice offset -> source
	var off uint32
	for _, g := range plan.Copy {
		src[uint64(off)] = g
		off += g.End - g.Start
	}
	type origin struct {
		id  uint64
		off uint32
	}
	at := func(segs []meta.Segment, pos uint32) origin {
		for _, g := range segs {
			if pos >= g.Start && pos < g.End {
				if g.Slice == nil || g.Slice.Id == 0 {
					return origin{}
				}
				return origin{g.Slice.Id, g.SliceOff() + pos - g.Start}
			}
		}
		return origin{}
	}
	want, got := meta.Visible(list, 0, meta.ChunkSize), meta.Visible(repl, 0, meta.ChunkSize)
	// Sample the edges of every segment of both.
	var points []uint32
	for _, g := range append(append([]meta.Segment(nil), want...), got...) {
		points = append(points, g.Start, g.End-1)
	}
	for _, p := range points {
		o := at(got, p)
		if o.id == newID { // map back to the piece it was copied from
			for start, g := range src {
				if uint64(o.off) >= start && uint64(o.off) < start+uint64(g.End-g.Start) {
					o = origin{g.Slice.Id, g.SliceOff() + o.off - uint32(start)}
					break
				}
			}
		}
		if w := at(want, p); o != w {
			t.Fatalf("byte %d reads %+v after the plan, %+v before", p, o, w)
		}
	}
}

// stored returns the bytes of the blocks in the bucket.
func (v *volume) stored(t *testing.T) int64 {
	t.Helper()
	infos, err := v.obj.List(v.ctx, "chunks/", "", 0)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	var n int64
	for _, i := range infos {
		n += i.Size
	}
	return n
}

// oneSlice fails t unless every stored entry of ss names one slice, and
// returns it.
func oneSlice(t *testing.T, ss []meta.Slice) meta.Slice {
	t.Helper()
	var id meta.Slice
	for _, s := range ss {
		if s.Id == 0 {
			continue
		}
		if id.Id != 0 && s.Id != id.Id {
			t.Fatalf("entries of several slices after a full compaction: %+v", ss)
		}
		id = s
	}
	return id
}

func TestFileContentAndCleanup(t *testing.T) {
	v := newVolume(t)
	const size = 5*blockSize + 1234
	ino, want := v.fragmented(t, meta.RootIno, "f", size, 60, 2*blockSize+100, 1)
	before := v.slices(t, ino, 0)
	if len(before) < 30 {
		t.Fatalf("only %d slices written", len(before))
	}
	if got, err := read(t, v.ctx, v.cs, v.m, ino, size); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("content before compaction differs (%v)", err)
	}
	// Below the thresholds only entries nothing shows go.
	lax := New(v.m, v.cs, Config{Policy: &Policy{MaxSlices: 1000, MinSlices: 1000}})
	st, err := lax.ChunkIfDue(v.ctx, ino, 0)
	if err != nil || st.Bytes != 0 || len(v.slices(t, ino, 0)) != len(before)-st.Dropped {
		t.Fatalf("ChunkIfDue below the threshold: %+v %v", st, err)
	}
	if got, err := read(t, v.ctx, v.cs, v.m, ino, size); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("content after dropping hidden entries differs (%v)", err)
	}
	before = v.slices(t, ino, 0)
	c := New(v.m, v.cs, Config{})
	st, err = c.File(v.ctx, ino)
	if err != nil {
		t.Fatalf("compact file: %v", err)
	}
	after := v.slices(t, ino, 0)
	s := oneSlice(t, after)
	if st.Chunks != 1 || st.Slices != len(before) || st.Bytes != int64(s.Size) {
		t.Fatalf("after compaction: %+v, stats %+v", after, st)
	}
	// The hole is not stored.
	if s.Size > size-4096 {
		t.Errorf("compacted slice stores %d bytes of a %d-byte file with a 4 KiB hole", s.Size, size)
	}
	// A second pass finds nothing to do.
	if st, err := c.File(v.ctx, ino); err != nil || st.Chunks != 0 {
		t.Errorf("second compaction: %+v %v", st, err)
	}
	// Read through a fresh chunk store, so no cached block hides a
	// missing one. The replaced slices are gone without a deletion round.
	fresh := chunk.New(v.obj, chunk.Config{BlockSize: blockSize})
	if got, err := read(t, v.ctx, fresh, v.m, ino, size); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("content after compaction differs (%v)", err)
	}
	keys := v.objects(t)
	stray := ""
	for _, k := range keys {
		if !strings.Contains(k, "/"+strconv.FormatUint(s.Id, 10)+"_") {
			stray = k
		}
	}
	if nb := (int(s.Size) + blockSize - 1) / blockSize; len(keys) != nb || stray != "" {
		t.Errorf("after compaction the bucket holds %d objects (e.g. %q), want only the %d blocks of slice %d",
			len(keys), stray, nb, s.Id)
	}
}

// staleSource replays the slice lists a reader read before a compaction,
// as another mount does until its next open. When gate is set, ReadChunk
// waits for it to close first.
type staleSource struct {
	lists   map[uint32][]meta.Slice
	entered chan struct{}
	gate    chan struct{}
}

func (s *staleSource) ReadChunk(_ context.Context, _ meta.Ino, idx uint32) ([]meta.Slice, error) {
	if s.gate != nil {
		close(s.entered)
		<-s.gate
		s.gate = nil
	}
	return s.lists[idx], nil
}

// A read of this mount that holds the old list keeps its blocks until it
// is done; another mount's read with the old list finds them gone (and
// reads the list again, in vfs).
func TestReaderWithOldList(t *testing.T) {
	v := newVolume(t)
	const size = 3 * blockSize
	ino, want := v.fragmented(t, meta.RootIno, "f", size, 30, -1, 2)
	stale := &staleSource{lists: map[uint32][]meta.Slice{0: v.slices(t, ino, 0)},
		entered: make(chan struct{}), gate: make(chan struct{})}
	got := make(chan error, 1)
	var content []byte
	go func() {
		var err error
		content, err = read(t, v.ctx, v.cs, stale, ino, size)
		got <- err
	}()
	<-stale.entered // the read is under way, with the old list
	done := make(chan error, 1)
	go func() {
		_, err := New(v.m, v.cs, Config{}).File(v.ctx, ino)
		done <- err
	}()
	// The compaction swaps the list, then waits for the read to delete.
	for deadline := time.Now().Add(10 * time.Second); slices.Equal(v.slices(t, ino, 0), stale.lists[0]); {
		if time.Now().After(deadline) {
			t.Fatal("compaction did not swap the list")
		}
		time.Sleep(10 * time.Millisecond) // polls for the swap
	}
	select {
	case err := <-done:
		t.Fatalf("compaction finished (%v) while a read of the old list was under way", err)
	default:
	}
	close(stale.gate)
	if err := <-got; err != nil || !bytes.Equal(content, want) {
		t.Fatalf("read of the old list during compaction: content differs (%v)", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("compact: %v", err)
	}
	other := chunk.New(v.obj, chunk.Config{BlockSize: blockSize}) // another mount's cache
	old := &staleSource{lists: stale.lists}
	if _, err := read(t, v.ctx, other, old, ino, size); !errors.Is(err, object.ErrNotFound) {
		t.Fatalf("another mount's read of the old list: %v, want ErrNotFound (the old blocks are still there)", err)
	}
}

// Overwriting a file in place, with a check after each commit as a mount
// does, keeps the bucket near the file's size, and the content right.
func TestOverwriteWaste(t *testing.T) {
	v := newVolume(t)
	const size = 64 * blockSize
	a, err := v.m.Mknod(v.ctx, meta.RootIno, []byte("f"), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, size)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	w := v.cs.NewWriter(a.Ino, metatest.Committer{Session: v.m})
	if err := w.Write(v.ctx, want, 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(v.ctx); err != nil {
		t.Fatal(err)
	}
	p := Policy{Waste: 0.25, MinWaste: blockSize}
	c := New(v.m, v.cs, Config{Policy: &p})
	var peak int64
	for i := 0; i < 200; i++ {
		n := 1 + rng.IntN(8*blockSize)
		off := rng.IntN(size - n)
		for j := off; j < off+n; j++ {
			want[j] = byte(rng.Uint32())
		}
		if err := w.Write(v.ctx, want[off:off+n], uint64(off)); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(v.ctx); err != nil {
			t.Fatal(err)
		}
		peak = max(peak, v.stored(t))
		if _, err := c.ChunkIfDue(v.ctx, a.Ino, 0); err != nil {
			t.Fatalf("compact: %v", err)
		}
		if limit := int64(float64(size)*(1+p.Waste)) + p.MinWaste; v.stored(t) > limit {
			t.Fatalf("after write %d the bucket holds %d bytes for a %d-byte file (limit %d)", i, v.stored(t), size, limit)
		}
	}
	fresh := chunk.New(v.obj, chunk.Config{BlockSize: blockSize})
	if got, err := read(t, v.ctx, fresh, v.m, a.Ino, size); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("content after overwrites differs (%v)", err)
	}
	if _, err := New(v.m, v.cs, Config{}).ChunkSettle(v.ctx, a.Ino, 0); err != nil {
		t.Fatal(err)
	}
	settled := v.stored(t)
	if got, err := read(t, v.ctx, fresh, v.m, a.Ino, size); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("content after settling differs (%v)", err)
	}
	if limit := int64(float64(size) * (1 + 1.0/64)); settled > limit {
		t.Errorf("settled bucket holds %d bytes for a %d-byte file (limit %d)", settled, size, limit)
	}
	t.Logf("file %d bytes: peak %d (%.2fx, before each check), settled %d (%.2fx)", size, peak, float64(peak)/size, settled, float64(settled)/size)
	var damage []string
	if _, err := meta.Check(v.ctx, v.st, meta.CheckOptions{OnDamage: func(d meta.Damage) { damage = append(damage, d.String()) }}); err != nil || len(damage) > 0 {
		t.Fatalf("check after overwrites: %v %v", err, damage)
	}
}

func TestSharedSliceSurvives(t *testing.T) {
	v := newVolume(t)
	const size = 4 * blockSize
	src, want := v.fragmented(t, meta.RootIno, "src", size, 40, -1, 3)
	dst, err := v.m.Mknod(v.ctx, meta.RootIno, []byte("dst"), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, err := v.m.CopyFileRange(v.ctx, src, 0, dst.Ino, 0, size); err != nil || n != size {
		t.Fatalf("copy_file_range: %d %v", n, err)
	}
	if _, err := New(v.m, v.cs, Config{}).File(v.ctx, src); err != nil {
		t.Fatalf("compact: %v", err)
	}
	v.flushDeletions(t)
	fresh := chunk.New(v.obj, chunk.Config{BlockSize: blockSize})
	for _, ino := range []meta.Ino{src, dst.Ino} {
		if got, err := read(t, v.ctx, fresh, v.m, ino, size); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("inode %d after compacting the source: content differs (%v)", ino, err)
		}
	}
	var damage []string
	if _, err := meta.Check(v.ctx, v.st, meta.CheckOptions{OnDamage: func(d meta.Damage) { damage = append(damage, d.String()) }}); err != nil || len(damage) > 0 {
		t.Fatalf("check after compaction: %v %v", err, damage)
	}
}

func TestTree(t *testing.T) {
	v := newVolume(t)
	d, err := v.m.Mknod(v.ctx, meta.RootIno, []byte("d"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	a, wantA := v.fragmented(t, d.Ino, "a", 2*blockSize, 10, -1, 4)
	b, wantB := v.fragmented(t, meta.RootIno, "b", 2*blockSize, 10, -1, 5)
	st, err := New(v.m, v.cs, Config{}).Tree(v.ctx, meta.RootIno)
	if err != nil || st.Chunks != 2 {
		t.Fatalf("compact tree: %+v %v", st, err)
	}
	for _, f := range []struct {
		ino  meta.Ino
		want []byte
	}{{a, wantA}, {b, wantB}} {
		oneSlice(t, v.slices(t, f.ino, 0))
		if got, err := read(t, v.ctx, v.cs, v.m, f.ino, len(f.want)); err != nil || !bytes.Equal(got, f.want) {
			t.Errorf("inode %d content differs (%v)", f.ino, err)
		}
	}
}
