package metatest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// Ops are the operations Bench measures: a *meta.Session has them, and
// so does a client that sends them whole to the metadata server.
type Ops interface {
	Mknod(ctx context.Context, parent meta.Ino, name []byte, nn meta.NewNode) (*meta.Attr, error)
	Lookup(ctx context.Context, parent meta.Ino, name []byte) (*meta.Attr, error)
	GetAttr(ctx context.Context, ino meta.Ino) (*meta.Attr, error)
	SetAttr(ctx context.Context, ino meta.Ino, mask uint32, in *meta.Attr) (*meta.Attr, error)
	Rename(ctx context.Context, srcParent meta.Ino, srcName []byte, dstParent meta.Ino, dstName []byte, flags uint32) error
	Unlink(ctx context.Context, parent meta.Ino, name []byte) error
	ReadDir(ctx context.Context, ino meta.Ino, after []byte, limit int, plus bool) ([]meta.Entry, error)
}

// Bench measures metadata operations through the meta API on the engine
// newStore opens: create, lookup, getattr, rename and unlink of files in
// one directory, and full listings of directories of 1,000 and 100,000
// entries. An engine's test file runs it from a Benchmark function; results
// are per operation (ns/op), or per listed entry for the listings.
func Bench(b *testing.B, newStore func(tb testing.TB) store.Store) {
	BenchWith(b, newStore, nil)
}

// A Meter measures what a benchmark's timed part cost besides time (the
// server's CPU, its requests, its log syncs): BenchWith calls it when
// the timed part starts and the function it returns when it ends, with
// the operations run; that reports with b.ReportMetric.
type Meter func(b *testing.B) (stop func(ops int))

// BenchWith is Bench, with meter (nil: none) measuring each benchmark's
// timed part.
func BenchWith(b *testing.B, newStore func(tb testing.TB) store.Store, meter Meter) {
	BenchOpsWith(b, func(tb testing.TB) Ops {
		ctx := context.Background()
		st := newStore(tb)
		tb.Cleanup(func() { st.Close() })
		if _, err := meta.FormatVolume(ctx, st, testFormat()); err != nil {
			tb.Fatal(err)
		}
		c, err := meta.NewSession(ctx, st, meta.Config{})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { c.Close(ctx) })
		return c
	}, meter)
}

// BenchFormat returns the settings of the volumes Bench formats.
func BenchFormat() *meta.Format { return testFormat() }

// BenchOps is Bench over the operations open returns, on a freshly
// formatted volume of its own for each benchmark.
func BenchOps(b *testing.B, open func(tb testing.TB) Ops) { BenchOpsWith(b, open, nil) }

