package cache

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/testserver"
)

// openCacheFiles returns the paths of the files under dir that the
// process has open (a removed file has " (deleted)" appended).
func openCacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		testserver.Missing(t, fmt.Sprintf("cannot list this process's open files (%v)", err), "the test needs Linux's /proc")
	}
	var paths []string
	for _, fd := range fds {
		p, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(p, dir+string(filepath.Separator)) {
			paths = append(paths, p)
		}
	}
	return paths
}

// bigKey and bigData are a block of 16 pages.
func bigKey(i int) string { return fmt.Sprintf("chunks/0/0/%d_0_%d", 2000+i, 16*pageSize) }

func bigData(i int) []byte { return randomBytes(uint64(100+i), 16*pageSize) }

func wantRange(t *testing.T, d *Disk, i int, off, n int) {
	t.Helper()
	p := make([]byte, n)
	if !d.ReadAt(bigKey(i), p, int64(off)) || !bytes.Equal(p, bigData(i)[off:off+n]) {
		t.Fatalf("ReadAt(%s, %d+%d) failed or returned wrong bytes", bigKey(i), off, n)
	}
}

// TestDiskOpenFiles checks that range reads keep at most OpenFiles files
// open, and that Remove, eviction and Close close them.
func TestDiskOpenFiles(t *testing.T) {
	dir := t.TempDir()
	size := encodedSize(16 * pageSize)
	d := openDisk(t, []string{dir}, DiskConfig{OpenFiles: 3, Capacity: 5 * size})
	d.WaitScanned() // the scan holds directories open
	for i := range 5 {
		d.Put(bigKey(i), bigData(i))
		d.Flush()
	}
	for i := range 5 {
		wantRange(t, d, i, 100, 5000)
		if got, want := len(openCacheFiles(t, dir)), min(i+1, 3); got != want {
			t.Fatalf("%d files open after reading %d blocks, want %d", got, i+1, want)
		}
	}
	wantRange(t, d, 2, 0, pageSize) // 2, 3, 4 open; reading 2 again opens nothing
	if got := len(openCacheFiles(t, dir)); got != 3 {
		t.Fatalf("%d files open after reading an open block, want 3", got)
	}

	d.Remove(bigKey(4))
	if p := make([]byte, 10); d.ReadAt(bigKey(4), p, 0) {
		t.Error("ReadAt of a removed block succeeded")
	}
	for _, f := range openCacheFiles(t, dir) {
		if strings.Contains(f, bigKey(4)) {
			t.Errorf("the removed block's file is still open: %s", f)
		}
	}

	// Two new blocks evict the least recently used: 0 and 1 (closed
	// already), then 3, read before 2.
	for i := 5; i < 7; i++ {
		d.Put(bigKey(i), bigData(i))
		d.Flush()
	}
	wantRange(t, d, 2, 0, 10)
	d.Put(bigKey(7), bigData(7))
	d.Flush()
	d.Put(bigKey(8), bigData(8))
	d.Flush()
	for _, f := range openCacheFiles(t, dir) {
		if strings.HasSuffix(f, " (deleted)") {
			t.Errorf("an evicted block's file is still open, holding its space: %s", f)
		}
	}

	d.Close()
	if files := openCacheFiles(t, dir); len(files) != 0 {
		t.Errorf("files open after Close: %q", files)
	}
	// Reads after Close still work, without keeping files open.
	wantRange(t, d, 2, 0, 10)
	if files := openCacheFiles(t, dir); len(files) != 0 {
		t.Errorf("files open after a read after Close: %q", files)
	}
}

