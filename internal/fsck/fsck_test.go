package fsck_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/fsck"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/volume"
	"github.com/sluicefs/sluice/internal/volume/volumetest"
)

// run checks the volume at metaURL and returns the report and problems.
func run(t *testing.T, metaURL string, opts fsck.Options) (*fsck.Report, []fsck.Problem) {
	t.Helper()
	ctx := context.Background()
	v, err := volume.Open(ctx, metaURL, volume.Options{Level: volume.Data})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close(ctx)
	var problems []fsck.Problem
	opts.OnProblem = func(p fsck.Problem) { problems = append(problems, p) }
	r, err := fsck.Run(ctx, v, opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Problems != int64(len(problems)) {
		t.Errorf("report counts %d problems, OnProblem was told %d", r.Problems, len(problems))
	}
	return r, problems
}

// blocks returns the block keys in the volume's bucket directory.
func blocks(t *testing.T, tv *volumetest.Volume) []string {
	t.Helper()
	root := filepath.Join(tv.Bucket, "vol")
	var keys []string
	err := filepath.Walk(filepath.Join(root, "chunks"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			rel, _ := filepath.Rel(root, p)
			keys = append(keys, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestRun(t *testing.T) {
	tv := volumetest.New(t, nil)
	volumetest.WriteFile(t, tv.MetaURL, "a", bytes.Repeat([]byte("a"), 2<<16+7)) // 3 blocks
	volumetest.WriteFile(t, tv.MetaURL, "b", []byte("small"))                    // 1 block
	r, problems := run(t, tv.MetaURL, fsck.Options{})
	if want := (fsck.Report{Inodes: 3, Slices: 2, Blocks: 4}); *r != want || len(problems) != 0 {
		t.Fatalf("clean volume: %+v, %+v; want %+v and no problems", *r, problems, want)
	}

	// Damage a: lose its first block, cut its last one short.
	var lost, cut string
	for _, k := range blocks(t, tv) {
		b, err := chunk.ParseBlockKey(k)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case b.Len == 1<<16 && b.Index == 0:
			lost = k
		case b.Len == 7:
			cut = k
		}
	}
	if lost == "" || cut == "" {
		t.Fatalf("blocks of a not found among %v", blocks(t, tv))
	}
	if err := os.Remove(filepath.Join(tv.Bucket, "vol", lost)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tv.Bucket, "vol", cut), []byte("aa"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, problems = run(t, tv.MetaURL, fsck.Options{Threads: 1})
	if r.Problems != 2 || r.Blocks != 4 {
		t.Errorf("damaged volume: %+v; want 2 problems in 4 blocks", *r)
	}
	msgs := map[string]fsck.Problem{}
	for _, p := range problems {
		msgs[p.Msg] = p
		if p.Path != "/a" || p.Ino == 0 || p.Slice == 0 || p.Chunk != 0 || p.Block == "" {
			t.Errorf("problem %+v does not name file /a, its slice and block", p)
		}
	}
	for _, want := range []string{"block " + lost + " missing", "block " + cut + " has 2 bytes, want 7"} {
		if _, ok := msgs[want]; !ok {
			t.Errorf("no problem %q among %+v", want, problems)
		}
	}

	// b's subtree is clean; past MaxPaths problems get no path.
	if r, problems := run(t, tv.MetaURL, fsck.Options{Path: "/b"}); r.Problems != 0 || r.Blocks != 1 {
		t.Errorf("check of /b: %+v, %+v; want 1 block and no problem", *r, problems)
	}
	_, problems = run(t, tv.MetaURL, fsck.Options{MaxPaths: -1})
	for _, p := range problems {
		if p.Path != "?" {
			t.Errorf("problem %+v has a path looked up, with MaxPaths -1", p)
		}
	}
}

// TestCompressedSizes checks that on a compressed volume a block's stored
// size is not held against its length.
func TestCompressedSizes(t *testing.T) {
	tv := volumetest.New(t, func(f *meta.Format) { f.Compression = "zstd" })
	volumetest.WriteFile(t, tv.MetaURL, "z", bytes.Repeat([]byte("z"), 1<<16))
	if r, problems := run(t, tv.MetaURL, fsck.Options{}); r.Problems != 0 || r.Blocks != 1 {
		t.Errorf("compressed volume: %+v, %+v; want 1 block and no problem", *r, problems)
	}
	// The test means something only if the stored size differs.
	keys := blocks(t, tv)
	fi, err := os.Stat(filepath.Join(tv.Bucket, "vol", keys[0]))
	if err != nil || fi.Size() >= 1<<16 {
		t.Errorf("stored block %v: %v, %v; want it compressed", keys, fi, err)
	}
}
