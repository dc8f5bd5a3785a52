package cache

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/localdir"
	"github.com/sluicefs/sluice/internal/testserver"
)

func stagedPath(dir, key string) string {
	return filepath.Join(dir, testUUID, "rawstaging", filepath.FromSlash(key))
}

func TestStageAndRecover(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	d := openDisk(t, dirs, DiskConfig{})
	var keys []string
	for i := range 6 {
		if err := d.Stage(blockKey(i), blockData(i)); err != nil {
			t.Fatalf("Stage: %v", err)
		}
		keys = append(keys, blockKey(i))
		wantHit(t, d, i) // the writing mount reads its own staged blocks
	}
	slices.Sort(keys)
	if got := d.Staged(); !slices.Equal(got, keys) {
		t.Fatalf("Staged = %q, want %q", got, keys)
	}
	// A crash leaves a temporary file next to the staged ones.
	tmp := stagedPath(dirs[0], "chunks/0/0/5_0_10.tmp.123")
	if err := os.MkdirAll(filepath.Dir(tmp), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(tmp, old, old); err != nil {
		t.Fatal(err)
	}
	used := d.StagedUsed()
	d.Close() // no upload: as after a crash

	d = openDisk(t, dirs, DiskConfig{})
	if got := d.Staged(); !slices.Equal(got, keys) {
		t.Fatalf("Staged after restart = %q, want %q", got, keys)
	}
	if d.StagedUsed() != used {
		t.Errorf("StagedUsed after restart = %d, want %d", d.StagedUsed(), used)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("temporary staging file survived the restart scan (stat: %v)", err)
	}
	for i := range 6 {
		b, err := d.ReadStaged(blockKey(i))
		if err != nil || !bytes.Equal(b, blockData(i)) {
			t.Fatalf("ReadStaged(%s): %v or wrong bytes", blockKey(i), err)
		}
	}
	// Uploaded moves a block into the cache.
	d.Uploaded(blockKey(0))
	d.WaitScanned()
	wantHit(t, d, 0)
	if _, err := d.ReadStaged(blockKey(0)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadStaged after Uploaded: err = %v, want ErrNotExist", err)
	}
	if d.Used() != encodedSize(len(blockData(0))) {
		t.Errorf("Used = %d after Uploaded, want the block's size", d.Used())
	}
	// Unstage drops one.
	d.Unstage(blockKey(1))
	wantMiss(t, d, 1)
	if got := d.Staged(); slices.Contains(got, blockKey(1)) || slices.Contains(got, blockKey(0)) || len(got) != 4 {
		t.Errorf("Staged = %q, want the four left", got)
	}
}

func TestStageCorrupt(t *testing.T) {
	dirs := []string{t.TempDir()}
	d := openDisk(t, dirs, DiskConfig{})
	if err := d.Stage(blockKey(1), blockData(1)); err != nil {
		t.Fatal(err)
	}
	flipByte(t, stagedPath(dirs[0], blockKey(1)), 7)
	wantMiss(t, d, 1)
	if _, err := d.ReadStaged(blockKey(1)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ReadStaged of a damaged file: err = %v, want ErrCorrupt", err)
	}
	if len(d.Staged()) != 0 || d.StagedUsed() != 0 {
		t.Errorf("a corrupt staged block is still listed: %q, %d bytes", d.Staged(), d.StagedUsed())
	}
}

func TestStagingFull(t *testing.T) {
	size := encodedSize(len(blockData(0))) + 10
	t.Run("limit", func(t *testing.T) {
		d := openDisk(t, []string{t.TempDir()}, DiskConfig{StagingLimit: 2 * size})
		for i := range 2 {
			if err := d.Stage(blockKey(i), blockData(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Stage(blockKey(2), blockData(2)); !errors.Is(err, ErrStagingFull) {
			t.Fatalf("Stage beyond the limit: err = %v, want ErrStagingFull", err)
		}
		wantMiss(t, d, 2)
		d.Uploaded(blockKey(0)) // frees room
		if err := d.Stage(blockKey(2), blockData(2)); err != nil {
			t.Fatalf("Stage after an upload: %v", err)
		}
	})
	t.Run("free space", func(t *testing.T) {
		sp := &fakeSpace{avail: 50 << 30, total: 100 << 30}
		d := openDisk(t, []string{t.TempDir()}, DiskConfig{FreeSpaceRatio: 0.1, Statfs: sp.statfs})
		d.Put(blockKey(0), blockData(0)) // a cached block staging may evict
		d.Flush()
		cached := d.Used()
		sp.set(10<<30+uint64(size)-uint64(cached), 100<<30)
		if err := d.Stage(blockKey(1), blockData(1)); err != nil {
			t.Fatalf("Stage that fits after evicting the cache: %v", err)
		}
		if d.Used() != 0 {
			t.Errorf("Used = %d: staging below the floor did not evict the cache", d.Used())
		}
		sp.set(10<<30, 100<<30)
		if err := d.Stage(blockKey(2), blockData(2)); !errors.Is(err, ErrStagingFull) {
			t.Fatalf("Stage at the floor: err = %v, want ErrStagingFull", err)
		}
	})
}

func TestDiskBadConfig(t *testing.T) {
	for _, conf := range []DiskConfig{
		{VolumeUUID: "u"},
		{Dirs: []string{t.TempDir()}},
		{Dirs: []string{t.TempDir()}, VolumeUUID: "../x"},
		{Dirs: []string{t.TempDir()}, VolumeUUID: "u", FreeSpaceRatio: 1},
		{Dirs: []string{""}, VolumeUUID: "u"},
	} {
		if _, err := NewDisk(conf); err == nil {
			t.Errorf("NewDisk(%+v) succeeded", conf)
		}
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewDisk(DiskConfig{Dirs: []string{file}, VolumeUUID: "u", Capacity: 1}); err == nil {
		t.Error("NewDisk over a regular file succeeded")
	}
}

func TestBadKeys(t *testing.T) {
	d := openDisk(t, []string{t.TempDir()}, DiskConfig{})
	for _, key := range []string{"", "/abs", "../up", "a/../../b", "a//b", "x.tmp.1"} {
		d.Put(key, []byte("x"))
		d.Flush()
		if _, ok := d.Get(key); ok {
			t.Errorf("Get(%q) hit", key)
		}
		if err := d.Stage(key, []byte("x")); err == nil {
			t.Errorf("Stage(%q) succeeded", key)
		}
	}
}

// TestDiskSpreadsBlockDirectories checks that the cache makes its block
// directories with localdir, so that ext4 spreads them: the directories
// it made a directory in are marked, the cache directory (the user's) is
// not.
func TestDiskSpreadsBlockDirectories(t *testing.T) {
	dir := t.TempDir()
	if err := localdir.Probe(dir); err != nil {
		testserver.Missing(t, fmt.Sprintf("a file system that keeps FS_TOPDIR_FL under %s (%v)", dir, err), "put TMPDIR on ext4")
	}
	d := openDisk(t, []string{dir}, DiskConfig{})
	if err := d.Stage(blockKey(1), blockData(1)); err != nil {
		t.Fatal(err)
	}
	d.Uploaded(blockKey(1)) // moves the file into the cache's own tree
	wantHit(t, d, 1)
	for _, tt := range []struct {
		dir  string
		want bool
	}{
		{dir, false},
		{filepath.Join(dir, testUUID), true},
		{stagedPath(dir, "chunks/0"), true},
		{filepath.Join(dir, testUUID, "raw", "chunks", "0"), true},
		{stagedPath(dir, "chunks/0/0"), false},
	} {
		if got, err := localdir.Spreads(tt.dir); err != nil || got != tt.want {
			t.Errorf("%s marked as a top directory: %v (%v), want %v", tt.dir, got, err, tt.want)
		}
	}
}
