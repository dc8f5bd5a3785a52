// Package metrics provides a Store decorator that counts the calls to the
// Store it wraps: per operation the number of calls, failed calls, bytes
// moved and latency (a sum and a fixed-bucket histogram). Snapshot returns
// the figures as a plain struct; a Store is also a Prometheus collector
// of them (Collect), and WriteText writes them in the Prometheus text
// format through the Prometheus client library. Counting is lock-free and safe for
// concurrent use.
//
// The latency of Get is the time until Get returns, that is until the
// first byte can be read; the latency of every other operation is the
// whole call. Bytes are those read from Get streams (downloaded) and those
// read from Put content (uploaded). A Get stream that fails midway counts
// as one more error of Get.
package metrics

import (
	"context"
	"io"
	"sync/atomic"
	"time"

	"github.com/sluicefs/sluice/internal/object"
)

// Buckets are the upper bounds of the latency histogram; one more bucket
// holds everything slower.
var Buckets = []time.Duration{
	time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// op indexes the counters of one operation.
type op int

const (
	opGet op = iota
	opPut
	opHead
	opList
	opDelete
	numOps
)

// opNames are the operation labels, in the order of the op constants.
var opNames = [numOps]string{"get", "put", "head", "list", "delete"}

// counters are the figures of one operation, all atomic.
type counters struct {
	count, errors, bytes, latency atomic.Int64 // latency in nanoseconds
	buckets                       []atomic.Int64
}

// Store counts the calls to the Store it wraps.
type Store struct {
	inner object.Store
	ops   [numOps]counters
}

var (
	_ object.Store     = (*Store)(nil)
	_ object.Unwrapper = (*Store)(nil)
)

// New returns s wrapped to count its calls.
func New(s object.Store) *Store {
	m := &Store{inner: s}
	for i := range m.ops {
		m.ops[i].buckets = make([]atomic.Int64, len(Buckets)+1)
	}
	return m
}

// String returns the name of the wrapped store.
func (s *Store) String() string { return s.inner.String() }

// Unwrap returns the wrapped store.
func (s *Store) Unwrap() object.Store { return s.inner }

// done records a finished call of o that started at start.
func (s *Store) done(o op, start time.Time, err error) {
	c := &s.ops[o]
	d := time.Since(start)
	c.count.Add(1)
	if err != nil {
		c.errors.Add(1)
	}
	c.latency.Add(int64(d))
	i := 0
	for i < len(Buckets) && d > Buckets[i] {
		i++
	}
	c.buckets[i].Add(1)
}

// Get counts the call and returns a reader that counts its bytes.
func (s *Store) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	start := time.Now()
	rc, err := s.inner.Get(ctx, key, off, limit)
	s.done(opGet, start, err)
	if err != nil {
		return nil, err
	}
	return &reader{rc: rc, c: &s.ops[opGet]}, nil
}

// reader counts the bytes read from a Get stream and its failure.
type reader struct {
	rc     io.ReadCloser
	c      *counters
	failed bool
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.c.bytes.Add(int64(n))
	if err != nil && err != io.EOF && !r.failed {
		r.failed = true
		r.c.errors.Add(1)
	}
	return n, err
}

func (r *reader) Close() error { return r.rc.Close() }

// countingReader counts the bytes read from a Put's content.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (r countingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n.Add(int64(n))
	return n, err
}

// Put counts the call and the bytes of r: all of them when the Put
// succeeds for a reader that knows its length, else those the wrapped
// store reads.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	start := time.Now()
	var err error
	if l, ok := r.(interface{ Len() int }); ok {
		// A reader that knows its length (a block's bytes.Reader) goes
		// down as it is, so the stores below still see its Len and
		// WriteTo: the S3 backend sends one PUT of known length and the
		// file backend one write, with no copy through buffers.
		n := l.Len()
		if err = s.inner.Put(ctx, key, r); err == nil {
			s.ops[opPut].bytes.Add(int64(n))
		}
	} else {
		err = s.inner.Put(ctx, key, countingReader{r: r, n: &s.ops[opPut].bytes})
	}
	s.done(opPut, start, err)
	return err
}

// Delete counts the call.
func (s *Store) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := s.inner.Delete(ctx, key)
	s.done(opDelete, start, err)
	return err
}

// Head counts the call. A missing key counts as an error.
func (s *Store) Head(ctx context.Context, key string) (object.Info, error) {
	start := time.Now()
	info, err := s.inner.Head(ctx, key)
	s.done(opHead, start, err)
	return info, err
}

// List counts the call.
func (s *Store) List(ctx context.Context, prefix, marker string, limit int) ([]object.Info, error) {
	start := time.Now()
	infos, err := s.inner.List(ctx, prefix, marker, limit)
	s.done(opList, start, err)
	return infos, err
}
