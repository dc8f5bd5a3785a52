package compact

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/mem"
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
	m   *meta.Client
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
	m, err := meta.NewClient(ctx, st, meta.Config{DeleteSlice: cs.Delete})
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
	w := v.cs.NewWriter(a.Ino, v.m)
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
	small := func(n int, l uint32) []meta.Slice {
		ss := make([]meta.Slice, n)
		for i := range ss {
			ss[i] = meta.Slice{Id: uint64(i + 1), Size: l, Len: l}
		}
		return ss
	}
	tests := []struct {
		name string
		p    Policy
		ss   []meta.Slice
		want bool
	}{
		{"empty", Policy{}, nil, false},
		{"few small", Policy{}, small(50, 100), false},
		{"many small", Policy{}, small(51, 100), true},
		{"many large", Policy{}, small(150, 1<<20), false},
		{"too many large", Policy{}, small(200, 1<<20), true},
		{"tuned", Policy{MaxSlices: 5}, small(5, 1<<20), true},
		{"half small", Policy{}, append(small(26, 100), small(26, 1<<20)...), true},
		{"mostly large", Policy{}, append(small(25, 100), small(27, 1<<20)...), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Due(tc.ss); got != tc.want {
				t.Errorf("Due(%d slices) = %v, want %v", len(tc.ss), got, tc.want)
			}
		})
	}
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
	lax := New(v.m, v.cs, Config{KeepOld: -1, Policy: Policy{MaxSlices: 1000, MinSlices: 1000}})
	if st, err := lax.ChunkIfDue(v.ctx, ino, 0); err != nil || st.Chunks != 0 || len(v.slices(t, ino, 0)) != len(before) {
		t.Fatalf("ChunkIfDue below the threshold: %+v %v", st, err)
	}
	c := New(v.m, v.cs, Config{KeepOld: -1})
	st, err := c.File(v.ctx, ino)
	if err != nil {
		t.Fatalf("compact file: %v", err)
	}
	after := v.slices(t, ino, 0)
	if len(after) != 1 || st.Chunks != 1 || st.Slices != len(before) {
		t.Fatalf("after compaction: %d slices, stats %+v", len(after), st)
	}
	if after[0].Pos != 0 || after[0].Len != size {
		t.Errorf("compacted slice %+v, want [0, %d)", after[0], size)
	}
	// A second pass finds nothing to do.
	if st, err := c.File(v.ctx, ino); err != nil || st.Chunks != 0 {
		t.Errorf("second compaction: %+v %v", st, err)
	}
	// Read through a fresh chunk store, so no cached block hides a
	// missing one.
	fresh := chunk.New(v.obj, chunk.Config{BlockSize: blockSize})
	if got, err := read(t, v.ctx, fresh, v.m, ino, size); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("content after compaction differs (%v)", err)
	}
	v.flushDeletions(t)
	keys := v.objects(t)
	stray := ""
	for _, k := range keys {
		if !strings.Contains(k, "/"+strconv.FormatUint(after[0].Id, 10)+"_") {
			stray = k
		}
	}
	if len(keys) != (size+blockSize-1)/blockSize || stray != "" {
		t.Errorf("after deletion the bucket holds %d objects (e.g. %q), want only the %d blocks of slice %d",
			len(keys), stray, (size+blockSize-1)/blockSize, after[0].Id)
	}
	if got, err := read(t, v.ctx, fresh, v.m, ino, size); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("content after deletion differs (%v)", err)
	}
}

// staleSource replays the slice lists a reader read before a compaction,
// as another mount does until its next open.
type staleSource map[uint32][]meta.Slice

func (s staleSource) ReadChunk(_ context.Context, _ meta.Ino, idx uint32) ([]meta.Slice, error) {
	return s[idx], nil
}

func TestReaderWithOldList(t *testing.T) {
	for _, tc := range []struct {
		name     string
		keepOld  time.Duration
		readable bool
	}{
		{"kept", time.Hour, true},
		{"released at once", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVolume(t)
			const size = 3 * blockSize
			ino, want := v.fragmented(t, meta.RootIno, "f", size, 30, -1, 2)
			stale := staleSource{0: v.slices(t, ino, 0)}
			if _, err := New(v.m, v.cs, Config{KeepOld: tc.keepOld}).File(v.ctx, ino); err != nil {
				t.Fatalf("compact: %v", err)
			}
			v.flushDeletions(t)
			other := chunk.New(v.obj, chunk.Config{BlockSize: blockSize}) // another mount's cache
			got, err := read(t, v.ctx, other, stale, ino, size)
			if tc.readable && (err != nil || !bytes.Equal(got, want)) {
				t.Fatalf("reader with the old list: content differs (%v)", err)
			}
			if !tc.readable && err == nil {
				t.Fatalf("old blocks still readable after their release; the kept case proves nothing")
			}
		})
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
	if n, err := v.m.CopyFileRange(v.ctx, src, 0, dst.Ino, 0, size); err != nil || n != size {
		t.Fatalf("copy_file_range: %d %v", n, err)
	}
	if _, err := New(v.m, v.cs, Config{KeepOld: -1}).File(v.ctx, src); err != nil {
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
		if n := len(v.slices(t, f.ino, 0)); n != 1 {
			t.Errorf("inode %d has %d slices after compaction", f.ino, n)
		}
		if got, err := read(t, v.ctx, v.cs, v.m, f.ino, len(f.want)); err != nil || !bytes.Equal(got, f.want) {
			t.Errorf("inode %d content differs (%v)", f.ino, err)
		}
	}
}