// BenchOpsWith is BenchOps, with meter (nil: none) measuring each
// benchmark's timed part.
func BenchOpsWith(b *testing.B, open func(tb testing.TB) Ops, meter Meter) {
	// start resets the timer and starts the meter; the function it
	// returns stops the meter.
	start := func(b *testing.B) func() {
		b.ResetTimer()
		if meter == nil {
			return func() {}
		}
		stop := meter(b)
		return func() { stop(b.N) }
	}
	// A context that can be cancelled, as a mount's requests have: some
	// drivers watch such a context on a goroutine per statement.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx = meta.WithCred(ctx, meta.Cred{})
	setup := func(b *testing.B) (Ops, meta.Ino) {
		b.Helper()
		c := open(b)
		d, err := c.Mknod(ctx, meta.RootIno, []byte("d"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
		if err != nil {
			b.Fatal(err)
		}
		return c, d.Ino
	}
	create := func(b *testing.B, c Ops, dir meta.Ino, n int) {
		b.Helper()
		for i := 0; i < n; i++ {
			if _, err := c.Mknod(ctx, dir, fmt.Appendf(nil, "f%07d", i), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("Create", func(b *testing.B) {
		c, dir := setup(b)
		var l latencies
		stop := start(b)
		for i := 0; i < b.N; i++ {
			if err := l.time(func() error {
				_, err := c.Mknod(ctx, dir, fmt.Appendf(nil, "f%07d", i), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
		stop()
		l.report(b)
	})
	const files = 1000
	b.Run("Lookup", func(b *testing.B) {
		c, dir := setup(b)
		create(b, c, dir, files)
		var l latencies
		stop := start(b)
		for i := 0; i < b.N; i++ {
			if err := l.time(func() error {
				_, err := c.Lookup(ctx, dir, fmt.Appendf(nil, "f%07d", i%files))
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
		stop()
		l.report(b)
	})
	// Sixteen callers looking names up at once.
	b.Run("Lookup16", func(b *testing.B) {
		c, dir := setup(b)
		create(b, c, dir, files)
		var l latencies
		stop := start(b)
		parallel(b, 16, func(i int64) error {
			return l.time(func() error {
				_, err := c.Lookup(ctx, dir, fmt.Appendf(nil, "f%07d", i%files))
				return err
			})
		})
		stop()
		l.report(b)
	})
	// A name that is not there: what the kernel asks before every create.
	b.Run("LookupMissing", func(b *testing.B) {
		c, dir := setup(b)
		create(b, c, dir, files)
		stop := start(b)
		for i := 0; i < b.N; i++ {
			if _, err := c.Lookup(ctx, dir, fmt.Appendf(nil, "g%07d", i)); !errors.Is(err, syscall.ENOENT) {
				b.Fatalf("lookup of a missing name: %v", err)
			}
		}
		stop()
	})
	// utime(2) of a closed file: one write transaction.
	b.Run("SetAttr", func(b *testing.B) {
		c, dir := setup(b)
		f, err := c.Mknod(ctx, dir, []byte("f"), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
		if err != nil {
			b.Fatal(err)
		}
		stop := start(b)
		for i := 0; i < b.N; i++ {
			in := meta.Attr{Atime: int64(i), Mtime: int64(i)}
			if _, err := c.SetAttr(ctx, f.Ino, meta.SetAtime|meta.SetMtime, &in); err != nil {
				b.Fatal(err)
			}
		}
		stop()
	})
	b.Run("GetAttr", func(b *testing.B) {
		c, dir := setup(b)
		var l latencies
		stop := start(b)
		for i := 0; i < b.N; i++ {
			if err := l.time(func() error {
				_, err := c.GetAttr(ctx, dir)
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
		stop()
		l.report(b)
	})
	b.Run("Rename", func(b *testing.B) {
		c, dir := setup(b)
		create(b, c, dir, 1)
		var l latencies
		stop := start(b)
		for i := 0; i < b.N; i++ {
			from, to := fmt.Appendf(nil, "f%07d", i), fmt.Appendf(nil, "f%07d", i+1)
			if err := l.time(func() error { return c.Rename(ctx, dir, from, dir, to, 0) }); err != nil {
				b.Fatal(err)
			}
		}
		stop()
		l.report(b)
	})
	b.Run("Unlink", func(b *testing.B) {
		c, dir := setup(b)
		create(b, c, dir, b.N)
		var l latencies
		stop := start(b)
		for i := 0; i < b.N; i++ {
			if err := l.time(func() error { return c.Unlink(ctx, dir, fmt.Appendf(nil, "f%07d", i)) }); err != nil {
				b.Fatal(err)
			}
		}
		stop()
		l.report(b)
	})
	// Sixteen (and sixty-four) callers at once, each creating files in
	// its own directory: what an engine makes of concurrency (group
	// commit, pipelining), per operation of all.
	for _, clients := range []int{16, 64} {
		b.Run(fmt.Sprintf("Create%d", clients), func(b *testing.B) {
			c, _ := setup(b)
			dirs := make([]meta.Ino, clients)
			for i := range dirs {
				d, err := c.Mknod(ctx, meta.RootIno, fmt.Appendf(nil, "p%d", i), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
				if err != nil {
					b.Fatal(err)
				}
				dirs[i] = d.Ino
			}
			var l latencies
			stop := start(b)
			parallel(b, clients, func(i int64) error {
				return l.time(func() error {
					_, err := c.Mknod(ctx, dirs[i%int64(clients)], fmt.Appendf(nil, "f%07d", i), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
					return err
				})
			})
			stop()
			l.report(b)
		})
	}
	for _, n := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("ReadDirPlus%d", n), func(b *testing.B) {
			if testing.Short() && n > 1000 {
				b.Skip("large directory skipped in -short mode")
			}
			c, dir := setup(b)
			create(b, c, dir, n)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var after []byte
				total := 0
				for {
					es, err := c.ReadDir(ctx, dir, after, 1000, true)
					if err != nil {
						b.Fatal(err)
					}
					total += len(es)
					if len(es) < 1000 {
						break
					}
					after = es[len(es)-1].Name
				}
				if total != n {
					b.Fatalf("listed %d entries, want %d", total, n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
		})
	}
}

// parallel runs op for i = 1 to b.N on n goroutines at once and fails b
// with the first error.
func parallel(b *testing.B, n int, op func(i int64) error) {
	var next atomic.Int64
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if err := op(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// latencies records how long each operation took, and reports the
// median and the 99th percentile (p50-µs, p99-µs).
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

// time runs op and records how long it took.
func (l *latencies) time(op func() error) error {
	start := time.Now()
	err := op()
	d := time.Since(start)
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
	return err
}

func (l *latencies) report(b *testing.B) {
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	at := func(q float64) float64 { return float64(l.d[int(q*float64(len(l.d)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(at(0.5), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}
