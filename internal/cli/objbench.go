package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/object"
	objall "github.com/sluicefs/sluice/internal/object/all"
	"github.com/sluicefs/sluice/internal/object/conformance"
	"github.com/sluicefs/sluice/internal/object/prefix"
	"github.com/sluicefs/sluice/internal/object/s3"
)

type objbenchOptions struct {
	storage         string
	keys            credentials
	threads         int
	blockSize       int64
	bigObjectSize   int64
	smallObjectSize int64
	smallObjects    int
	skipFunctional  bool
}

func newObjbench() *cobra.Command {
	o := objbenchOptions{storage: "file", threads: 4, blockSize: 4 << 20, bigObjectSize: 1 << 30,
		smallObjectSize: 128 << 10, smallObjects: 100}
	cmd := &cobra.Command{
		Use:   "objbench [flags] BUCKET",
		Short: "Check and measure an object store",
		Long: `Check that an object store behaves as Sluice needs, with the conformance
checks every backend passes in Sluice's own tests (put, get, ranged get,
head, missing keys, overwrite, delete, listing in key order and in pages,
concurrent and atomic overwrites, objects of several multipart parts, puts
whose content fails), printing pass or fail for each check, then measure it: blocks of --block-size
making up --big-object-size, one object of --big-object-size in one put
(multipart where the store has it), and --small-objects objects of
--small-object-size, with --threads requests at a time. It prints a table of
count, throughput and median latency per operation.

Everything is written under a random objbench-*/ prefix of BUCKET and deleted
at the end, also when a check fails. The command exits non-zero when a
functional check fails.`,
		Example: `  sluice objbench /tmp/bucket --big-object-size 64M
  sluice objbench --storage s3 --access-key AK --secret-key SK http://127.0.0.1:9000/mybucket -p 4`,
		Args: exactArgs(1, "BUCKET"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runObjbench(cmd.Context(), cmd.OutOrStdout(), args[0], &o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.storage, "storage", o.storage, "object storage type: "+strings.Join(objall.Storages(), ", "))
	o.keys.addFlags(fl)
	fl.IntVarP(&o.threads, "threads", "p", o.threads, "requests at a time")
	fl.Var(sizeValue{&o.blockSize, 1 << 10}, "block-size", "size of the blocks a big object is cut into; a plain number is KiB")
	fl.Var(sizeValue{&o.bigObjectSize, 1 << 20}, "big-object-size", "size of the big object; a plain number is MiB")
	fl.Var(sizeValue{&o.smallObjectSize, 1 << 10}, "small-object-size", "size of each small object; a plain number is KiB")
	fl.IntVar(&o.smallObjects, "small-objects", o.smallObjects, "number of small objects")
	fl.BoolVar(&o.skipFunctional, "skip-functional-tests", false, "skip the functional checks")
	return cmd
}

func (o *objbenchOptions) validate() error {
	switch {
	case o.threads < 1:
		return fmt.Errorf("--threads %d: must be at least 1", o.threads)
	case o.blockSize < 1 || o.blockSize > 1<<30:
		return fmt.Errorf("--block-size %d: must be from 1 byte to 1G", o.blockSize)
	case o.bigObjectSize < 1:
		return fmt.Errorf("--big-object-size %d: must be at least 1 byte", o.bigObjectSize)
	case o.smallObjectSize < 0 || o.smallObjects < 1:
		return errors.New("--small-objects must be at least 1 and --small-object-size at least 0")
	}
	return nil
}

func runObjbench(ctx context.Context, out io.Writer, bucket string, o *objbenchOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := o.validate(); err != nil {
		return err
	}
	keys := o.keys.withEnv()
	if o.storage == "s3" {
		bucket, keys = moveURLCredentials(bucket, keys)
	}
	store, err := objall.Open(o.storage, bucket, objall.Options{
		AccessKey: keys.accessKey, SecretKey: keys.secretKey, SessionToken: keys.sessionToken})
	if err != nil {
		return err
	}
	if c, ok := store.(object.Creator); ok {
		if err := c.Create(ctx); err != nil {
			return fmt.Errorf("create bucket: %w", err)
		}
	}
	return objbench(ctx, out, store, o)
}

// objbench checks and measures store under a random prefix, which it
// empties before returning.
func objbench(ctx context.Context, out io.Writer, store object.Store, o *objbenchOptions) (err error) {
	var rnd [6]byte
	rand.Read(rnd[:])
	pfx := "objbench-" + hex.EncodeToString(rnd[:]) + "/"
	s := prefix.New(store, pfx)
	fmt.Fprintf(out, "Object store %s, writing under %s\n", store, pfx)
	defer func() {
		n, cerr := removeAll(context.WithoutCancel(ctx), s)
		fmt.Fprintf(out, "Removed %d objects under %s\n", n, pfx)
		if cerr != nil && err == nil {
			err = fmt.Errorf("clean up %s: %w", pfx, cerr)
		}
	}()

	if !o.skipFunctional {
		if failed := runChecks(ctx, out, s, checkConfig(o.storage)); failed > 0 {
			return fmt.Errorf("%d functional checks failed on %s", failed, store)
		}
	}
	return runBenchmarks(ctx, out, s, o)
}

// removeAll deletes every object of s and returns how many it deleted.
func removeAll(ctx context.Context, s object.Store) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	n := 0
	for {
		infos, err := s.List(ctx, "", "", 1000)
		if err != nil {
			return n, err
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(16)
		for _, info := range infos {
			g.Go(func() error { return s.Delete(gctx, info.Key) })
		}
		if err := g.Wait(); err != nil {
			return n, err
		}
		n += len(infos)
		if len(infos) < 1000 {
			return n, nil
		}
	}
}

// runChecks runs the conformance checks, each in a fresh prefix of s,
// prints one line for each and returns how many failed.
func runChecks(ctx context.Context, out io.Writer, s object.Store, cfg conformance.Config) int {
	fmt.Fprintln(out, "\nFunctional checks:")
	failed := 0
	for _, c := range conformance.Checks(cfg) {
		start := time.Now()
		err := c.Run(ctx, prefix.New(s, "check-"+c.Name+"/"))
		status := "pass"
		if err != nil {
			status, failed = "FAIL: "+strings.ReplaceAll(err.Error(), "\n", "; "), failed+1
		}
		fmt.Fprintf(out, "  %-44s %-4s (%s)\n", c.Doc, status, time.Since(start).Round(time.Millisecond))
	}
	return failed
}

// checkConfig returns the configuration of the conformance checks for a
// store of the given storage type.
func checkConfig(storage string) conformance.Config {
	cfg := conformance.Config{ExactSizes: true} // objbench checks the backend itself
	if storage == "s3" {
		cfg.PartSize = s3.DefaultPartSize
	}
	return cfg
}

// pattern returns n deterministic bytes that do not compress.
func pattern(seed byte, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// getAll reads the range (off, limit) of key.
func getAll(ctx context.Context, s object.Store, key string, off, limit int64) ([]byte, error) {
	rc, err := s.Get(ctx, key, off, limit)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// expect compares a read with the bytes it should return.
func expect(what string, got, want []byte) error {
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s returned %d bytes, want %d (different content)", what, len(got), len(want))
	}
	return nil
}

// result is the outcome of one benchmarked operation.
type result struct {
	op, size    string
	count       int
	bytes       int64 // bytes moved; 0 for operations counted in objects
	objects     int   // objects handled, for operations without bytes
	wall        time.Duration
	median, p99 time.Duration
}

// throughput formats the rate of r.
func (r *result) throughput() string {
	secs := r.wall.Seconds()
	if secs <= 0 {
		secs = math.SmallestNonzeroFloat64
	}
	if r.bytes > 0 {
		return fmt.Sprintf("%.1f MiB/s", float64(r.bytes)/(1<<20)/secs)
	}
	return fmt.Sprintf("%.0f objects/s", float64(r.objects)/secs)
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

// phase is one benchmarked operation.
type phase struct {
	op, size string
	n        int
	bytes    func(i int) int64 // bytes moved by call i; nil for object counts
	threads  int               // 0: the --threads value
	fn       func(ctx context.Context, i int) error
}

func runBenchmarks(ctx context.Context, out io.Writer, s object.Store, o *objbenchOptions) error {
	nBlocks := int((o.bigObjectSize + o.blockSize - 1) / o.blockSize)
	blockLen := func(i int) int64 { return min(o.blockSize, o.bigObjectSize-int64(i)*o.blockSize) }
	block := pattern(4, int(o.blockSize))
	blockKey := func(i int) string { return "big/" + chunk.BlockKey(1, i, int(blockLen(i)), false) }
	small := pattern(5, int(o.smallObjectSize))
	smallKey := func(i int) string { return fmt.Sprintf("small/%06d", i) }
	rangeLen := max(1, o.blockSize/4)
	phases := []phase{
		{op: "put block", size: formatSize(o.blockSize), n: nBlocks, bytes: blockLen,
			fn: func(ctx context.Context, i int) error {
				return s.Put(ctx, blockKey(i), bytes.NewReader(block[:blockLen(i)]))
			}},
		{op: "get block", size: formatSize(o.blockSize), n: nBlocks, bytes: blockLen,
			fn: func(ctx context.Context, i int) error {
				got, err := getAll(ctx, s, blockKey(i), 0, -1)
				if err != nil {
					return err
				}
				return expect("get "+blockKey(i), got, block[:blockLen(i)])
			}},
		{op: "ranged get (1/4 block)", size: formatSize(rangeLen), n: nBlocks,
			bytes: func(i int) int64 { return min(rangeLen, blockLen(i)) },
			fn: func(ctx context.Context, i int) error {
				off := (int64(i) * 7919 % 4) * rangeLen % blockLen(i)
				got, err := getAll(ctx, s, blockKey(i), off, rangeLen)
				if err != nil {
					return err
				}
				return expect("ranged get "+blockKey(i), got, block[off:min(off+rangeLen, blockLen(i))])
			}},
		{op: "put big object (one put)", size: formatSize(o.bigObjectSize), n: 1, threads: 1,
			bytes: func(int) int64 { return o.bigObjectSize },
			fn: func(ctx context.Context, _ int) error {
				return s.Put(ctx, "big/object", &cyclicReader{data: block, left: o.bigObjectSize})
			}},
		{op: "get big object", size: formatSize(o.bigObjectSize), n: 1, threads: 1,
			bytes: func(int) int64 { return o.bigObjectSize },
			fn: func(ctx context.Context, _ int) error {
				return checkCyclic(ctx, s, "big/object", block, o.bigObjectSize)
			}},
		{op: "put small object", size: formatSize(o.smallObjectSize), n: o.smallObjects,
			fn: func(ctx context.Context, i int) error { return s.Put(ctx, smallKey(i), bytes.NewReader(small)) }},
		{op: "get small object", size: formatSize(o.smallObjectSize), n: o.smallObjects,
			fn: func(ctx context.Context, i int) error {
				got, err := getAll(ctx, s, smallKey(i), 0, -1)
				if err != nil {
					return err
				}
				return expect("get "+smallKey(i), got, small)
			}},
		{op: "head small object", n: o.smallObjects,
			fn: func(ctx context.Context, i int) error {
				info, err := s.Head(ctx, smallKey(i))
				if err == nil && info.Size != o.smallObjectSize {
					err = fmt.Errorf("head %s: size %d, want %d", smallKey(i), info.Size, o.smallObjectSize)
				}
				return err
			}},
		{op: "list small objects (pages of 1000)", n: max(1, o.threads),
			fn: func(ctx context.Context, i int) error {
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
				if n != o.smallObjects {
					return fmt.Errorf("list found %d small objects, want %d", n, o.smallObjects)
				}
				return nil
			}},
		{op: "delete small object", n: o.smallObjects,
			fn: func(ctx context.Context, i int) error { return s.Delete(ctx, smallKey(i)) }},
	}
	var results []*result
	for _, p := range phases {
		threads := p.threads
		if threads == 0 {
			threads = o.threads
		}
		wall, lat, err := measure(ctx, threads, p.n, p.fn)
		if err != nil {
			return fmt.Errorf("%s: %w", p.op, err)
		}
		r := &result{op: p.op, size: p.size, count: p.n, wall: wall, objects: p.n}
		if p.bytes != nil {
			for i := range p.n {
				r.bytes += p.bytes(i)
			}
		}
		if strings.HasPrefix(p.op, "list") {
			r.objects = p.n * o.smallObjects
		}
		r.median, r.p99 = percentile(lat, 0.5), percentile(lat, 0.99)
		results = append(results, r)
	}
	fmt.Fprintf(out, "\nBenchmark (%d threads, block size %s, big object %s, %d small objects of %s):\n",
		o.threads, formatSize(o.blockSize), formatSize(o.bigObjectSize), o.smallObjects, formatSize(o.smallObjectSize))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATION\tSIZE\tCOUNT\tTHROUGHPUT\tMEDIAN ms/op\tP99 ms/op\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%.2f\t%.2f\t\n", r.op, orDash(r.size), r.count, r.throughput(),
			float64(r.median.Microseconds())/1000, float64(r.p99.Microseconds())/1000)
	}
	return tw.Flush()
}

// orDash returns s, or "-" when s is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
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
