package cache

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const testUUID = "0f1e2d3c-volume"

// fakeSpace is an injected statfs: fixed numbers, changeable by the test.
type fakeSpace struct {
	mu           sync.Mutex
	avail, total uint64
}

func (f *fakeSpace) set(avail, total uint64) {
	f.mu.Lock()
	f.avail, f.total = avail, total
	f.mu.Unlock()
}

func (f *fakeSpace) statfs(string) (uint64, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.avail, f.total, nil
}

// openDisk opens a disk cache over dirs with conf's limits (Capacity and
// StagingLimit default to 1 GiB) and closes it at the end of the test.
func openDisk(t testing.TB, dirs []string, conf DiskConfig) *Disk {
	t.Helper()
	conf.Dirs, conf.VolumeUUID = dirs, testUUID
	if conf.Capacity == 0 {
		conf.Capacity = 1 << 30
	}
	if conf.StagingLimit == 0 {
		conf.StagingLimit = 1 << 30
	}
	d, err := NewDisk(conf)
	if err != nil {
		t.Fatalf("NewDisk: %v", err)
	}
	t.Cleanup(d.Close)
	return d
}

func blockKey(i int) string { return fmt.Sprintf("chunks/0/0/%d_0_%d", 1000+i, 5000+i) }

func blockData(i int) []byte { return randomBytes(uint64(i), 5000+i) }

// rawPath returns the cache file of key when it exists in one of dirs.
func rawPath(t *testing.T, dirs []string, key string) string {
	t.Helper()
	for _, dir := range dirs {
		p := filepath.Join(dir, testUUID, "raw", filepath.FromSlash(key))
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("no cache file for %s in %q", key, dirs)
	return ""
}

func wantHit(t *testing.T, d *Disk, i int) {
	t.Helper()
	b, ok := d.Get(blockKey(i))
	if !ok {
		t.Fatalf("Get(%s): miss, want a hit", blockKey(i))
	}
	if !bytes.Equal(b, blockData(i)) {
		t.Fatalf("Get(%s): wrong bytes", blockKey(i))
	}
}

func wantMiss(t *testing.T, d *Disk, i int) {
	t.Helper()
	if b, ok := d.Get(blockKey(i)); ok {
		t.Fatalf("Get(%s) returned %d bytes, want a miss", blockKey(i), len(b))
	}
}

// TestDiskRestart caches blocks in several directories, reopens the cache
// and finds them all, both while the restart scan runs and after it.
func TestDiskRestart(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	d := openDisk(t, dirs, DiskConfig{})
	const n = 30
	for i := range n {
		d.Put(blockKey(i), blockData(i))
		d.Flush()
	}
	for i := range n {
		wantHit(t, d, i)
	}
	used := d.Used()
	d.Close()

	perDir := map[string]int{}
	for i := range n {
		p := rawPath(t, dirs, blockKey(i))
		for _, dir := range dirs {
			if strings.HasPrefix(p, dir+string(filepath.Separator)) {
				perDir[dir]++
			}
		}
	}
	for _, dir := range dirs {
		if perDir[dir] == 0 {
			t.Errorf("no block went to %s: %v", dir, perDir)
		}
	}

	d = openDisk(t, dirs, DiskConfig{})
	for i := range n / 2 { // maybe during the scan
		wantHit(t, d, i)
	}
	d.WaitScanned()
	for i := range n {
		wantHit(t, d, i)
	}
	if got := d.Used(); got != used {
		t.Errorf("Used after restart = %d, want %d", got, used)
	}
	d.Remove(blockKey(3))
	wantMiss(t, d, 3)
	if got, want := d.Used(), used-encodedSize(len(blockData(3))); got != want {
		t.Errorf("Used after Remove = %d, want %d", got, want)
	}
}

// TestDiskCorruption damages cached files and checks that reads detect it,
// report a miss and remove the file.
func TestDiskCorruption(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"flip a data byte", func(t *testing.T, p string) { flipByte(t, p, 100) }},
		{"flip a trailer byte", func(t *testing.T, p string) { flipByte(t, p, -3) }},
		{"truncate", func(t *testing.T, p string) { truncate(t, p, 4000) }},
		{"truncate to zero", func(t *testing.T, p string) { truncate(t, p, 0) }},
		{"replace with another block", func(t *testing.T, p string) {
			if err := os.WriteFile(p, encode(blockKey(99), blockData(99)), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		for _, ranged := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ranged=%v", tt.name, ranged), func(t *testing.T) {
				dirs := []string{t.TempDir()}
				d := openDisk(t, dirs, DiskConfig{})
				d.Put(blockKey(1), blockData(1))
				d.Flush()
				p := rawPath(t, dirs, blockKey(1))
				tt.damage(t, p)
				if ranged {
					buf := make([]byte, 200)
					if d.ReadAt(blockKey(1), buf, 0) {
						t.Fatal("ReadAt of a damaged block succeeded")
					}
				} else {
					wantMiss(t, d, 1)
				}
				if tt.name != "replace with another block" || !ranged {
					if _, err := os.Stat(p); !os.IsNotExist(err) {
						t.Errorf("damaged file still there (stat: %v)", err)
					}
				}
				if d.Used() != 0 {
					t.Errorf("Used = %d after dropping the only block", d.Used())
				}
				wantMiss(t, d, 1)
				d.Put(blockKey(1), blockData(1)) // can be cached again
				d.Flush()
				wantHit(t, d, 1)
			})
		}
	}
}

