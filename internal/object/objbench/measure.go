package objbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/conformance"
)

// Options are the settings of Measure. Validate's errors name each
// option as the flag of `sluice objbench` that sets it.
type Options struct {
	// Threads is how many requests run at a time (--threads).
	Threads int
	// BlockSize is the size of the blocks a big object is cut into
	// (--block-size), from 1 byte to 1 GiB.
	BlockSize int64
	// BigObjectSize is the size of the big object (--big-object-size),
	// put as blocks and as one object.
	BigObjectSize int64
	// SmallObjectSize is the size of each small object
	// (--small-object-size), which may be 0, and SmallObjects their
	// number (--small-objects).
	SmallObjectSize int64
	SmallObjects    int
}

// Defaults returns the settings `sluice objbench` runs with when no flag
// is given.
func Defaults() Options {
	return Options{Threads: 4, BlockSize: 4 << 20, BigObjectSize: 1 << 30, SmallObjectSize: 128 << 10, SmallObjects: 100}
}

// Validate checks the options before anything is written.
func (o *Options) Validate() error {
	switch {
	case o.Threads < 1:
		return fmt.Errorf("--threads %d: must be at least 1", o.Threads)
	case o.BlockSize < 1 || o.BlockSize > 1<<30:
		return fmt.Errorf("--block-size %d: must be from 1 byte to 1G", o.BlockSize)
	case o.BigObjectSize < 1:
		return fmt.Errorf("--big-object-size %d: must be at least 1 byte", o.BigObjectSize)
	case o.SmallObjectSize < 0 || o.SmallObjects < 1:
		return errors.New("--small-objects must be at least 1 and --small-object-size at least 0")
	}
	return nil
}

// Result is the outcome of one measured operation.
type Result struct {
	// Op names the operation, as "put block".
	Op string
	// Size is the bytes each request moves; -1 for requests that move
	// no object data (head, list, delete).
	Size int64
	// Count is the number of requests.
	Count int
	// Bytes is the data the requests moved when the throughput is in
	// bytes; 0 when it is in objects.
	Bytes int64
	// Objects is the objects the requests handled (a list handles all
	// the small objects).
	Objects int
	// Wall is the time of all the requests, Threads at a time; Median
	// and P99 are quantiles of the time of one.
	Wall, Median, P99 time.Duration
}

// Rate returns the throughput: MiB per second when the operation is
// measured in bytes (Bytes > 0), else objects per second.
func (r *Result) Rate() float64 {
	secs := r.Wall.Seconds()
	if secs <= 0 {
		secs = math.SmallestNonzeroFloat64
	}
	if r.Bytes > 0 {
		return float64(r.Bytes) / (1 << 20) / secs
	}
	return float64(r.Objects) / secs
}

// phase is one measured operation.
type phase struct {
	op      string
	size    int64 // -1: none
	n       int
	bytes   func(i int) int64 // bytes moved by call i; nil for object counts
	threads int               // 0: Options.Threads
	objects int               // objects one call handles; 0: 1
	fn      func(ctx context.Context, i int) error
}

// Measure times the operations in turn: put, get and ranged get of the
// blocks of a big object, put and get of it whole (a single put,
// multipart where the store has it), then put, get, head, list and
// delete of the small objects. Every read checks what it got. It stops
// at the first operation that fails.
func (b *Bench) Measure(ctx context.Context, o Options) ([]Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	var results []Result
	for _, p := range phases(b.s, &o) {
		threads := p.threads
		if threads == 0 {
			threads = o.Threads
		}
		wall, lat, err := measure(ctx, threads, p.n, p.fn)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.op, err)
		}
		r := Result{Op: p.op, Size: p.size, Count: p.n, Wall: wall, Objects: p.n}
		if p.bytes != nil {
			for i := range p.n {
				r.Bytes += p.bytes(i)
			}
		}
		if p.objects > 0 {
			r.Objects = p.n * p.objects
		}
		r.Median, r.P99 = percentile(lat, 0.5), percentile(lat, 0.99)
		results = append(results, r)
	}
	return results, nil
}

