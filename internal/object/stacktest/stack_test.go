package stacktest_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/compress"
	"github.com/sluicefs/sluice/internal/object/encrypt"
	"github.com/sluicefs/sluice/internal/object/fault"
	"github.com/sluicefs/sluice/internal/object/file"
	"github.com/sluicefs/sluice/internal/object/limit"
	"github.com/sluicefs/sluice/internal/object/metrics"
	"github.com/sluicefs/sluice/internal/object/objecttest"
	"github.com/sluicefs/sluice/internal/object/prefix"
	"github.com/sluicefs/sluice/internal/object/retry"
)

// stack is a full decorator stack with handles on its layers.
type stack struct {
	top     object.Store
	fault   *fault.Store
	metrics *metrics.Store
	file    *file.Store
}

// faultsFor parses a fault configuration or fails the test.
func faultsFor(t testing.TB, s string) fault.Config {
	t.Helper()
	cfg, err := fault.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// newStack builds retry(limit(metrics(compress(encrypt(prefix(fault(file)))))))
// with the given algorithms and faults.
func newStack(t testing.TB, compression, encryption string, faults fault.Config, attempts int) stack {
	t.Helper()
	fs, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := stack{file: fs}
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	st.fault, err = fault.New(fs, faults)
	check(err)
	var s object.Store = prefix.New(st.fault, "vol/")
	if encryption != "" {
		pemBytes, err := os.ReadFile(filepath.Join("..", "encrypt", "testdata", "pkcs8-aes256.pem"))
		check(err)
		key, err := encrypt.ParsePrivateKey(pemBytes, []byte("sluice-test"))
		check(err)
		s, err = encrypt.New(s, key, encryption)
		check(err)
	}
	s, err = compress.New(s, compression)
	check(err)
	st.metrics = metrics.New(s)
	s, err = limit.New(st.metrics, limit.Config{MaxUploads: 4, MaxDownloads: 4, UploadLimit: 1 << 30, DownloadLimit: 1 << 30})
	check(err)
	st.top, err = retry.New(s, retry.Config{Attempts: attempts, MinBackoff: 100 * time.Microsecond, MaxBackoff: time.Millisecond})
	check(err)
	return st
}

func TestSuite(t *testing.T) {
	for _, c := range []struct{ compression, encryption string }{
		{"none", ""}, {"lz4", encrypt.AES256GCMRSA}, {"zstd", encrypt.ChaCha20RSA},
	} {
		t.Run(c.compression+"+"+c.encryption, func(t *testing.T) {
			objecttest.Run(t, func(t *testing.T) object.Store {
				return newStack(t, c.compression, c.encryption, fault.Config{}, 5).top
			})
		})
	}
}

// TestSuiteUnderFaults runs the whole suite over the full stack with
// faults of every kind injected just above the file store, where the
// retries must hide them all. Compression and encryption read whole
// objects, so even streams broken midway are retried from the start and
// the atomic-overwrite case holds.
func TestSuiteUnderFaults(t *testing.T) {
	faults := faultsFor(t, "seed=11,all:err=0.2,all:hang=0.02,all:hangfor=1ms,get:short=0.1,get:readerr=0.1")
	var stacks []stack
	objecttest.Run(t, func(t *testing.T) object.Store {
		st := newStack(t, "lz4", encrypt.AES256GCMRSA, faults, 25)
		stacks = append(stacks, st)
		return st.top
	})
	var injected int64
	for _, st := range stacks {
		for _, op := range fault.Ops() {
			injected += st.fault.Injected(op)
		}
	}
	if injected == 0 {
		t.Fatal("no fault was injected: the test tested nothing")
	}
	t.Logf("%d faults injected and hidden by retries", injected)
}

// TestRetryOverFaults is the suite over retry(fault(file)), with faults
// that strike before a call reaches the file store.
func TestRetryOverFaults(t *testing.T) {
	faults := faultsFor(t, "seed=3,all:err=0.25,all:fail=2,head:hang=0.05,head:hangfor=1ms")
	objecttest.Run(t, func(t *testing.T) object.Store {
		fs, err := file.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		f, err := fault.New(fs, faults)
		if err != nil {
			t.Fatal(err)
		}
		r, err := retry.New(f, retry.Config{Attempts: 20, MinBackoff: 100 * time.Microsecond, MaxBackoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return r
	})
}

// TestNeverWrongBytes hammers stacks with faults from several goroutines,
// with retries too few to hide them all, and checks the promise the data
// path relies on: a Put either fails or stores its data durably, and a
// Get either fails or returns exactly the right bytes.
func TestNeverWrongBytes(t *testing.T) {
	faults := faultsFor(t, "seed=5,all:err=0.3,get:short=0.3,get:readerr=0.3,put:hang=0.05,put:hangfor=1ms")
	for _, c := range []struct {
		name                    string
		compression, encryption string
		attempts                int
	}{
		{"plain no retry", "none", "", 1},
		{"plain retry", "none", "", 2},
		{"zstd+chacha20 no retry", "zstd", encrypt.ChaCha20RSA, 1},
		{"lz4+aes retry", "lz4", encrypt.AES256GCMRSA, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newStack(t, c.compression, c.encryption, faults, c.attempts)
			checkNeverWrongBytes(t, st)
		})
	}
}

func checkNeverWrongBytes(t *testing.T, st stack) {
	const workers, keysPerWorker, readsPerKey = 4, 12, 6
	ctx := context.Background()
	var mu sync.Mutex
	stored := map[string][]byte{} // keys whose Put succeeded
	putErrs, getErrs, gets := 0, 0, 0
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for i := range keysPerWorker {
				// Blocks are written once under a key naming their length.
				data := objecttest.Data(uint64(w*100+i), 1+rng.IntN(300_000))
				key := fmt.Sprintf("chunks/%d/%d/%d_0_%d", w, i, w*100+i, len(data))
				if err := st.top.Put(ctx, key, bytes.NewReader(data)); err != nil {
					mu.Lock()
					putErrs++
					mu.Unlock()
					continue
				}
				mu.Lock()
				stored[key] = data
				mu.Unlock()
				for range readsPerKey {
					off := rng.Int64N(int64(len(data)) + 1)
					limit := rng.Int64N(int64(len(data))+1) - 1
					got, err := readAll(ctx, st.top, key, off, limit)
					mu.Lock()
					gets++
					if err != nil {
						getErrs++
					}
					mu.Unlock()
					if err != nil {
						continue
					}
					if want := window(data, off, limit); !bytes.Equal(got, want) {
						t.Errorf("Get(%q, %d, %d) returned %d wrong bytes (want %d)", key, off, limit, len(got), len(want))
					}
				}
			}
		})
	}
	wg.Wait()
	// Every acknowledged Put is durable: read it back with faults off.
	if err := st.fault.Set(fault.Config{}); err != nil {
		t.Fatal(err)
	}
	for key, data := range stored {
		got, err := readAll(ctx, st.top, key, 0, -1)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("acknowledged Put of %q: read back %d bytes, %v; want %d bytes", key, len(got), err, len(data))
		}
	}
	var injected int64
	for _, op := range fault.Ops() {
		injected += st.fault.Injected(op)
	}
	snap := st.metrics.Snapshot()
	t.Logf("%d faults injected; %d of %d Puts and %d of %d Gets failed; metrics saw %d get and %d put errors",
		injected, putErrs, workers*keysPerWorker, getErrs, gets, snap.Get.Errors, snap.Put.Errors)
	if injected == 0 || len(stored) == 0 {
		t.Fatalf("%d faults, %d stored objects: the test tested nothing", injected, len(stored))
	}
}

