package e2e

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
)

// writeFragmented writes n pieces to name, each committed as its own slice
// by an fsync, and returns the content.
func writeFragmented(t *testing.T, path string, n int) []byte {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want []byte
	for i := 0; i < n; i++ {
		p := randomData(1000+i, uint64(i))
		if _, err := f.Write(p); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		want = append(want, p...)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return want
}

// TestCompactMounted compacts a fragmented file through its mount, with
// `sluice compact PATH`, and checks the content and the blocks stored.
func TestCompactMounted(t *testing.T) {
	v := newVolume(t)
	v.mount(t)
	want := writeFragmented(t, v.path("frag"), 19) // appends: the mount finds nothing to compact on its own
	before := len(v.blockKeys(t))
	mustSluice(t, "compact", v.path("frag"))
	if got, err := os.ReadFile(v.path("frag")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("content after compaction differs: %d bytes, %v", len(got), err)
	}
	// The replaced slices are deleted at once: one block is left.
	if after := len(v.blockKeys(t)); before != 19 || after != 1 {
		t.Errorf("blocks before compaction %d, after %d; want 19 and then 1 (the new slice)", before, after)
	}
	v.umount(t)
	v.wantFsckClean(t)
}

// TestCompactAutomatic writes a file in enough small committed pieces that
// the mount compacts it on its own.
func TestCompactAutomatic(t *testing.T) {
	v := newVolume(t)
	v.mount(t)
	const pieces = 120 // past the policy's 50 small slices per chunk, twice
	want := writeFragmented(t, v.path("frag"), pieces)
	// A compaction stores the pieces it joins as one slice, whose single
	// block is longer than any piece (each is 1000-1119 bytes). Which
	// prefix of the file it covers depends on when the checks ran.
	eventuallyWithin(t, 60*time.Second, "the mount compacts the fragmented chunk", func() error {
		for _, k := range v.blockKeys(t) {
			if b, err := chunk.ParseBlockKey(k); err == nil && b.Len > 2000 {
				return nil
			}
		}
		return fmt.Errorf("no compacted block among %d blocks", len(v.blockKeys(t)))
	})
	if got, err := os.ReadFile(v.path("frag")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("content after compaction differs: %d bytes, %v", len(got), err)
	}
	v.umount(t)
	v.wantFsckClean(t)
}
