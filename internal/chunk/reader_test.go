package chunk

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/metatest"
)

func TestVisible(t *testing.T) {
	// seg is an expected segment; slice is the index of the visible slice
	// in the list, or -1 for a range no slice covers.
	type seg struct {
		start, end uint32
		slice      int
	}
	sl := func(pos uint32, id uint64, len uint32) meta.Slice {
		return meta.Slice{Pos: pos, Id: id, Size: len, Len: len}
	}
	tests := []struct {
		name       string
		slices     []meta.Slice
		start, end uint32
		want       []seg
	}{
		{"empty chunk", nil, 0, 100, []seg{{0, 100, -1}}},
		{"one slice covers all", []meta.Slice{sl(0, 1, 100)}, 0, 100, []seg{{0, 100, 0}}},
		{"one slice inside", []meta.Slice{sl(10, 1, 20)}, 0, 100,
			[]seg{{0, 10, -1}, {10, 30, 0}, {30, 100, -1}}},
		{"later wins", []meta.Slice{sl(0, 1, 100), sl(0, 2, 100)}, 0, 100, []seg{{0, 100, 1}}},
		{"earlier does not cover later", []meta.Slice{sl(20, 2, 10), sl(0, 1, 100)}, 0, 100, []seg{{0, 100, 1}}},
		{"partial overlap at the end", []meta.Slice{sl(0, 1, 60), sl(40, 2, 60)}, 0, 100,
			[]seg{{0, 40, 0}, {40, 100, 1}}},
		{"partial overlap at the start", []meta.Slice{sl(40, 1, 60), sl(0, 2, 60)}, 0, 100,
			[]seg{{0, 60, 1}, {60, 100, 0}}},
		{"later splits earlier", []meta.Slice{sl(0, 1, 100), sl(30, 2, 10)}, 0, 100,
			[]seg{{0, 30, 0}, {30, 40, 1}, {40, 100, 0}}},
		{"hole (id 0) cuts a slice", []meta.Slice{sl(0, 1, 100), {Pos: 50, Len: 50}}, 0, 100,
			[]seg{{0, 50, 0}, {50, 100, 1}}},
		{"write after a hole", []meta.Slice{sl(0, 1, 100), {Pos: 50, Len: 50}, sl(70, 3, 10)}, 0, 100,
			[]seg{{0, 50, 0}, {50, 70, 1}, {70, 80, 2}, {80, 100, 1}}},
		{"three layers", []meta.Slice{sl(0, 1, 100), sl(10, 2, 80), sl(20, 3, 60), sl(30, 4, 10)}, 0, 100,
			[]seg{{0, 10, 0}, {10, 20, 1}, {20, 30, 2}, {30, 40, 3}, {40, 80, 2}, {80, 90, 1}, {90, 100, 0}}},
		{"adjacent slices", []meta.Slice{sl(0, 1, 50), sl(50, 2, 50)}, 0, 100,
			[]seg{{0, 50, 0}, {50, 100, 1}}},
		{"range inside one slice", []meta.Slice{sl(0, 1, 100), sl(60, 2, 40)}, 10, 20, []seg{{10, 20, 0}}},
		{"range clips slices", []meta.Slice{sl(0, 1, 100), sl(15, 2, 10)}, 10, 20,
			[]seg{{10, 15, 0}, {15, 20, 1}}},
		{"slices outside the range", []meta.Slice{sl(0, 1, 10), sl(20, 2, 10)}, 10, 20, []seg{{10, 20, -1}}},
		{"slice ends at range start", []meta.Slice{sl(0, 1, 10)}, 10, 20, []seg{{10, 20, -1}}},
		{"zero-length slice ignored", []meta.Slice{sl(0, 1, 100), {Pos: 10, Id: 2}}, 0, 100, []seg{{0, 100, 0}}},
		{"Off does not move the slice", []meta.Slice{{Pos: 10, Id: 1, Size: 100, Off: 50, Len: 20}}, 0, 40,
			[]seg{{0, 10, -1}, {10, 30, 0}, {30, 40, -1}}},
		{"chunk end", []meta.Slice{sl(meta.ChunkSize-10, 1, 10)}, meta.ChunkSize - 20, meta.ChunkSize,
			[]seg{{meta.ChunkSize - 20, meta.ChunkSize - 10, -1}, {meta.ChunkSize - 10, meta.ChunkSize, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Segments must tile [start, end); adjacent segments of one
			// slice are merged, since how a run is split does not matter.
			var got []seg
			at := tt.start
			for _, g := range meta.Visible(tt.slices, tt.start, tt.end) {
				if g.Start != at || g.End <= g.Start {
					t.Fatalf("segment [%d, %d) does not continue at %d", g.Start, g.End, at)
				}
				at = g.End
				i := -1
				for j := range tt.slices {
					if g.Slice == &tt.slices[j] {
						i = j
					}
				}
				if g.Slice != nil && i < 0 {
					t.Fatalf("segment %+v points outside the slice list", g)
				}
				if n := len(got); n > 0 && got[n-1].slice == i {
					got[n-1].end = g.End
					continue
				}
				got = append(got, seg{g.Start, g.End, i})
			}
			if at != tt.end {
				t.Fatalf("segments end at %d, want %d", at, tt.end)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("visible = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestReadSliceOffset commits slices that name a part of a stored slice
// (Off != 0, as after compaction or clone) and reads them back.
func TestReadSliceOffset(t *testing.T) {
	e := newEnv(t, nil, Config{})
	src := e.newFile(t, "src")
	w := e.s.NewWriter(src, e.c)
	data := pattern(1, 3*testBlockSize+500)
	e.write(t, w, nil, data, 0)
	e.flush(t, w)
	id, size := e.slices(t, src, 0)[0].Id, uint32(len(data))

	dst := e.newFile(t, "dst")
	commits := []meta.Slice{
		{Pos: 1000, Id: id, Size: size, Off: testBlockSize - 100, Len: 2*testBlockSize + 300}, // spans 3 blocks
		{Pos: 5000, Id: id, Size: size, Off: 3*testBlockSize + 400, Len: 100},                 // in the short last block
		{Pos: 5050, Len: 20}, // a hole on top
	}
	var m fileModel
	for _, s := range commits {
		if _, err := metatest.Write(e.ctx, e.c, dst, 0, s); err != nil {
			t.Fatalf("commit %+v: %v", s, err)
		}
		if s.Id == 0 {
			m.write(make([]byte, s.Len), uint64(s.Pos))
		} else {
			m.write(data[s.Off:s.Off+s.Len], uint64(s.Pos))
		}
	}
	e.check(t, nil, dst, &m)
	// Unaligned reads in the middle.
	for _, r := range [][2]int{{999, 2}, {1000, 1}, {5049, 3}, {5069, 100}, {testBlockSize, testBlockSize + 7}} {
		e.checkRange(t, nil, dst, &m, uint64(r[0]), r[1])
	}
	// A slice that claims more bytes than it has is an error, not garbage.
	p := make([]byte, 10)
	if err := e.s.ReadSlice(e.ctx, id, size, size-5, p); err == nil {
		t.Error("ReadSlice past the end of a slice succeeded")
	}
}

// TestReadFaults makes the object store return short or failed reads:
// ReadFile must return an error, never wrong bytes, and must not cache
// the bad block.
func TestReadFaults(t *testing.T) {
	tests := []struct {
		name  string
		fault func(f *faultStore, victim string)
	}{
		{"short", func(f *faultStore, victim string) {
			f.shortGet = func(key string) (int, bool) { return testBlockSize / 2, key == victim }
		}},
		{"one byte short", func(f *faultStore, victim string) {
			f.shortGet = func(key string) (int, bool) { return testBlockSize - 1, key == victim }
		}},
		{"empty", func(f *faultStore, victim string) {
			f.shortGet = func(key string) (int, bool) { return 0, key == victim }
		}},
		{"error", func(f *faultStore, victim string) {
			f.failGet = func(key string) bool { return key == victim }
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &faultStore{Store: newMemStore()}
			// Written blocks stay out of the cache, so reads reach the store.
			e := newEnv(t, f, Config{CachePartialOnly: true})
			ino := e.newFile(t, "f")
			w := e.s.NewWriter(ino, e.c)
			data := pattern(7, 4*testBlockSize)
			var m fileModel
			e.write(t, w, &m, data, 0)
			e.flush(t, w)
			s := e.slices(t, ino, 0)[0]
			victim := BlockKey(s.Id, 2, testBlockSize, false)
			tt.fault(f, victim)

			p := make([]byte, len(data))
			err := e.s.ReadFile(e.ctx, e.c, ino, p, 0)
			if err == nil {
				t.Fatal("ReadFile over a bad block succeeded")
			}
			if !strings.Contains(err.Error(), victim) {
				t.Errorf("error %q does not name block %s", err, victim)
			}
			if tt.name == "error" && !errors.Is(err, errInjected) {
				t.Errorf("error %v does not wrap the store's error", err)
			}
			// Blocks before and after the bad one still read.
			got := e.read(t, nil, ino, 0, 2*testBlockSize)
			assertBytes(t, got, data[:2*testBlockSize], 0)
			got = e.read(t, nil, ino, 3*testBlockSize, testBlockSize)
			assertBytes(t, got, data[3*testBlockSize:], 3*testBlockSize)
			// The bad read was not cached: once the store heals, the data is right.
			f.shortGet, f.failGet = nil, nil
			e.check(t, nil, ino, &m)
		})
	}
}

func TestSparseFile(t *testing.T) {
	e := newEnv(t, nil, Config{})
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	const at = 10 << 20
	data := pattern(3, 4096)
	e.write(t, w, nil, data, at)
	for _, stage := range []string{"buffered", "flushed"} {
		if stage == "flushed" {
			e.flush(t, w)
			if got := e.length(t, ino); got != at+4096 {
				t.Errorf("length = %d, want %d", got, at+4096)
			}
		}
		got := e.read(t, w, ino, 0, at)
		if i := firstNonZero(got); i >= 0 {
			t.Errorf("%s: byte %d of the hole is %#x, want 0", stage, i, got[i])
		}
		got = e.read(t, w, ino, at-100, 4196)
		assertBytes(t, got, append(make([]byte, 100), data...), at-100)
	}
	if objs := listAll(t, e.ctx, e.obj); len(objs) != 1 {
		t.Errorf("stored %d objects for one 4 KiB write, want 1", len(objs))
	}
}

func firstNonZero(p []byte) int {
	for i, b := range p {
		if b != 0 {
			return i
		}
	}
	return -1
}

// TestVisibleRandom checks Visible against a byte-by-byte replay of random
// slice lists: every byte must read from the newest slice covering it.
func TestVisibleRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const size = 512
	for iter := 0; iter < 2000; iter++ {
		list := make([]meta.Slice, r.IntN(40))
		for i := range list {
			pos := uint32(r.IntN(size))
			n := uint32(r.IntN(size - int(pos) + 1))
			list[i] = meta.Slice{Pos: pos, Id: uint64(r.IntN(3)), Size: n, Len: n}
		}
		start := uint32(r.IntN(size))
		end := start + uint32(r.IntN(size-int(start)+1))
		want := make([]int, size) // index of the slice owning each byte, -1 for none
		for i := range want {
			want[i] = -1
		}
		for i, s := range list {
			for b := s.Pos; b < s.Pos+s.Len; b++ {
				want[b] = i
			}
		}
		at := start
		for _, g := range meta.Visible(list, start, end) {
			if g.Start != at || g.End <= g.Start {
				t.Fatalf("iteration %d: segment [%d, %d) does not continue at %d", iter, g.Start, g.End, at)
			}
			for b := g.Start; b < g.End; b++ {
				got := -1
				for i := range list {
					if g.Slice == &list[i] {
						got = i
					}
				}
				if got != want[b] {
					t.Fatalf("iteration %d: byte %d reads from slice %d, want %d", iter, b, got, want[b])
				}
			}
			at = g.End
		}
		if at != end && start != end {
			t.Fatalf("iteration %d: segments end at %d, want %d", iter, at, end)
		}
	}
}

// TestReadFileVec checks where the pieces of a vectored read come from:
// blocks in the memory cache are handed out as they are, never copied
// into the caller's buffer; holes and buffered writes are in the buffer.
func TestReadFileVec(t *testing.T) {
	const bs = testBlockSize
	e := newEnv(t, nil, Config{})
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	data := pattern(7, 2*bs)
	e.write(t, w, nil, data, 0)
	e.write(t, w, nil, data[:100], 3*bs) // a hole of one block before it
	e.flush(t, w)
	e.read(t, nil, ino, 0, 2*bs) // fetches both blocks into the memory cache

	inBuffer := func(p, piece []byte) bool {
		for i := range p {
			if &p[i] == &piece[0] {
				return true
			}
		}
		return false
	}
	p := bytes.Repeat([]byte{0xEE}, 3*bs+100)
	pieces, release, err := e.s.ReadFileVec(e.ctx, e.c, ino, p, 0)
	defer release()
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]byte{}, data...), make([]byte, bs)...), data[:100]...)
	if got := bytes.Join(pieces, nil); !bytes.Equal(got, want) {
		t.Fatalf("vectored read: %d bytes differ from the %d written", len(got), len(want))
	}
	if len(pieces) < 3 {
		t.Fatalf("%d pieces, want the two cached blocks, the hole and the tail apart", len(pieces))
	}
	for i, piece := range pieces[:2] {
		if inBuffer(p, piece) {
			t.Errorf("piece %d (a cached block) was copied into the buffer", i)
		}
	}
	if !bytes.Equal(p[:2*bs], bytes.Repeat([]byte{0xEE}, 2*bs)) {
		t.Error("the buffer's bytes under the cached blocks were written")
	}
	if !inBuffer(p, pieces[2]) {
		t.Error("the hole is not in the buffer")
	}

	// Buffered writes over the range: gathered into the buffer, with the
	// writes on top.
	e.write(t, w, nil, []byte("new"), 10)
	p = bytes.Repeat([]byte{0xEE}, 2*bs)
	pieces, release2, err := w.ReadVec(e.ctx, e.c, p, 0)
	release2()
	if err != nil {
		t.Fatal(err)
	}
	want = append(append(append([]byte{}, data[:10]...), "new"...), data[13:2*bs]...)
	if len(pieces) != 1 || &pieces[0][0] != &p[0] || !bytes.Equal(pieces[0], want) {
		t.Errorf("read over buffered writes: %d pieces, want the buffer alone with the writes laid over", len(pieces))
	}
	e.flush(t, w)
}

func TestGather(t *testing.T) {
	p := make([]byte, 10)
	copy(p[3:6], "def")
	var v iovec
	v.add([]byte("abc"))
	v.add(p[3:5]) // in place
	v.add(p[5:6]) // continues the piece before: joined
	v.add(nil)
	v.add([]byte("ghij"))
	if len(v) != 3 || string(v[1]) != "def" {
		t.Fatalf("pieces %q, want abc, def (joined in place), ghij", v)
	}
	if n := Gather(p, v); n != 10 || string(p) != "abcdefghij" {
		t.Errorf("Gather = %d, %q; want 10, abcdefghij", n, p)
	}
	var none *iovec
	none.add([]byte("x")) // a nil iovec takes nothing
}
