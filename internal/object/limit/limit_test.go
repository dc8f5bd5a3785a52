package limit_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/file"
	"github.com/sluicefs/sluice/internal/object/limit"
	"github.com/sluicefs/sluice/internal/object/objecttest"
)

func newFile(t testing.TB) *file.Store {
	t.Helper()
	s, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newLimit(t testing.TB, inner object.Store, cfg limit.Config) *limit.Store {
	t.Helper()
	s, err := limit.New(inner, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSuite(t *testing.T) {
	objecttest.Run(t, func(t *testing.T) object.Store {
		return newLimit(t, newFile(t), limit.Config{MaxUploads: 2, MaxDownloads: 2, UploadLimit: 1 << 30, DownloadLimit: 1 << 30})
	})
}

// gate is a fault injector over a real store that holds each Put until
// the test lets it go, and tracks how many are inside at once.
type gate struct {
	object.Store
	entered chan struct{}
	release chan struct{}
	inside  atomic.Int32
	peak    atomic.Int32
}

func newGate(inner object.Store) *gate {
	return &gate{Store: inner, entered: make(chan struct{}, 100), release: make(chan struct{})}
}

func (g *gate) Put(ctx context.Context, key string, r io.Reader) error {
	n := g.inside.Add(1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
	g.entered <- struct{}{}
	<-g.release
	g.inside.Add(-1)
	return g.Store.Put(ctx, key, r)
}

func TestMaxUploads(t *testing.T) {
	const max, puts = 3, 10
	g := newGate(newFile(t))
	s := newLimit(t, g, limit.Config{MaxUploads: max})
	var wg sync.WaitGroup
	for i := range puts {
		wg.Go(func() {
			if err := s.Put(context.Background(), string(rune('a'+i)), bytes.NewReader([]byte("x"))); err != nil {
				t.Errorf("Put: %v", err)
			}
		})
	}
	// Wait until max Puts are inside, then let one out for each that
	// enters: all 10 pile up at the gate if the limit fails.
	for range max {
		<-g.entered
	}
	for range puts - max {
		g.release <- struct{}{}
		<-g.entered
	}
	for range max {
		g.release <- struct{}{}
	}
	wg.Wait()
	if p := g.peak.Load(); p != max {
		t.Errorf("peak concurrent uploads = %d, want %d", p, max)
	}
	infos, err := s.List(context.Background(), "", "", 0)
	if err != nil || len(infos) != puts {
		t.Errorf("List = %d objects, %v; want %d", len(infos), err, puts)
	}
}

func TestUploadSlotHonoursContext(t *testing.T) {
	g := newGate(newFile(t))
	s := newLimit(t, g, limit.Config{MaxUploads: 1})
	done := make(chan error)
	go func() { done <- s.Put(context.Background(), "first", bytes.NewReader(nil)) }()
	<-g.entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Put(ctx, "second", bytes.NewReader(nil)); !errors.Is(err, context.Canceled) {
		t.Errorf("Put while the only slot is taken: %v, want Canceled", err)
	}
	g.release <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if g.peak.Load() != 1 {
		t.Errorf("the cancelled Put reached the store")
	}
}

func TestDownloadSlotHeldUntilClose(t *testing.T) {
	inner := newFile(t)
	objecttest.Put(t, inner, "k", []byte("data"))
	s := newLimit(t, inner, limit.Config{MaxDownloads: 2})
	ctx := context.Background()
	a, err := s.Get(ctx, "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Get(ctx, "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := s.Get(short, "k", 0, -1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third Get with two readers open: %v, want DeadlineExceeded", err)
	}
	a.Close()
	a.Close() // a second Close must not free a second slot
	c, err := s.Get(ctx, "k", 0, -1)
	if err != nil {
		t.Fatalf("Get after a Close: %v", err)
	}
	short2, cancel2 := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel2()
	if _, err := s.Get(short2, "k", 0, -1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("double Close freed two slots: Get error %v", err)
	}
	b.Close()
	c.Close()
	// A failed Get frees its slot at once.
	for range 3 {
		if _, err := s.Get(ctx, "missing", 0, -1); !errors.Is(err, object.ErrNotFound) {
			t.Fatalf("Get(missing): %v", err)
		}
	}
	if got := objecttest.Get(t, s, "k", 0, -1); string(got) != "data" {
		t.Errorf("Get = %q", got)
	}
}

// TestBandwidthWallClock checks the limit against the real clock, with a
// generous bound: 512 KiB at 256 KiB/s with a 256 KiB burst needs at
// least one second; the test asks for half of that.
func TestBandwidthWallClock(t *testing.T) {
	inner := newFile(t)
	objecttest.Put(t, inner, "k", make([]byte, 512<<10))
	s := newLimit(t, inner, limit.Config{DownloadLimit: 256 << 10})
	start := time.Now()
	if got := objecttest.Get(t, s, "k", 0, -1); len(got) != 512<<10 {
		t.Fatalf("Get returned %d bytes", len(got))
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Errorf("512 KiB at 256 KiB/s took %v, want at least 500ms", d)
	}
}

func TestConfig(t *testing.T) {
	if _, err := limit.New(newFile(t), limit.Config{UploadLimit: -1}); err == nil {
		t.Error("New accepted a negative limit")
	}
}
