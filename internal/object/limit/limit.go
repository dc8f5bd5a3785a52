// Package limit provides a Store decorator that bounds object storage
// traffic: how many uploads (Put) and downloads (Get) run at once, and how
// many bytes per second each direction moves (the --max-uploads,
// --max-downloads, --upload-limit and --download-limit mount options).
//
// A download holds its slot from Get until its reader is closed, since
// that is when its bytes move: callers must close Get readers. Bandwidth
// is charged for the bytes actually read from a Put's content or from a
// Get's stream, in pieces of at most one token-bucket burst (one second of
// traffic, at most 1 MiB), so a transfer starts at once and then settles
// at the limit. Head, List and Delete move no data and pass through.
// Every wait honours the caller's context. SetRate changes the bandwidth
// limits of a live Store (`sluice config --upload-limit` reaching a
// mount).
package limit

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicefs/sluice/internal/object"
)

// maxBurst caps the bytes charged at once.
const maxBurst = 1 << 20

// Config sets the limits; a zero field means no limit.
type Config struct {
	MaxUploads    int   // concurrent Puts
	MaxDownloads  int   // concurrent Gets, from Get to Close of its reader
	UploadLimit   int64 // bytes per second written by Puts
	DownloadLimit int64 // bytes per second read from Gets
}

// Validate reports an error if a field is negative.
func (c Config) Validate() error {
	if c.MaxUploads < 0 || c.MaxDownloads < 0 || c.UploadLimit < 0 || c.DownloadLimit < 0 {
		return fmt.Errorf("limit: negative limit in %+v", c)
	}
	return nil
}

// clock is the time source of the bandwidth limits; tests replace it.
type clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Store limits the traffic of the Store it wraps.
type Store struct {
	inner     object.Store
	uploads   slots
	downloads slots
	clock     clock
	// up and down hold the bandwidth throttles, nil when unlimited;
	// SetRate replaces them.
	up, down atomic.Pointer[throttle]
}

var (
	_ object.Store     = (*Store)(nil)
	_ object.Unwrapper = (*Store)(nil)
)

// New returns s wrapped with the limits of cfg.
func New(s object.Store, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Store{
		inner:     s,
		uploads:   newSlots(cfg.MaxUploads),
		downloads: newSlots(cfg.MaxDownloads),
		clock:     realClock{},
	}
	l.SetRate(cfg.UploadLimit, cfg.DownloadLimit)
	return l, nil
}

// SetRate changes the bandwidth limits, in bytes per second (0 or less:
// unlimited), of transfers that start after it and of the rest of limited
// transfers under way; each starts with a full burst.
func (s *Store) SetRate(upload, download int64) {
	s.up.Store(newThrottle(upload, s.clock))
	s.down.Store(newThrottle(download, s.clock))
}

// Rate returns the bandwidth limits in bytes per second, 0 when
// unlimited.
func (s *Store) Rate() (upload, download int64) {
	return s.up.Load().rate(), s.down.Load().rate()
}

// String returns the name of the wrapped store.
func (s *Store) String() string { return s.inner.String() }

// Unwrap returns the wrapped store.
func (s *Store) Unwrap() object.Store { return s.inner }

// slots is a counting semaphore; a nil slots never blocks.
type slots chan struct{}

func newSlots(n int) slots {
	if n <= 0 {
		return nil
	}
	return make(slots, n)
}

// acquire takes a slot, waiting until one is free or ctx is done.
func (s slots) acquire(ctx context.Context) error {
	if s == nil {
		return nil
	}
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release gives a slot back.
func (s slots) release() {
	if s != nil {
		<-s
	}
}

// throttle is a token bucket of bytes per second.
type throttle struct {
	lim   *rate.Limiter
	burst int
	clock clock
}

// newThrottle returns a throttle of bytesPerSec, or nil for no limit.
func newThrottle(bytesPerSec int64, c clock) *throttle {
	if bytesPerSec <= 0 {
		return nil
	}
	burst := int(min(bytesPerSec, maxBurst))
	return &throttle{lim: rate.NewLimiter(rate.Limit(bytesPerSec), burst), burst: burst, clock: c}
}

// rate returns the bytes per second of t, 0 for a nil (unlimited) t.
func (t *throttle) rate() int64 {
	if t == nil {
		return 0
	}
	return int64(t.lim.Limit())
}

// wait charges n bytes, sleeping as long as the bucket needs to refill.
func (t *throttle) wait(ctx context.Context, n int) error {
	for n > 0 {
		k := min(n, t.burst)
		now := t.clock.Now()
		r := t.lim.ReserveN(now, k)
		if d := r.DelayFrom(now); d > 0 {
			if err := t.clock.Sleep(ctx, d); err != nil {
				r.CancelAt(t.clock.Now())
				return err
			}
		}
		n -= k
	}
	return nil
}

// reader charges the bytes read from r to the throttle t holds when
// they are read (none when it holds nil: the limit was lifted).
type reader struct {
	ctx context.Context
	r   io.Reader
	t   *atomic.Pointer[throttle]
}

func (r *reader) Read(p []byte) (int, error) {
	t := r.t.Load()
	if t == nil {
		return r.r.Read(p)
	}
	if len(p) > t.burst {
		p = p[:t.burst]
	}
	n, err := r.r.Read(p)
	if n > 0 {
		if werr := t.wait(r.ctx, n); werr != nil {
			return n, fmt.Errorf("bandwidth limit: %w", werr)
		}
	}
	return n, err
}

// Get waits for a download slot and returns a reader limited to the
// download bandwidth; closing it frees the slot.
func (s *Store) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	if err := s.downloads.acquire(ctx); err != nil {
		return nil, fmt.Errorf("%s: get %q: wait for a download slot: %w", s, key, err)
	}
	rc, err := s.inner.Get(ctx, key, off, limit)
	if err != nil {
		s.downloads.release()
		return nil, err
	}
	out := &download{rc: rc, r: rc, release: s.downloads.release}
	if s.down.Load() != nil {
		out.r = &reader{ctx: ctx, r: rc, t: &s.down}
	}
	return out, nil
}

// download is a Get stream that frees its slot when closed.
type download struct {
	rc      io.ReadCloser
	r       io.Reader
	once    sync.Once
	release func()
}

func (d *download) Read(p []byte) (int, error) { return d.r.Read(p) }

func (d *download) Close() error {
	d.once.Do(d.release)
	return d.rc.Close()
}

// Put waits for an upload slot and stores r, read no faster than the
// upload bandwidth.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	if err := s.uploads.acquire(ctx); err != nil {
		return fmt.Errorf("%s: put %q: wait for an upload slot: %w", s, key, err)
	}
	defer s.uploads.release()
	if s.up.Load() != nil {
		// Only then: a bare reader keeps what backends use to size the
		// upload (Len, Seek).
		r = &reader{ctx: ctx, r: r, t: &s.up}
	}
	return s.inner.Put(ctx, key, r)
}

// Delete removes key; it is not limited.
func (s *Store) Delete(ctx context.Context, key string) error {
	return s.inner.Delete(ctx, key)
}

// Head returns the Info of key; it is not limited.
func (s *Store) Head(ctx context.Context, key string) (object.Info, error) {
	return s.inner.Head(ctx, key)
}

// List lists the wrapped store; it is not limited.
func (s *Store) List(ctx context.Context, prefix, marker string, limit int) ([]object.Info, error) {
	return s.inner.List(ctx, prefix, marker, limit)
}