// readAll reads a range of key through s.
func readAll(ctx context.Context, s object.Store, key string, off, limit int64) ([]byte, error) {
	rc, err := s.Get(ctx, key, off, limit)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// window returns the bytes of data a Get with off and limit returns.
func window(data []byte, off, limit int64) []byte {
	data = data[min(off, int64(len(data))):]
	if limit >= 0 && limit < int64(len(data)) {
		data = data[:limit]
	}
	return data
}

// TestLayoutThroughStack checks that the stack stores what the spec says
// under the volume prefix: a compressed, then encrypted block.
func TestLayoutThroughStack(t *testing.T) {
	st := newStack(t, "zstd", encrypt.AES256GCMRSA, fault.Config{}, 5)
	data := bytes.Repeat([]byte("sluice "), 100_000)
	key := fmt.Sprintf("chunks/0/0/1_0_%d", len(data))
	objecttest.Put(t, st.top, key, data)
	raw := objecttest.Get(t, st.file, "vol/"+key, 0, -1)
	// Encrypted: not a zstd frame and no plaintext; compressed: far
	// smaller than the data.
	if bytes.HasPrefix(raw, []byte{0x28, 0xb5, 0x2f, 0xfd}) || bytes.Contains(raw, []byte("sluice sluice")) {
		t.Errorf("stored object is not encrypted")
	}
	if len(raw) > len(data)/10 {
		t.Errorf("stored %d bytes for %d compressible bytes: not compressed before encryption", len(raw), len(data))
	}
	if got := objecttest.Get(t, st.top, key, 7, 14); string(got) != "sluice sluice " {
		t.Errorf("ranged Get = %q", got)
	}
	snap := st.metrics.Snapshot()
	if snap.Put.Count != 1 || snap.Get.Count != 1 || snap.Put.Bytes != int64(len(data)) || snap.Get.Bytes != 14 {
		t.Errorf("metrics: put %+v, get %+v", snap.Put, snap.Get)
	}
}

// BenchmarkStack measures 4 MiB Puts and Gets through the full stack on a
// file store, with lz4 and AES-256-GCM.
func BenchmarkStack(b *testing.B) {
	objecttest.Bench(b, newStack(b, "lz4", encrypt.AES256GCMRSA, fault.Config{}, 5).top)
}
