package limit

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/object/file"
)

// fakeClock moves only when slept on, and adds up the sleeps.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	slept time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.slept += d
	return nil
}

func (c *fakeClock) Slept() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slept
}

// newFakeStore returns a Store over a file store whose bandwidth limits
// run on a fake clock.
func newFakeStore(t *testing.T, up, down int64) (*Store, *fakeClock) {
	t.Helper()
	inner, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(inner, Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := &fakeClock{now: time.Unix(1e9, 0)}
	s.clock = c
	s.SetRate(up, down)
	return s, c
}

// TestBandwidth checks the time a transfer is made to wait: after the
// first burst (one second of traffic), bytes cost 1/limit seconds each.
func TestBandwidth(t *testing.T) {
	const rate = 100_000 // bytes per second; the burst is 100 000 bytes
	tests := []struct {
		name      string
		size      int
		off, lim  int64 // the range read back
		wantUp    time.Duration
		wantTotal time.Duration
	}{
		{"within the burst", 50_000, 0, -1, 0, 0},
		{"1 MB", 1_000_000, 0, -1, 9 * time.Second, 18 * time.Second},
		{"ranged read is charged for its bytes", 1_000_000, 0, 1000, 9 * time.Second, 9 * time.Second},
		{"read past the end", 1_000_000, 999_000, 1 << 30, 9 * time.Second, 9 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := newFakeStore(t, rate, rate)
			ctx := context.Background()
			if err := s.Put(ctx, "k", bytes.NewReader(make([]byte, tt.size))); err != nil {
				t.Fatal(err)
			}
			if got := c.Slept(); !near(got, tt.wantUp) {
				t.Errorf("Put of %d bytes waited %v, want %v", tt.size, got, tt.wantUp)
			}
			// The download bucket is full again after the upload's waits.
			rc, err := s.Get(ctx, "k", tt.off, tt.lim)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, rc); err != nil {
				t.Fatal(err)
			}
			rc.Close()
			if got := c.Slept(); !near(got, tt.wantTotal) {
				t.Errorf("Put and Get waited %v, want %v", got, tt.wantTotal)
			}
		})
	}
}

// near reports whether got is within 1% (plus 1ms) of want.
func near(got, want time.Duration) bool {
	d := got - want
	return d.Abs() <= want/100+time.Millisecond
}

func TestBandwidthHonoursContext(t *testing.T) {
	s, _ := newFakeStore(t, 1000, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// The first 1000 bytes fit the burst; the next ones must wait, and
	// the context is already done.
	err := s.Put(ctx, "k", bytes.NewReader(make([]byte, 5000)))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Put error = %v, want Canceled", err)
	}
}

// TestSetRate checks that SetRate changes the limits of a live Store:
// for transfers that start after it, and for the rest of a limited
// download under way.
func TestSetRate(t *testing.T) {
	const size = 1_000_000
	ctx := context.Background()
	s, c := newFakeStore(t, 0, 0)
	put := func(want time.Duration) {
		t.Helper()
		before := c.Slept()
		if err := s.Put(ctx, "k", bytes.NewReader(make([]byte, size))); err != nil {
			t.Fatal(err)
		}
		if got := c.Slept() - before; !near(got, want) {
			t.Errorf("Put of %d bytes waited %v, want %v", size, got, want)
		}
	}
	put(0)
	s.SetRate(100_000, 200_000)
	if up, down := s.Rate(); up != 100_000 || down != 200_000 {
		t.Errorf("Rate() = %d, %d; want 100000, 200000", up, down)
	}
	put(9 * time.Second) // the first 100 000 bytes are the burst
	s.SetRate(1_000_000, 0)
	put(0) // a fresh burst of 1 MB covers it all
	s.SetRate(0, 0)
	put(0)
	if up, down := s.Rate(); up != 0 || down != 0 {
		t.Errorf("Rate() after lifting the limits = %d, %d; want 0, 0", up, down)
	}

	// A download that starts limited is charged at the rate of the
	// moment each piece is read.
	s.SetRate(0, 100_000)
	rc, err := s.Get(ctx, "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	before := c.Slept()
	if _, err := io.CopyN(io.Discard, rc, 500_000); err != nil {
		t.Fatal(err)
	}
	if got := c.Slept() - before; !near(got, 4*time.Second) {
		t.Errorf("first half at 100 kB/s waited %v, want 4s", got)
	}
	s.SetRate(0, 0)
	before = c.Slept()
	if _, err := io.Copy(io.Discard, rc); err != nil {
		t.Fatal(err)
	}
	if got := c.Slept() - before; got != 0 {
		t.Errorf("second half after lifting the limit waited %v, want 0", got)
	}
}
