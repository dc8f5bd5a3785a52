package retry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
)

// OverlapSize is how many bytes already delivered a reopened Get stream
// must repeat (fewer if fewer were delivered) for the read to go on.
const OverlapSize = 512

// ErrChanged reports that an object read by a Get reader changed between
// the failure of its stream and the reopening: the read cannot go on
// without mixing two versions.
var ErrChanged = errors.New("object changed while being read")

// reader is a Get stream that reopens itself after transient failures.
// Like any io.Reader it must not be used from several goroutines at once.
type reader struct {
	s          *Store
	ctx        context.Context
	key        string
	off, limit int64 // the range asked of Get
	rc         io.ReadCloser
	read       int64  // bytes delivered so far
	tail       []byte // the last bytes delivered, at most OverlapSize
	failures   int    // failed attempts so far: the open's retries are not counted
	err        error  // sticky error once the stream cannot go on
}

// Read reads from the current stream and reopens it on a transient error.
func (r *reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	for {
		n, err := r.rc.Read(p)
		if n > 0 {
			r.delivered(p[:n])
		}
		if err == nil || err == io.EOF {
			return n, err
		}
		if rerr := r.recover(err); rerr != nil {
			r.err = rerr
			return n, rerr
		}
		if n > 0 || len(p) == 0 {
			return n, nil
		}
	}
}

// delivered records that b was handed to the caller.
func (r *reader) delivered(b []byte) {
	r.read += int64(len(b))
	if len(b) >= OverlapSize {
		r.tail = append(r.tail[:0], b[len(b)-OverlapSize:]...)
		return
	}
	r.tail = append(r.tail, b...)
	if extra := len(r.tail) - OverlapSize; extra > 0 {
		r.tail = append(r.tail[:0], r.tail[extra:]...)
	}
}

// recover replaces the failed stream with a new one positioned after the
// bytes delivered, or returns the error the reader must fail with.
func (r *reader) recover(cause error) error {
	if !retryableRead(cause) {
		return cause
	}
	r.rc.Close()
	r.rc = io.NopCloser(bytes.NewReader(nil))
	for {
		r.failures++
		if err := r.ctx.Err(); err != nil {
			return fmt.Errorf("%s: read %q at %d: %w (stopped: %w)", r.s, r.key, r.off+r.read, cause, err)
		}
		if r.failures >= r.s.cfg.Attempts {
			return fmt.Errorf("%s: read %q at %d: giving up after %d attempts: %w", r.s, r.key, r.off+r.read, r.failures, cause)
		}
		if err := r.s.wait(r.ctx, "read", r.key, r.failures, cause); err != nil {
			return fmt.Errorf("%s: read %q at %d: %w (stopped: %w)", r.s, r.key, r.off+r.read, cause, err)
		}
		rc, err := r.reopen()
		if err == nil {
			r.rc = rc
			return nil
		}
		if !retryableRead(err) {
			return err
		}
		cause = err
	}
}

// reopen opens the stream again at the first byte not yet delivered,
// after checking that the bytes just before it have not changed.
func (r *reader) reopen() (io.ReadCloser, error) {
	back := int64(len(r.tail))
	limit := r.limit
	if limit >= 0 {
		limit = r.limit - r.read + back
	}
	actx, cancel := r.s.getAttempt(r.ctx)
	rc, err := r.s.inner.Get(actx, r.key, r.off+r.read-back, limit)
	if err != nil {
		cancel()
		return nil, err
	}
	rc = &cancelOnClose{rc, cancel}
	if back == 0 {
		return rc, nil
	}
	buf := make([]byte, back)
	if _, err := io.ReadFull(rc, buf); err != nil {
		rc.Close()
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if !bytes.Equal(buf, r.tail) {
		rc.Close()
		return nil, fmt.Errorf("%s: read %q at %d: %w", r.s, r.key, r.off+r.read, ErrChanged)
	}
	return rc, nil
}

// Close closes the current stream.
func (r *reader) Close() error {
	return r.rc.Close()
}
