package e2e

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// bucketBytes returns the bytes of the blocks volume "vol" stores.
func (v *volume) bucketBytes(t *testing.T) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(filepath.Join(v.bucket, "vol", "chunks"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // deleted while walking
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			n += info.Size()
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return n
}

// freeAddr returns a loopback address with a port free now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scrape returns the unlabelled samples a mount serves at addr/metrics.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || strings.HasPrefix(line, "#") || strings.Contains(f[0], "{") {
			continue
		}
		x, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[f[0]] = x
	}
	return out
}

// TestOverwriteSpace rewrites a file that spans two chunks in place, in
// random pieces of 64 KiB to 8 MiB with an fsync every 16 writes (a
// database, a VM image), and checks that the bucket stays near the file's
// size while it runs and settles to it afterwards, and that every byte
// reads back right, on this mount and on a fresh one.
func TestOverwriteSpace(t *testing.T) {
	v := newVolume(t)
	addr := freeAddr(t)
	v.mount(t, "--metrics", addr)
	const size = 80 << 20
	want := randomData(size, 1)
	path := v.path("db")
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // samples the bucket as the writes go on
		defer close(sampled)
		for {
			peak.Store(max(peak.Load(), v.bucketBytes(t)))
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	rng := rand.New(rand.NewPCG(2, 2))
	const writes = 256
	for i := 1; i <= writes; i++ {
		n := 64<<10 + rng.IntN(8<<20-64<<10)
		off := rng.IntN(size - n)
		p := want[off : off+n]
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		if _, err := f.WriteAt(p, int64(off)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if i%16 == 0 {
			if err := f.Sync(); err != nil {
				t.Fatalf("fsync: %v", err)
			}
			peak.Store(max(peak.Load(), v.bucketBytes(t)))
		}
	}
	close(stop)
	<-sampled
	t.Logf("file %d MiB, %d writes: bucket peaked at %.1f MiB (%.2fx)", size>>20, writes,
		float64(peak.Load())/(1<<20), float64(peak.Load())/size)
	// Before: 200x the file and more. The benchmark (bench/overwrite.sh)
	// holds the peak to 2x; a loaded test machine gets some slack.
	if peak.Load() > 3*size {
		t.Errorf("the bucket peaked at %d bytes for a %d-byte file", peak.Load(), size)
	}
	eventuallyWithin(t, 60*time.Second, "the bucket settles near the file's size", func() error {
		if n := v.bucketBytes(t); n > size*5/4 {
			return fmt.Errorf("the bucket holds %d bytes (%.2fx the file)", n, float64(n)/size)
		}
		return nil
	})
	t.Logf("settled at %.2fx", float64(v.bucketBytes(t))/size)
	// The mount's metrics tell what compaction and deletion did, and
	// what the chunks still waste.
	m := scrape(t, addr)
	for _, name := range []string{"sluice_compaction_chunks_total", "sluice_compaction_freed_bytes_total", "sluice_deletion_slices_total", "sluice_deletion_bytes_total"} {
		if m[name] <= 0 {
			t.Errorf("metric %s = %v after a compacted overwrite workload", name, m[name])
		}
	}
	if w, ok := m["sluice_compaction_waste_bytes"]; !ok || w > size/4 {
		t.Errorf("sluice_compaction_waste_bytes = %v (present %v), want at most a quarter of the file", w, ok)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("content through the writing mount differs (%v)", err)
	}
	other := filepath.Join(v.dir, "other")
	v.mountAt(t, other)
	if got, err := os.ReadFile(filepath.Join(other, "db")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("content through a fresh mount differs (%v)", err)
	}
	mustSluice(t, "umount", other)
	f.Close()
	v.umount(t)
	v.wantFsckClean(t)
	if out := readFile(t, v.log); bytes.Contains([]byte(out), []byte("level=ERROR")) {
		t.Errorf("the mount logged errors:\n%s", out)
	}
}

// record is the unit the readers of TestOverwriteReaders check: every
// write covers whole records, and each record names the write and its own
// index in every 8 bytes, so a read that mixed two writes, or read bytes
// from the wrong place, shows.
const record = 64 << 10

func fillRecord(p []byte, gen, idx uint64) {
	w := gen<<32 | idx
	for i := 0; i < len(p); i += 8 {
		binary.LittleEndian.PutUint64(p[i:], w)
	}
}

func checkRecord(p []byte, idx uint64) error {
	w := binary.LittleEndian.Uint64(p)
	if uint64(uint32(w)) != idx {
		return fmt.Errorf("record %d holds record %d of write %d", idx, uint32(w), w>>32)
	}
	for i := 8; i < len(p); i += 8 {
		if x := binary.LittleEndian.Uint64(p[i:]); x != w {
			return fmt.Errorf("record %d mixes write %d (index %d) at byte %d with write %d", idx, x>>32, uint32(x), i, w>>32)
		}
	}
	return nil
}

// alignedBuffer returns n bytes aligned for O_DIRECT.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+4096)
	skip := int(-uintptr(unsafe.Pointer(&b[0])) & 4095)
	return b[skip : skip+n]
}

// TestOverwriteReaders: readers on two mounts read a file while a third
// mount rewrites it in place and compacts it, deleting the slices it
// replaces at once. The readers keep their files open (their slice lists
// go stale) and read with O_DIRECT (every read reaches their mount): no
// read may fail or return bytes that are not a whole record of some write.
func TestOverwriteReaders(t *testing.T) {
	v := newVolume(t)
	mnts := v.mounts(t, 3)
	const records = 256 // 16 MiB
	path := func(i int) string { return filepath.Join(mnts[i], "f") }
	init := alignedBuffer(records * record)
	for i := 0; i < records; i++ {
		fillRecord(init[i*record:(i+1)*record], 0, uint64(i))
	}
	if err := os.WriteFile(path(0), init, 0o644); err != nil {
		t.Fatal(err)
	}

	done := make(chan struct{})
	var reads, errs atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		errs.Add(1)
		firstErr.CompareAndSwap(nil, err)
	}
	var wg sync.WaitGroup
	for r := 1; r <= 2; r++ {
		for k := 0; k < 2; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(r), uint64(k)))
				buf := alignedBuffer(16 * record)
				var f *os.File
				defer func() {
					if f != nil {
						f.Close()
					}
				}()
				for n := 0; ; n++ {
					select {
					case <-done:
						return
					default:
					}
					if n%64 == 0 { // now and then a fresh open, with fresh lists
						if f != nil {
							f.Close()
						}
						var err error
						if f, err = os.OpenFile(path(r), os.O_RDONLY|syscall.O_DIRECT, 0); err != nil {
							fail(fmt.Errorf("open on mount %d: %w", r, err))
							return
						}
					}
					cnt := 1 + rng.IntN(16)
					first := rng.IntN(records - cnt + 1)
					p := buf[:cnt*record]
					if _, err := f.ReadAt(p, int64(first*record)); err != nil {
						fail(fmt.Errorf("read on mount %d: %w", r, err))
						continue
					}
					reads.Add(1)
					for i := 0; i < cnt; i++ {
						if err := checkRecord(p[i*record:(i+1)*record], uint64(first+i)); err != nil {
							fail(fmt.Errorf("mount %d: %w", r, err))
							break
						}
					}
				}
			}()
		}
	}

	w, err := os.OpenFile(path(0), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	buf := make([]byte, 64*record)
	const writes = 400
	for gen := uint64(1); gen <= writes; gen++ {
		cnt := 1 + rng.IntN(64)
		first := rng.IntN(records - cnt + 1)
		for i := 0; i < cnt; i++ {
			fillRecord(buf[i*record:(i+1)*record], gen, uint64(first+i))
		}
		if _, err := w.WriteAt(buf[:cnt*record], int64(first*record)); err != nil {
			t.Fatalf("write %d: %v", gen, err)
		}
		if gen%4 == 0 {
			if err := w.Sync(); err != nil {
				t.Fatalf("fsync: %v", err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Let the writer's mount settle (compact and delete) while the
	// readers go on.
	time.Sleep(5 * time.Second)
	close(done)
	wg.Wait()
	t.Logf("%d reads checked, %d failures; bucket %.1f MiB for a %d MiB file", reads.Load(), errs.Load(),
		float64(v.bucketBytes(t))/(1<<20), records*record>>20)
	if errs.Load() > 0 {
		t.Fatalf("%d reads failed or returned wrong bytes; first: %v", errs.Load(), firstErr.Load())
	}
	if reads.Load() < 100 {
		t.Fatalf("only %d reads checked", reads.Load())
	}
	// Every mount reads the final content.
	for i := range mnts {
		got, err := os.ReadFile(path(i))
		if err != nil {
			t.Fatalf("final read on mount %d: %v", i, err)
		}
		for j := 0; j < records; j++ {
			if err := checkRecord(got[j*record:(j+1)*record], uint64(j)); err != nil {
				t.Fatalf("final read on mount %d: %v", i, err)
			}
		}
	}
	for _, m := range mnts {
		mustSluice(t, "umount", m)
	}
	v.wantFsckClean(t)
	if out := readFile(t, v.log); bytes.Contains([]byte(out), []byte("level=ERROR")) {
		t.Errorf("the mounts logged errors:\n%s", out)
	}
}
