// Package retry provides a Store decorator that retries transient
// failures with bounded exponential backoff and jitter.
//
// Only errors that Retryable classifies as transient are retried: network
// timeouts, errors that say they are temporary or retryable, and errors
// wrapping object.ErrTransient; for Get also a stream cut short
// (io.ErrUnexpectedEOF). Everything else — object.ErrNotFound, context
// cancellation, authentication and permission errors — is returned
// unchanged after the first attempt, so callers can test it with
// errors.Is. Retrying stops when the caller's context is done.
//
// Put retries need the content again: an io.Seeker (such as the
// bytes.Reader of a block) is seeked back to where it started; any other
// reader is read into memory first.
//
// A Get reader that fails midway is reopened at the offset it reached, so
// the caller sees one uninterrupted stream. That is sound because Sluice
// never rewrites an object under the same key (blocks are write-once);
// as a guard, the reopened stream must repeat the last bytes already
// delivered (up to OverlapSize), and the read fails if they differ.
package retry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/object"
)

// Config bounds the retries.
type Config struct {
	// Attempts is the number of attempts per call, the first included:
	// 1 disables retries. Default 5.
	Attempts int
	// MinBackoff is the wait before the first retry; it doubles with each
	// further retry up to MaxBackoff. Defaults 100ms and 10s.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// OnRetry, if set, is called before each wait with the operation
	// ("get", "put", "head", "list", "delete" or "read"), the key, the
	// attempt that failed (1-based), its error and the wait.
	OnRetry func(op, key string, attempt int, err error, wait time.Duration)
	// Timeout bounds each attempt of Put, Delete, Head and List, so that
	// a store that stops answering fails the attempt, which is then
	// retried, instead of hanging. 0: no bound.
	Timeout time.Duration
	// GetTimeout bounds each attempt of Get: opening and reading the
	// stream it opened. 0: Timeout.
	GetTimeout time.Duration
}

// Defaults fills in the zero fields of c with the default values.
func (c *Config) Defaults() {
	if c.Attempts == 0 {
		c.Attempts = 5
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 10 * time.Second
	}
}

// Validate reports an error if a field is out of range.
func (c Config) Validate() error {
	switch {
	case c.Attempts < 1:
		return fmt.Errorf("retry: attempts %d is less than 1", c.Attempts)
	case c.MinBackoff < 0 || c.MaxBackoff < c.MinBackoff:
		return fmt.Errorf("retry: backoff range %v..%v is invalid", c.MinBackoff, c.MaxBackoff)
	}
	return nil
}

// Store retries the calls to the Store it wraps.
type Store struct {
	inner object.Store
	cfg   Config
}

var (
	_ object.Store     = (*Store)(nil)
	_ object.Unwrapper = (*Store)(nil)
)

// New returns s wrapped to retry transient errors as cfg says; zero fields
// of cfg take their defaults.
func New(s object.Store, cfg Config) (*Store, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Store{inner: s, cfg: cfg}, nil
}

// String returns the name of the wrapped store.
func (s *Store) String() string { return s.inner.String() }

// Unwrap returns the wrapped store.
func (s *Store) Unwrap() object.Store { return s.inner }

// Retryable reports whether err is worth retrying. It is false for nil,
// object.ErrNotFound and context.Canceled. Otherwise a Retryable() bool
// method anywhere in the chain decides; failing that, err is retryable if
// it is a net.Error timeout (context.DeadlineExceeded is one: a request
// timeout, while the caller's own deadline is checked apart), has a
// Temporary() method that returns true, is a connection reset, abort or
// refusal or a broken pipe, or wraps object.ErrTransient. Backends mark
// throttling and server errors (HTTP 503 SlowDown, 5xx) with
// object.ErrTransient.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, object.ErrNotFound) || errors.Is(err, context.Canceled) {
		return false
	}
	if r, ok := errors.AsType[interface {
		error
		Retryable() bool
	}](err); ok {
		return r.Retryable()
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return true
	}
	if t, ok := errors.AsType[interface {
		error
		Temporary() bool
	}](err); ok && t.Temporary() {
		return true
	}
	for _, errno := range resetErrnos {
		if errors.Is(err, errno) {
			return true
		}
	}
	return errors.Is(err, object.ErrTransient)
}

// resetErrnos are connection failures that a new connection may not see.
var resetErrnos = []error{syscall.ECONNRESET, syscall.ECONNABORTED, syscall.ECONNREFUSED, syscall.EPIPE}

// retryableRead is Retryable for errors of Get and of reading its stream,
// where a stream cut short is also transient.
func retryableRead(err error) bool {
	return Retryable(err) || errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, object.ErrNotFound)
}

// backoff returns the wait before retry number n (1-based): exponential,
// capped, with the upper half jittered.
func (s *Store) backoff(n int) time.Duration {
	d := s.cfg.MinBackoff
	for i := 1; i < n && d < s.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, s.cfg.MaxBackoff)
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d-d/2)
}

