// Package fault provides a Store decorator that injects faults into the
// calls it forwards, for tests: injected errors, calls that fail a given
// number of times in a row, calls that hang until their context is done or
// fail with a timeout, added latency, and Get readers that stop early
// (io.ErrUnexpectedEOF) or fail midway through an object. It never
// corrupts bytes: a reader either delivers the object's bytes or fails.
//
// Which calls fail is decided by a random generator seeded from the
// Config, so a single-threaded test sees the same faults on every run.
// The configuration can be replaced at run time with Set, so a test can
// turn faults on and off, and read from the SLUICE_FAULTS environment
// variable (see Parse for the format) so a test can turn them on in
// another process such as a mount. Only a sluice binary built with the
// faultinject tag reads it (the end-to-end tests build one); release
// builds never wrap their buckets with this package.
//
// Injected errors are *Error values: they wrap object.ErrTransient and
// report Temporary() true (and Timeout() true for hangs that time out), so
// the retry decorator treats them as a flaky network would be treated.
package fault

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicefs/sluice/internal/object"
)

// Error is an injected fault.
type Error struct {
	Op      Op     // the operation the fault struck
	Key     string // its key (the prefix for List)
	Kind    string // "error", "timeout" or "read error"
	timeout bool
}

// Error describes the fault.
func (e *Error) Error() string {
	return fmt.Sprintf("fault: injected %s on %s %q", e.Kind, e.Op, e.Key)
}

// Unwrap returns object.ErrTransient: every injected fault is transient.
func (e *Error) Unwrap() error { return object.ErrTransient }

// Timeout reports whether the fault is a timeout.
func (e *Error) Timeout() bool { return e.timeout }

// Temporary reports true: injected faults go away when retried.
func (e *Error) Temporary() bool { return true }

// Store injects faults into the calls to the Store it wraps.
type Store struct {
	inner object.Store
	state atomic.Pointer[state]
	// calls and injected count calls and injected faults per operation;
	// they survive Set.
	calls    [numOps]atomic.Int64
	injected [numOps]atomic.Int64
}

var (
	_ object.Store     = (*Store)(nil)
	_ object.Unwrapper = (*Store)(nil)
)

// state is one configuration in force, replaced as a whole by Set.
type state struct {
	rules    [numOps]Rule
	failNext [numOps]atomic.Int64
	mu       struct {
		sync.Mutex
		rng *rand.Rand
	}
}

// New returns s wrapped to inject the faults of cfg.
func New(s object.Store, cfg Config) (*Store, error) {
	f := &Store{inner: s}
	if err := f.Set(cfg); err != nil {
		return nil, err
	}
	return f, nil
}

// Set replaces the configuration in force, restarting the random
// generator from cfg.Seed and the FailNext counts from cfg. Calls already
// running finish under the configuration they started with. Set(Config{})
// turns every fault off.
func (s *Store) Set(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	st := &state{}
	for op, r := range cfg.Rules {
		st.rules[op] = r
		st.failNext[op].Store(int64(r.FailNext))
	}
	st.mu.rng = rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	s.state.Store(st)
	return nil
}

// FailNext makes the next n calls of op fail, in addition to the faults
// configured.
func (s *Store) FailNext(op Op, n int) {
	s.state.Load().failNext[op].Add(int64(n))
}

// Calls returns how many calls of op reached the decorator.
func (s *Store) Calls(op Op) int64 { return s.calls[op].Load() }

// Injected returns how many faults were injected into calls of op,
// including short reads and read errors.
func (s *Store) Injected(op Op) int64 { return s.injected[op].Load() }

// String returns the name of the wrapped store.
func (s *Store) String() string { return s.inner.String() }

// Unwrap returns the wrapped store.
func (s *Store) Unwrap() object.Store { return s.inner }

// roll returns true with probability p.
func (st *state) roll(p float64) bool {
	if p <= 0 {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.mu.rng.Float64() < p
}

// intN returns a random number in [0, n).
func (st *state) intN(n int) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.mu.rng.IntN(n)
}

