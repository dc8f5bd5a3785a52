package e2e

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
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
	want := writeFragmented(t, v.path("frag"), 19) // fewer than the mount checks for compaction on its own
	before := len(v.blockKeys(t))
	mustSluice(t, "compact", v.path("frag"))
	if got, err := os.ReadFile(v.path("frag")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("content after compaction differs: %d bytes, %v", len(got), err)
	}
	if after := len(v.blockKeys(t)); after != before+1 {
		t.Errorf("blocks before compaction %d, after %d; want one more (the new slice)", before, after)
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
	// The last compaction rewrites the whole file as one slice of one
	// block, whose key ends with its length.
	whole := fmt.Sprintf("_0_%d", len(want))
	eventually(t, "the mount compacts the fragmented chunk", func() error {
		for _, k := range v.blockKeys(t) {
			if strings.HasSuffix(k, whole) {
				return nil
			}
		}
		return fmt.Errorf("no block of the whole file (*%s) among %d blocks", whole, len(v.blockKeys(t)))
	})
	if got, err := os.ReadFile(v.path("frag")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("content after compaction differs: %d bytes, %v", len(got), err)
	}
	v.umount(t)
	v.wantFsckClean(t)
}
