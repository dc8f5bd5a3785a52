package e2e

import (
	"bytes"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// blockKeys lists the block objects of volume "vol" in the bucket, as keys
// relative to the volume ("chunks/...").
func (v *volume) blockKeys(t *testing.T) []string {
	t.Helper()
	root := filepath.Join(v.bucket, "vol")
	var keys []string
	err := filepath.WalkDir(filepath.Join(root, "chunks"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		keys = append(keys, filepath.ToSlash(rel))
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	sort.Strings(keys)
	return keys
}

// randomData returns n reproducible pseudo-random bytes.
func randomData(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// wantFsckClean runs fsck and fails t unless it exits 0 reporting no problems.
func (v *volume) wantFsckClean(t *testing.T, args ...string) {
	t.Helper()
	out := mustSluice(t, append([]string{"fsck", v.metaURL}, args...)...)
	if !strings.Contains(out, ": 0 problems") {
		t.Fatalf("fsck output does not report 0 problems:\n%s", out)
	}
}

// leakedCount returns the number gc reports as leaked.
func leakedCount(t *testing.T, out string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^  leaked: +(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no leaked count in gc output:\n%s", out)
	}
	return m[1]
}

func TestGCAndFsck(t *testing.T) {
	v := newVolume(t)
	v.mount(t)
	big := randomData(9<<20+123, 1) // three blocks of 4 MiB
	write(t, v.path("big"), big)
	if err := os.Mkdir(v.path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, v.path("d/small"), []byte("small file"))
	if err := os.Link(v.path("d/small"), v.path("hard")); err != nil {
		t.Fatal(err)
	}
	v.umount(t)

	v.wantFsckClean(t)
	v.wantFsckClean(t, "--path", "/d")
	out := mustSluice(t, "gc", v.metaURL, "--min-age", "0")
	if leakedCount(t, out) != "0" {
		t.Fatalf("gc finds leaks in a clean volume:\n%s", out)
	}

	// A stray block: no slice 999999 exists.
	const stray = "chunks/0/999/999999_0_1024"
	strayPath := filepath.Join(v.bucket, "vol", filepath.FromSlash(stray))
	if err := os.MkdirAll(filepath.Dir(strayPath), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, strayPath, randomData(1024, 2))
	out = mustSluice(t, "gc", v.metaURL)
	if leakedCount(t, out) != "0" || !strings.Contains(out, "younger than 1h0m0s: 1") {
		t.Fatalf("gc did not skip a young object:\n%s", out)
	}
	out = mustSluice(t, "gc", v.metaURL, "--min-age", "0")
	if leakedCount(t, out) != "1" || !strings.Contains(out, "leaked: "+stray) {
		t.Fatalf("gc does not list the stray block:\n%s", out)
	}
	if _, err := os.Stat(strayPath); err != nil {
		t.Fatalf("gc without --delete deleted something: %v", err)
	}
	mustSluice(t, "gc", v.metaURL, "--min-age", "0", "--delete", "--threads", "4")
	if _, err := os.Stat(strayPath); !os.IsNotExist(err) {
		t.Fatalf("gc --delete left the stray block: %v", err)
	}
	v.wantFsckClean(t)

	// The data survived gc.
	v.mount(t)
	if got, err := os.ReadFile(v.path("big")); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("big after gc: %d bytes, %v", len(got), err)
	}
	v.umount(t)

	// A missing block is named, with its file, and fsck fails.
	keys := v.blockKeys(t)
	if len(keys) < 4 {
		t.Fatalf("bucket holds %d blocks, want at least 4: %v", len(keys), keys)
	}
	var victim string
	for _, k := range keys {
		if strings.HasSuffix(k, "_1_4194304") {
			victim = k
		}
	}
	if victim == "" {
		t.Fatalf("no second block of a 4 MiB-block slice among %v", keys)
	}
	if err := os.Remove(filepath.Join(v.bucket, "vol", filepath.FromSlash(victim))); err != nil {
		t.Fatal(err)
	}
	r := sluice(t, "fsck", v.metaURL)
	if r.code == 0 {
		t.Fatalf("fsck exits 0 with a missing block:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "/big, chunk 0): block "+victim+" missing") {
		t.Fatalf("fsck does not name the missing block %s of /big:\n%s\n%s", victim, r.stdout, r.stderr)
	}
	// Outside the damaged file's subtree all is well.
	v.wantFsckClean(t, "--path", "/d")
}

func TestCompactOffline(t *testing.T) {
	v := newVolume(t)
	v.mount(t)
	f, err := os.Create(v.path("frag"))
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	// Fewer pieces than make the mount check for compaction on its own.
	for i := 0; i < 19; i++ {
		p := randomData(1000+i, uint64(i))
		if _, err := f.Write(p); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil { // each fsync commits a slice
			t.Fatal(err)
		}
		want = append(want, p...)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	v.umount(t)
	before := len(v.blockKeys(t))

	out := mustSluice(t, "compact", v.metaURL, "--path", "/frag")
	if !strings.Contains(out, "compacted 1 chunks") {
		t.Fatalf("compact output:\n%s", out)
	}
	v.wantFsckClean(t)
	v.mount(t)
	if got, err := os.ReadFile(v.path("frag")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("content after compaction differs: %d bytes, %v", len(got), err)
	}
	v.umount(t)
	// The replaced slices are deleted at once; gc finds nothing leaked.
	out = mustSluice(t, "gc", v.metaURL, "--min-age", "0")
	if leakedCount(t, out) != "0" {
		t.Fatalf("gc finds leaks after compaction:\n%s", out)
	}
	if after := len(v.blockKeys(t)); after != 1 {
		t.Errorf("blocks before compaction %d, after %d; want 1 (the new slice)", before, after)
	}
	r := sluice(t, "compact", v.metaURL, "--path", "/missing")
	if r.code == 0 {
		t.Errorf("compact of a missing path succeeds:\n%s", r.stdout)
	}
}

// TestKilledMountLeavesConsistentVolume kills the mount process in the
// middle of large writes: the volume stays consistent, and gc finds and
// deletes the blocks uploaded for slices never committed.
func TestKilledMountLeavesConsistentVolume(t *testing.T) {
	v := newVolume(t)
	cmd, _, done := v.mountForeground(t, "--cache-dir", filepath.Join(v.dir, "cache"))
	write(t, v.path("before"), randomData(5<<20, 3))

	// Writers keep writing large files until the mount dies under them.
	chunkData := randomData(1<<20, 4)
	writers := make(chan int64, 3)
	for i := range 3 {
		go func() {
			var n int64
			defer func() { writers <- n }()
			f, err := os.Create(v.path("big" + string(rune('0'+i))))
			if err != nil {
				return
			}
			defer f.Close()
			for n < 200<<20 {
				if _, err := f.Write(chunkData); err != nil {
					return
				}
				n += int64(len(chunkData))
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond) // let the writes get going
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-done
	sluice(t, "umount", "--force", v.mnt)
	for range 3 {
		<-writers
	}
	if mounted(v.mnt) {
		t.Fatal("still mounted after kill and forced unmount")
	}

	v.wantFsckClean(t)
	out := mustSluice(t, "gc", v.metaURL, "--min-age", "0")
	t.Logf("gc after the kill:\n%s", out)
	mustSluice(t, "gc", v.metaURL, "--min-age", "0", "--delete")
	out = mustSluice(t, "gc", v.metaURL, "--min-age", "0")
	if leakedCount(t, out) != "0" {
		t.Fatalf("leaks left after gc --delete:\n%s", out)
	}
	v.wantFsckClean(t)
	v.mount(t)
	if got, err := os.ReadFile(v.path("before")); err != nil || !bytes.Equal(got, randomData(5<<20, 3)) {
		t.Fatalf("file written before the kill: %d bytes, %v", len(got), err)
	}
	for i := range 3 {
		got, err := os.ReadFile(v.path("big" + string(rune('0'+i))))
		if err != nil {
			continue // the create itself may not have happened
		}
		// Without fsync nothing promises which writes were committed, so
		// a piece may read as a hole; but never as other bytes.
		zeros := make([]byte, len(chunkData))
		for off := 0; off < len(got); off += len(chunkData) {
			piece := got[off:min(len(got), off+len(chunkData))]
			if !bytes.Equal(piece, chunkData[:len(piece)]) && !bytes.Equal(piece, zeros[:len(piece)]) {
				t.Fatalf("big%d: data at %d is neither what was written nor a hole", i, off)
			}
		}
	}
}