// takeFailNext consumes one of the pending forced failures of op.
func (st *state) takeFailNext(op Op) bool {
	for {
		n := st.failNext[op].Load()
		if n <= 0 {
			return false
		}
		if st.failNext[op].CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// inject applies the faults that happen before a call of op reaches the
// inner store, and returns the error the call must fail with, if any.
func (s *Store) inject(ctx context.Context, st *state, op Op, key string) error {
	s.calls[op].Add(1)
	r := &st.rules[op]
	if r.Delay > 0 {
		if err := sleep(ctx, r.Delay); err != nil {
			return fmt.Errorf("fault: %s %q: delayed: %w", op, key, err)
		}
	}
	switch {
	case st.takeFailNext(op) || st.roll(r.Err):
		s.injected[op].Add(1)
		return &Error{Op: op, Key: key, Kind: "error"}
	case st.roll(r.Hang):
		s.injected[op].Add(1)
		if r.HangFor == 0 {
			<-ctx.Done()
			return fmt.Errorf("fault: %s %q: hung: %w", op, key, ctx.Err())
		}
		if err := sleep(ctx, r.HangFor); err != nil {
			return fmt.Errorf("fault: %s %q: hung: %w", op, key, err)
		}
		return &Error{Op: op, Key: key, Kind: "timeout", timeout: true}
	}
	return nil
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Get forwards to the inner store, possibly failing first, and may return
// a reader that stops early or fails midway.
func (s *Store) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	st := s.state.Load()
	if err := s.inject(ctx, st, Get, key); err != nil {
		return nil, err
	}
	rc, err := s.inner.Get(ctx, key, off, limit)
	if err != nil {
		return nil, err
	}
	r := &st.rules[Get]
	var readErr error
	switch {
	case st.roll(r.Short):
		readErr = io.ErrUnexpectedEOF
	case st.roll(r.ReadErr):
		readErr = &Error{Op: Get, Key: key, Kind: "read error"}
	default:
		return rc, nil
	}
	// Read the whole range first so the cut lands strictly inside it.
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("fault: get %q: %w", key, err)
	}
	if len(data) == 0 {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	s.injected[Get].Add(1)
	return &failingReader{data: data[:st.intN(len(data))], err: readErr}, nil
}

// failingReader returns data and then err instead of io.EOF.
type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func (r *failingReader) Close() error { return nil }

// Put forwards to the inner store unless a fault strikes first; a failed
// Put writes nothing.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	if err := s.inject(ctx, s.state.Load(), Put, key); err != nil {
		return err
	}
	return s.inner.Put(ctx, key, r)
}

// Delete forwards to the inner store unless a fault strikes first.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.inject(ctx, s.state.Load(), Delete, key); err != nil {
		return err
	}
	return s.inner.Delete(ctx, key)
}

// Head forwards to the inner store unless a fault strikes first.
func (s *Store) Head(ctx context.Context, key string) (object.Info, error) {
	if err := s.inject(ctx, s.state.Load(), Head, key); err != nil {
		return object.Info{}, err
	}
	return s.inner.Head(ctx, key)
}

// List forwards to the inner store unless a fault strikes first.
func (s *Store) List(ctx context.Context, prefix, marker string, limit int) ([]object.Info, error) {
	if err := s.inject(ctx, s.state.Load(), List, prefix); err != nil {
		return nil, err
	}
	return s.inner.List(ctx, prefix, marker, limit)
}

// WrapFromEnv returns s wrapped with the faults of the SLUICE_FAULTS
// environment variable, or s itself when the variable is unset or empty.
func WrapFromEnv(s object.Store) (object.Store, error) {
	cfg, ok, err := FromEnv()
	if err != nil {
		return nil, err
	}
	if !ok {
		return s, nil
	}
	return New(s, cfg)
}