// TestDiskOpenFileDamaged damages a cached file after a read has opened
// it: a read through the open file must never return wrong bytes, and a
// file found damaged is removed.
func TestDiskOpenFileDamaged(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
		// the range read after the damage, and whether the damage must
		// be seen (the file may also keep serving the old bytes).
		off, n int
		seen   bool
	}{
		{"flip a data byte in place", func(t *testing.T, p string) { flipByte(t, p, 3*pageSize+5) }, 3 * pageSize, 100, true},
		{"flip a data byte in a whole page", func(t *testing.T, p string) { flipByte(t, p, 3*pageSize+5) }, 3 * pageSize, pageSize, true},
		{"truncate in place", func(t *testing.T, p string) { truncate(t, p, 4*pageSize) }, 6 * pageSize, 10, true},
		{"overwrite with another block in place", func(t *testing.T, p string) {
			if err := os.WriteFile(p, encode(bigKey(0), bigData(9)), 0o600); err != nil {
				t.Fatal(err)
			}
		}, 0, 2 * pageSize, true},
		{"flip a page sum in place", func(t *testing.T, p string) { flipByte(t, p, 16*pageSize+1) }, 0, 10, false},
		{"rename another block over it", func(t *testing.T, p string) {
			if err := os.WriteFile(p+".new", encode(bigKey(9), bigData(9)), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(p+".new", p); err != nil {
				t.Fatal(err)
			}
		}, 0, 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dirs := []string{t.TempDir()}
			d := openDisk(t, dirs, DiskConfig{})
			d.Put(bigKey(0), bigData(0))
			d.Flush()
			wantRange(t, d, 0, 10, 10) // opens the file
			path := rawPath(t, dirs, bigKey(0))
			tt.damage(t, path)
			p := make([]byte, tt.n)
			ok := d.ReadAt(bigKey(0), p, int64(tt.off))
			if ok && !bytes.Equal(p, bigData(0)[tt.off:tt.off+tt.n]) {
				t.Fatal("ReadAt returned wrong bytes")
			}
			if !tt.seen {
				return
			}
			if ok {
				t.Fatal("ReadAt of a damaged range succeeded")
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("damaged file still there (stat: %v)", err)
			}
			if d.Used() != 0 {
				t.Errorf("Used = %d after dropping the only block", d.Used())
			}
			d.Put(bigKey(0), bigData(0)) // can be cached again
			d.Flush()
			wantRange(t, d, 0, 3*pageSize, pageSize)
		})
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDiskReadAtConcurrent reads ranges from several goroutines while
// blocks are removed, cached again and evicted: every read that succeeds
// returns the right bytes, no read fails on a file closed under it (which
// would drop a good block with a warning), no file of a block that left
// the cache stays open, and none at all after Close. With two open files
// they are replaced all the time; with 16 all blocks fit.
func TestDiskReadAtConcurrent(t *testing.T) {
	for _, open := range []int{2, 16} {
		t.Run(fmt.Sprintf("open=%d", open), func(t *testing.T) { testReadAtConcurrent(t, open) })
	}
}

func testReadAtConcurrent(t *testing.T, openFiles int) {
	dir := t.TempDir()
	var log syncBuffer
	const blocks = 8
	d := openDisk(t, []string{dir}, DiskConfig{
		OpenFiles: openFiles,
		Capacity:  5 * encodedSize(16*pageSize),
		Logger:    slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	data := make([][]byte, blocks)
	for i := range data {
		data[i] = bigData(i)
		d.Put(bigKey(i), data[i])
		d.Flush()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	hits := 0
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			p := make([]byte, 3*pageSize)
			n := 0
			defer func() { mu.Lock(); hits += n; mu.Unlock() }()
			for {
				select {
				case <-stop:
					return
				default:
				}
				i, m := r.IntN(blocks), 1+r.IntN(len(p))
				off := r.IntN(len(data[i]) - m + 1)
				if r.IntN(2) == 0 {
					off -= off % pageSize
				}
				if d.ReadAt(bigKey(i), p[:m], int64(off)) {
					if !bytes.Equal(p[:m], data[i][off:off+m]) {
						t.Errorf("ReadAt(%s, %d+%d) returned wrong bytes", bigKey(i), off, m)
						return
					}
					n++
				}
			}
		})
	}
	wg.Go(func() {
		r := rand.New(rand.NewPCG(9, 1))
		for {
			select {
			case <-stop:
				return
			default:
			}
			i := r.IntN(blocks)
			if r.IntN(3) == 0 {
				d.Remove(bigKey(i))
			}
			d.Put(bigKey(i), data[i]) // evicts another one
			d.Flush()
		}
	})
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	if hits == 0 {
		t.Error("no read succeeded")
	}
	if strings.Contains(log.String(), "unreadable") {
		t.Errorf("a good block was dropped as unreadable:\n%s", log.String())
	}
	for _, f := range openCacheFiles(t, dir) {
		if strings.HasSuffix(f, " (deleted)") {
			t.Errorf("the file of a block removed or evicted is still open: %s", f)
		}
	}
	d.Close()
	if files := openCacheFiles(t, dir); len(files) != 0 {
		t.Errorf("files open after Close: %q", files)
	}
	t.Logf("%d reads succeeded", hits)
}