// phases returns the operations Measure times on s.
func phases(s object.Store, o *Options) []phase {
	nBlocks := int((o.BigObjectSize + o.BlockSize - 1) / o.BlockSize)
	blockLen := func(i int) int64 { return min(o.BlockSize, o.BigObjectSize-int64(i)*o.BlockSize) }
	block := conformance.Data(4, int(o.BlockSize))
	blockKey := func(i int) string { return "big/" + chunk.BlockKey(1, i, int(blockLen(i)), false) }
	small := conformance.Data(5, int(o.SmallObjectSize))
	smallKey := func(i int) string { return fmt.Sprintf("small/%06d", i) }
	rangeLen := max(1, o.BlockSize/4)
	return []phase{
		{op: "put block", size: o.BlockSize, n: nBlocks, bytes: blockLen,
			fn: func(ctx context.Context, i int) error {
				return s.Put(ctx, blockKey(i), bytes.NewReader(block[:blockLen(i)]))
			}},
		{op: "get block", size: o.BlockSize, n: nBlocks, bytes: blockLen,
			fn: func(ctx context.Context, i int) error {
				got, err := conformance.Get(ctx, s, blockKey(i), 0, -1)
				if err != nil {
					return err
				}
				return expect("get "+blockKey(i), got, block[:blockLen(i)])
			}},
		{op: "ranged get (1/4 block)", size: rangeLen, n: nBlocks,
			bytes: func(i int) int64 { return min(rangeLen, blockLen(i)) },
			fn: func(ctx context.Context, i int) error {
				off := (int64(i) * 7919 % 4) * rangeLen % blockLen(i)
				got, err := conformance.Get(ctx, s, blockKey(i), off, rangeLen)
				if err != nil {
					return err
				}
				return expect("ranged get "+blockKey(i), got, block[off:min(off+rangeLen, blockLen(i))])
			}},
		{op: "put big object (one put)", size: o.BigObjectSize, n: 1, threads: 1,
			bytes: func(int) int64 { return o.BigObjectSize },
			fn: func(ctx context.Context, _ int) error {
				return s.Put(ctx, "big/object", &cyclicReader{data: block, left: o.BigObjectSize})
			}},
		{op: "get big object", size: o.BigObjectSize, n: 1, threads: 1,
			bytes: func(int) int64 { return o.BigObjectSize },
			fn: func(ctx context.Context, _ int) error {
				return checkCyclic(ctx, s, "big/object", block, o.BigObjectSize)
			}},
		{op: "put small object", size: o.SmallObjectSize, n: o.SmallObjects,
			fn: func(ctx context.Context, i int) error { return s.Put(ctx, smallKey(i), bytes.NewReader(small)) }},
		{op: "get small object", size: o.SmallObjectSize, n: o.SmallObjects,
			fn: func(ctx context.Context, i int) error {
				got, err := conformance.Get(ctx, s, smallKey(i), 0, -1)
				if err != nil {
					return err
				}
				return expect("get "+smallKey(i), got, small)
			}},
		{op: "head small object", size: -1, n: o.SmallObjects,
			fn: func(ctx context.Context, i int) error {
				info, err := s.Head(ctx, smallKey(i))
				if err == nil && info.Size != o.SmallObjectSize {
					err = fmt.Errorf("head %s: size %d, want %d", smallKey(i), info.Size, o.SmallObjectSize)
				}
				return err
			}},
		{op: "list small objects (pages of 1000)", size: -1, n: max(1, o.Threads), objects: o.SmallObjects,
			fn: func(ctx context.Context, i int) error { return listSmall(ctx, s, o.SmallObjects) }},
		{op: "delete small object", size: -1, n: o.SmallObjects,
			fn: func(ctx context.Context, i int) error { return s.Delete(ctx, smallKey(i)) }},
	}
}

// listSmall lists the small objects in pages of 1000 and checks that
// there are want of them.
func listSmall(ctx context.Context, s object.Store, want int) error {
	n := 0
	for marker := ""; ; {
		infos, err := s.List(ctx, "small/", marker, 1000)
		if err != nil {
			return err
		}
		n += len(infos)
		if len(infos) < 1000 {
			break
		}
		marker = infos[len(infos)-1].Key
	}
	if n != want {
		return fmt.Errorf("list found %d small objects, want %d", n, want)
	}
	return nil
}

// expect compares a read with the bytes it should return.
func expect(what string, got, want []byte) error {
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s returned %d bytes, want %d (different content)", what, len(got), len(want))
	}
	return nil
}

// measure runs fn(i) for i in [0, n) with threads at a time and records
// each call's latency.
func measure(ctx context.Context, threads, n int, fn func(ctx context.Context, i int) error) (time.Duration, []time.Duration, error) {
	lat := make([]time.Duration, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(threads)
	start := time.Now()
	for i := range n {
		g.Go(func() error {
			t := time.Now()
			err := fn(gctx, i)
			lat[i] = time.Since(t)
			return err
		})
	}
	err := g.Wait()
	return time.Since(start), lat, err
}

// percentile returns the q-quantile of d (sorted in place).
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(q*float64(len(d))))]
}

// cyclicReader yields data over and over until left bytes have been read;
// it hides its length, so a store streams it.
type cyclicReader struct {
	data []byte
	off  int
	left int64
}

func (r *cyclicReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(int64(len(p)), r.left)], r.data[r.off:])
	r.off = (r.off + n) % len(r.data)
	r.left -= int64(n)
	return n, nil
}

// checkCyclic reads key and checks it holds size bytes of data repeated.
func checkCyclic(ctx context.Context, s object.Store, key string, data []byte, size int64) error {
	rc, err := s.Get(ctx, key, 0, -1)
	if err != nil {
		return err
	}
	defer rc.Close()
	want := &cyclicReader{data: data, left: size}
	buf, wbuf := make([]byte, 1<<20), make([]byte, 1<<20)
	var n int64
	for {
		k, rerr := io.ReadFull(rc, buf)
		if k > 0 {
			if _, err := io.ReadFull(want, wbuf[:k]); err != nil || !bytes.Equal(buf[:k], wbuf[:k]) {
				return fmt.Errorf("get %s: content differs from what was put, near byte %d", key, n)
			}
			n += int64(k)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("get %s: %w", key, rerr)
		}
	}
	if n != size {
		return fmt.Errorf("get %s: %d bytes, want %d", key, n, size)
	}
	return nil
}