func flipByte(t *testing.T, path string, at int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if at < 0 {
		at += int64(len(b))
	}
	b[at] ^= 0x40
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string, n int64) {
	t.Helper()
	if err := os.Truncate(path, n); err != nil {
		t.Fatal(err)
	}
}

func TestDiskReadAt(t *testing.T) {
	d := openDisk(t, []string{t.TempDir()}, DiskConfig{})
	data := randomBytes(5, 4<<20)
	key := "chunks/0/0/7_0_4194304"
	buf := make([]byte, 4096)
	if d.ReadAt(key, buf, 0) {
		t.Fatal("ReadAt of an uncached block succeeded")
	}
	d.Put(key, data)
	if !d.ReadAt(key, buf, 12345) || !bytes.Equal(buf, data[12345:12345+4096]) { // maybe still queued
		t.Fatal("ReadAt of a queued block failed or returned wrong bytes")
	}
	d.Flush()
	for _, off := range []int64{0, pageSize - 100, 3 << 20, int64(len(data)) - 4096} {
		clear(buf)
		if !d.ReadAt(key, buf, off) || !bytes.Equal(buf, data[off:off+4096]) {
			t.Errorf("ReadAt(%d) failed or returned wrong bytes", off)
		}
	}
	if d.ReadAt(key, buf, int64(len(data))-10) {
		t.Error("ReadAt past the end of the block succeeded")
	}
	wantKept := encodedSize(len(data))
	if d.Used() != wantKept {
		t.Errorf("a range read past the end dropped the block: Used = %d, want %d", d.Used(), wantKept)
	}
}

// TestDiskEviction keeps a small cache within its capacity, evicting the
// least recently used blocks.
func TestDiskEviction(t *testing.T) {
	dirs := []string{t.TempDir()}
	size := encodedSize(len(blockData(0))) + 10 // every block is at most this
	d := openDisk(t, dirs, DiskConfig{Capacity: 4 * size})
	for i := range 4 {
		d.Put(blockKey(i), blockData(i))
		d.Flush()
	}
	wantHit(t, d, 0) // 0 becomes the most recent
	for i := 4; i < 10; i++ {
		d.Put(blockKey(i), blockData(i))
		d.Flush()
		if d.Used() > 4*size {
			t.Fatalf("Used = %d after %d blocks, capacity %d", d.Used(), i+1, 4*size)
		}
	}
	// The newest four (7, 8, 9 and whichever survived) are in.
	for i := 7; i < 10; i++ {
		wantHit(t, d, i)
	}
	for _, i := range []int{1, 2, 3, 4, 5} {
		wantMiss(t, d, i)
	}
	var files int
	filepath.Walk(filepath.Join(dirs[0], testUUID, "raw"), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			files++
		}
		return nil
	})
	if files != 4 {
		t.Errorf("%d files in the cache directory, want 4", files)
	}

	// A restart with a smaller capacity evicts down to it.
	d.Close()
	d = openDisk(t, dirs, DiskConfig{Capacity: 2 * size})
	d.WaitScanned()
	if d.Used() > 2*size || d.Used() == 0 {
		t.Errorf("Used after a restart with capacity %d = %d", 2*size, d.Used())
	}
}

// TestDiskFreeSpace checks the free-space ratio with injected statfs
// numbers: below the floor nothing is cached and cached blocks are
// evicted to give the space back.
func TestDiskFreeSpace(t *testing.T) {
	fs := &fakeSpace{avail: 50 << 30, total: 100 << 30}
	d := openDisk(t, []string{t.TempDir()}, DiskConfig{FreeSpaceRatio: 0.2, Statfs: fs.statfs})
	for i := range 3 {
		d.Put(blockKey(i), blockData(i))
		d.Flush()
		wantHit(t, d, i)
	}
	before := d.Used()
	// 20% of 100 GiB must stay free; 15 KiB short of it, with about 15 KiB
	// cached: the cache frees what it has and does not write.
	fs.set(uint64(20<<30-before-100), 100<<30)
	d.Put(blockKey(3), blockData(3))
	d.Flush()
	wantMiss(t, d, 3)
	if d.Used() != 0 {
		t.Errorf("Used = %d below the free-space floor, want 0 (everything evicted)", d.Used())
	}
	// Another program fills the disk: the periodic check gives space back.
	fs.set(50<<30, 100<<30)
	for i := range 3 {
		d.Put(blockKey(i), blockData(i))
		d.Flush()
	}
	fs.set(20<<30-uint64(encodedSize(len(blockData(0))))-10, 100<<30)
	d.dirs[0].checkSpace()
	if got, want := d.Used(), 3*encodedSize(5001); got >= want || got == 0 {
		t.Errorf("Used = %d after a check slightly below the floor, want one block evicted of %d", got, want)
	}
	wantMiss(t, d, 0) // the least recently used one
	// Just above the floor with room for one block: it is cached.
	fs.set(20<<30+uint64(encodedSize(len(blockData(4)))), 100<<30)
	d.Put(blockKey(4), blockData(4))
	d.Flush()
	wantHit(t, d, 4)
}