// wait sleeps before retry n of op unless ctx is done first.
func (s *Store) wait(ctx context.Context, op, key string, n int, err error) error {
	d := s.backoff(n)
	if s.cfg.OnRetry != nil {
		s.cfg.OnRetry(op, key, n, err, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// do calls fn until it succeeds, fails with an error that retryable
// rejects, the attempts run out or ctx is done. Rejected errors come back
// unchanged.
func (s *Store) do(ctx context.Context, op, key string, retryable func(error) bool, fn func(ctx context.Context) error) error {
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil || !retryable(err) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %s %q: %w (after %d attempts, stopped: %w)", s, op, key, err, attempt, ctx.Err())
		}
		if attempt >= s.cfg.Attempts {
			return fmt.Errorf("%s: %s %q: giving up after %d attempts: %w", s, op, key, attempt, err)
		}
		if werr := s.wait(ctx, op, key, attempt, err); werr != nil {
			return fmt.Errorf("%s: %s %q: %w (after %d attempts, stopped: %w)", s, op, key, err, attempt, werr)
		}
	}
}

// attempt returns the context of one attempt: ctx bounded by
// Config.Timeout.
func (s *Store) attempt(ctx context.Context) (context.Context, context.CancelFunc) {
	return withTimeout(ctx, s.cfg.Timeout)
}

// getAttempt returns the context of one Get attempt.
func (s *Store) getAttempt(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.cfg.GetTimeout > 0 {
		return withTimeout(ctx, s.cfg.GetTimeout)
	}
	return s.attempt(ctx)
}

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// cancelOnClose ends an attempt's context when its stream is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// Get opens key, retrying transient failures, and returns a reader that
// reopens the stream at the offset it reached when reading fails
// transiently.
func (s *Store) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	var rc io.ReadCloser
	err := s.do(ctx, "get", key, retryableRead, func(ctx context.Context) (err error) {
		actx, cancel := s.getAttempt(ctx)
		rc, err = s.inner.Get(actx, key, off, limit)
		if err != nil {
			cancel()
			return err
		}
		rc = &cancelOnClose{rc, cancel}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &reader{s: s, ctx: ctx, key: key, off: off, limit: limit, rc: rc}, nil
}

// Put stores r under key, retrying transient failures with the same
// content.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	rewind, err := rewinder(r)
	if err != nil {
		return fmt.Errorf("%s: put %q: %w", s, key, err)
	}
	attempt := 0
	return s.do(ctx, "put", key, Retryable, func(ctx context.Context) error {
		attempt++
		body, err := rewind(attempt)
		if err != nil {
			return fmt.Errorf("%s: put %q: rewind content: %w", s, key, err)
		}
		ctx, cancel := s.attempt(ctx)
		defer cancel()
		return s.inner.Put(ctx, key, body)
	})
}

// rewinder returns a function giving the content of r for each attempt.
// A seekable r is seeked back to its starting offset; any other r is read
// into memory first.
func rewinder(r io.Reader) (func(attempt int) (io.Reader, error), error) {
	if sk, ok := r.(io.ReadSeeker); ok {
		start, err := sk.Seek(0, io.SeekCurrent)
		if err == nil {
			return func(attempt int) (io.Reader, error) {
				if attempt == 1 {
					return sk, nil
				}
				_, err := sk.Seek(start, io.SeekStart)
				return sk, err
			}, nil
		}
	}
	data, err := object.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("buffer content: %w", err)
	}
	return func(int) (io.Reader, error) { return bytes.NewReader(data), nil }, nil
}

// Delete removes key, retrying transient failures.
func (s *Store) Delete(ctx context.Context, key string) error {
	return s.do(ctx, "delete", key, Retryable, func(ctx context.Context) error {
		ctx, cancel := s.attempt(ctx)
		defer cancel()
		return s.inner.Delete(ctx, key)
	})
}

// Head returns the Info of key, retrying transient failures.
func (s *Store) Head(ctx context.Context, key string) (object.Info, error) {
	var info object.Info
	err := s.do(ctx, "head", key, Retryable, func(ctx context.Context) (err error) {
		ctx, cancel := s.attempt(ctx)
		defer cancel()
		info, err = s.inner.Head(ctx, key)
		return err
	})
	return info, err
}

// List lists the wrapped store, retrying transient failures.
func (s *Store) List(ctx context.Context, prefix, marker string, limit int) ([]object.Info, error) {
	var infos []object.Info
	err := s.do(ctx, "list", prefix, Retryable, func(ctx context.Context) (err error) {
		ctx, cancel := s.attempt(ctx)
		defer cancel()
		infos, err = s.inner.List(ctx, prefix, marker, limit)
		return err
	})
	return infos, err
}
