package meta_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// spaceNow is the clock the space cases measure expiry against.
var spaceNow = time.Unix(1_700_000_000, 0)

// spaceStore formats a fresh mem volume and writes records straight
// through the store with fill.
func spaceStore(t *testing.T, fill func(tx store.Tx)) store.Store {
	t.Helper()
	ctx := context.Background()
	st := kvstore.New(mem.New(t.Name()))
	t.Cleanup(func() { st.Close() })
	if _, err := meta.FormatVolume(ctx, st, &meta.Format{Name: "space", UUID: "u", Storage: "mem", Bucket: "b", BlockSize: 4096}); err != nil {
		t.Fatal(err)
	}
	if fill != nil {
		if err := st.Update(ctx, func(tx store.Tx) error { fill(tx); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// file writes a file's attributes and entry in the root, and its chunks.
func file(tx store.Tx, ino meta.Ino, length uint64, chunks ...[]meta.Slice) {
	tx.SetNode(&store.Node{Ino: ino, Type: store.TypeFile, Mode: 0o644, Nlink: 1, Parent: meta.RootIno, Length: length})
	tx.SetEdge(meta.RootIno, store.Edge{Name: fmt.Appendf(nil, "f%d", ino), Ino: ino, Type: store.TypeFile})
	for i, c := range chunks {
		tx.SetChunk(ino, uint32(i), c)
	}
}

// sl is a slice of id and size stored, read whole at pos.
func sl(pos uint32, id uint64, size uint32) meta.Slice {
	return meta.Slice{Pos: pos, Id: id, Size: size, Len: size}
}

func TestSpaceUsage(t *testing.T) {
	past, future := spaceNow.Add(-time.Minute).Unix(), spaceNow.Add(10*time.Minute).Unix()
	cases := []struct {
		name string
		fill func(tx store.Tx)
		want meta.SpaceReport
		amp  int64
	}{
		{name: "empty volume"},
		{
			name: "one slice",
			fill: func(tx store.Tx) { file(tx, 10, 1000, []meta.Slice{sl(0, 1, 1000)}) },
			want: meta.SpaceReport{Files: 1, Chunks: 1, SliceEntries: 1, Slices: 1, Referenced: 1000, Visible: 1000},
		},
		{
			name: "empty file and a directory",
			fill: func(tx store.Tx) {
				file(tx, 10, 0)
				tx.SetNode(&store.Node{Ino: 11, Type: store.TypeDir, Mode: 0o755, Nlink: 2, Parent: meta.RootIno})
			},
			want: meta.SpaceReport{Files: 1},
		},
		{
			name: "overlapping slices",
			// 1 reads [0,500), 2 reads [500,1500); 500 bytes of 1 are overwritten.
			fill: func(tx store.Tx) { file(tx, 10, 1500, []meta.Slice{sl(0, 1, 1000), sl(500, 2, 1000)}) },
			want: meta.SpaceReport{Files: 1, Chunks: 1, SliceEntries: 2, Slices: 2, Referenced: 2000, Visible: 1500},
			amp:  500,
		},
		{
			name: "fully covered slice",
			// 2 covers all of 1, which stays stored.
			fill: func(tx store.Tx) { file(tx, 10, 300, []meta.Slice{sl(100, 1, 100), sl(0, 2, 300)}) },
			want: meta.SpaceReport{Files: 1, Chunks: 1, SliceEntries: 2, Slices: 2, Referenced: 400, Visible: 300},
			amp:  100,
		},
		{
			name: "older slice on top of nothing newer",
			// A later slice under an earlier one's range does not hide it
			// where the earlier one was not written.
			fill: func(tx store.Tx) { file(tx, 10, 2000, []meta.Slice{sl(1000, 1, 1000), sl(0, 2, 1000)}) },
			want: meta.SpaceReport{Files: 1, Chunks: 1, SliceEntries: 2, Slices: 2, Referenced: 2000, Visible: 2000},
		},
		{
			name: "hole slice",
			// A hole (id 0) over [200,500) of a stored slice: stored, not shown.
			fill: func(tx store.Tx) {
				file(tx, 10, 1000, []meta.Slice{sl(0, 1, 1000), {Pos: 200, Len: 300}})
			},
			want: meta.SpaceReport{Files: 1, Chunks: 1, SliceEntries: 2, Slices: 1, Referenced: 1000, Visible: 700},
			amp:  300,
		},
		{
			name: "part of a stored slice",
			// Entries may read a part of their slice (a split write).
			fill: func(tx store.Tx) {
				file(tx, 10, 4096, []meta.Slice{{Pos: 0, Id: 1, Size: 4096, Off: 1024, Len: 2048}})
			},
			want: meta.SpaceReport{Files: 1, Chunks: 1, SliceEntries: 1, Slices: 1, Referenced: 4096, Visible: 2048},
			amp:  2048,
		},
		{
			name: "slice shared by two files",
			// copy_file_range: both name slice 1, whose count has 1 extra.
			fill: func(tx store.Tx) {
				file(tx, 10, 4096, []meta.Slice{sl(0, 1, 4096)})
				file(tx, 11, 2048, []meta.Slice{{Pos: 0, Id: 1, Size: 4096, Off: 1024, Len: 2048}})
				tx.SetSliceRef(1, 4096, 1)
			},
			want: meta.SpaceReport{Files: 2, Chunks: 2, SliceEntries: 2, Slices: 1, Referenced: 4096, Visible: 6144},
			amp:  -2048,
		},
		{
			name: "slice shared within one list and across chunks",
			// Slice 1 named three times: twice in chunk 0, once in chunk 1.
			fill: func(tx store.Tx) {
				file(tx, 10, meta.ChunkSize+100, []meta.Slice{
					sl(0, 1, 100), {Pos: 1000, Id: 1, Size: 100, Len: 100}, sl(50, 2, 100),
				}, []meta.Slice{sl(0, 1, 100)})
				tx.SetSliceRef(1, 100, 2)
			},
			// chunk 0: [0,50) of 1, [50,150) of 2, [1000,1100) of 1; chunk 1: 100.
			want: meta.SpaceReport{Files: 1, Chunks: 2, SliceEntries: 4, Slices: 2, Referenced: 200, Visible: 350},
			amp:  -150,
		},
		{
			name: "queued slice",
			fill: func(tx store.Tx) {
				file(tx, 10, 1000, []meta.Slice{sl(0, 1, 1000)})
				tx.SetDelSlice(7, 5000, true)
				tx.SetDelSlice(8, 30, true)
			},
			want: meta.SpaceReport{Files: 1, Chunks: 1, SliceEntries: 1, Slices: 1, Referenced: 1000, Visible: 1000,
				Backlog: meta.DeletionBacklog{Slices: 2, SliceBytes: 5030}},
		},
		{
			name: "queued files",
			// A deleted file whose chunks wait to be dropped, and a list a
			// compaction replaced, parked until its expiry: both without
			// attributes, counted as stored and as detached.
			fill: func(tx store.Tx) {
				file(tx, 10, 1000, []meta.Slice{sl(0, 1, 1000)})
				tx.SetChunk(20, 0, []meta.Slice{sl(0, 2, 3000)})
				tx.SetDelFile(store.DelFile{Ino: 20, Length: 3000, Expire: past}, true)
				tx.SetChunk(0x7000000000000003, 0, []meta.Slice{sl(0, 4, 600), sl(200, 5, 600)})
				tx.SetDelFile(store.DelFile{Ino: 0x7000000000000003, Length: 1200, Expire: future}, true)
				tx.SetDelFile(store.DelFile{Ino: 21, Length: 50, Expire: spaceNow.Unix()}, true) // due now
			},
			want: meta.SpaceReport{Files: 1, Chunks: 3, SliceEntries: 4, Slices: 4, Referenced: 5200, Visible: 4800, Detached: 3800,
				Backlog: meta.DeletionBacklog{Files: 3, FileBytes: 4250, Waiting: 1, WaitingBytes: 1200}},
			amp: 400,
		},
		{
			name: "shared with a queued file",
			// The deleted file still names slice 1, which file 10 shares.
			fill: func(tx store.Tx) {
				file(tx, 10, 1000, []meta.Slice{sl(0, 1, 1000)})
				tx.SetChunk(20, 0, []meta.Slice{sl(0, 1, 1000)})
				tx.SetDelFile(store.DelFile{Ino: 20, Length: 1000, Expire: past}, true)
				tx.SetSliceRef(1, 1000, 1)
			},
			want: meta.SpaceReport{Files: 1, Chunks: 2, SliceEntries: 2, Slices: 1, Referenced: 1000, Visible: 2000, Detached: 1000,
				Backlog: meta.DeletionBacklog{Files: 1, FileBytes: 1000}},
			amp: -1000,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := spaceStore(t, tc.fill)
			var calls int
			got, err := meta.SpaceUsage(context.Background(), st, meta.SpaceOptions{
				Now:      func() time.Time { return spaceNow },
				Progress: func(int64) { calls++ },
			})
			if err != nil {
				t.Fatal(err)
			}
			if *got != tc.want {
				t.Errorf("report = %+v\nwant     %+v", *got, tc.want)
			}
			if got.Amplification() != tc.amp {
				t.Errorf("amplification = %d, want %d", got.Amplification(), tc.amp)
			}
			wantRatio := 0.0
			if tc.want.Visible > 0 {
				wantRatio = float64(tc.want.Referenced) / float64(tc.want.Visible)
			}
			if got.Ratio() != wantRatio {
				t.Errorf("ratio = %v, want %v", got.Ratio(), wantRatio)
			}
			if calls == 0 {
				t.Errorf("progress never told")
			}
		})
	}
}

// TestSpaceUsageClient builds the cases through a client, as mounts do:
// overwrites, a copy_file_range, a truncation and a deletion.
func TestSpaceUsageClient(t *testing.T) {
	ctx := context.Background()
	st := spaceStore(t, nil)
	c, err := meta.NewSession(ctx, st, meta.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	mkfile := func(name string) meta.Ino {
		t.Helper()
		a, err := c.Mknod(ctx, meta.RootIno, []byte(name), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		return a.Ino
	}
	write := func(ino meta.Ino, pos, n uint32) {
		t.Helper()
		id, err := c.NewSliceID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := metatest.Write(ctx, c, ino, 0, meta.Slice{Pos: pos, Id: id, Size: n, Len: n}); err != nil {
			t.Fatal(err)
		}
	}
	a := mkfile("a")
	write(a, 0, 8192)
	write(a, 4096, 8192) // a: 12288 bytes shown of 16384 stored
	b := mkfile("b")
	if n, _, err := c.CopyFileRange(ctx, a, 0, b, 0, 12288); err != nil || n != 12288 {
		t.Fatalf("copy_file_range: %d, %v", n, err)
	}
	if _, err := c.SetAttr(ctx, a, meta.SetSize, &meta.Attr{Length: 6000}); err != nil {
		t.Fatal(err) // a hole over [6000, ...) of chunk 0
	}
	d := mkfile("d")
	write(d, 0, 1000)
	if err := c.Unlink(ctx, meta.RootIno, []byte("d")); err != nil {
		t.Fatal(err)
	}
	if err := c.FlushDeletions(ctx); err != nil { // no DeleteSlice: its slice stays queued
		t.Fatal(err)
	}
	got, err := meta.SpaceUsage(ctx, st, meta.SpaceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// a: its two slices and the truncation's hole; b: two entries naming
	// a's slices (shared), 12288 bytes shown.
	want := meta.SpaceReport{Files: 2, Chunks: 2, SliceEntries: 5, Slices: 2, Referenced: 16384, Visible: 6000 + 12288,
		Backlog: meta.DeletionBacklog{Slices: 1, SliceBytes: 1000}}
	if *got != want {
		t.Errorf("report = %+v\nwant     %+v", *got, want)
	}
}

// TestSpaceUsagePages runs the scan over many pages: a slice shared by
// every file is counted once, files whose attributes fall on another
// page than their chunks are not taken for detached ones, and OnChunk
// sees every chunk.
func TestSpaceUsagePages(t *testing.T) {
	const n = 2500
	st := spaceStore(t, func(tx store.Tx) {
		for i := range n {
			ino := meta.Ino(100 + i)
			file(tx, ino, 3000, []meta.Slice{sl(0, 1, 1000), sl(1000, uint64(10+i), 2000)})
		}
		tx.SetSliceRef(1, 1000, n-1)
	})
	var chunks int64
	got, err := meta.SpaceUsage(context.Background(), st, meta.SpaceOptions{OnChunk: func(meta.Ino, *store.ChunkRecord) { chunks++ }})
	if err != nil {
		t.Fatal(err)
	}
	want := meta.SpaceReport{Files: n, Chunks: n, SliceEntries: 2 * n, Slices: 1 + n, Referenced: 1000 + 2000*n, Visible: 3000 * n}
	if *got != want {
		t.Errorf("report = %+v\nwant     %+v", *got, want)
	}
	if chunks != n {
		t.Errorf("OnChunk told %d chunks, want %d", chunks, n)
	}
}
