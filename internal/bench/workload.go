package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// phase is the workload of one item.
type phase struct {
	it    *Item
	ops   int64
	drop  func() []string // files whose cache to drop first
	per   string
	files int
	bytes int64
	fn    func(ctx context.Context, t int, tick func()) error
}

// run runs the five items in dir and records them in r.
func run(ctx context.Context, dir string, o *Options, r *Report) error {
	labels := r.Items()
	for k, p := range phases(dir, o, r) {
		if p.drop != nil {
			all := ""
			if o.DropCaches {
				all = o.DropFile
			}
			if err := dropCache(p.drop(), all); err != nil {
				return err
			}
		}
		op, done := func() {}, func() {}
		if o.Progress != nil {
			o1, d1 := o.Progress(labels[k].Label, p.ops)
			if o1 != nil {
				op = o1
			}
			if d1 != nil {
				done = d1
			}
		}
		wall, busy, err := runPhase(ctx, o.Threads, func(ctx context.Context, t int) error {
			return p.fn(ctx, t, op)
		})
		done()
		if err != nil {
			return fmt.Errorf("%s: %w", strings.ToLower(labels[k].Label), err)
		}
		p.it.record(p.files, p.ops, p.bytes, wall, busy, p.per)
	}
	return nil
}

// phases returns the workloads of the five items of r, in the order
// Items returns them, over the files of dir.
func phases(dir string, o *Options, r *Report) []phase {
	n := o.Threads
	bigBlocks := (o.BigFileSize + o.BlockSize - 1) / o.BlockSize
	bigName := func(t int) string { return filepath.Join(dir, fmt.Sprintf("big.%d", t)) }
	smallName := func(t, i int) string { return filepath.Join(dir, fmt.Sprintf("small.%d.%d", t, i)) }
	smallNames := func() []string {
		var names []string
		for t := range n {
			for i := range o.SmallFileCount {
				names = append(names, smallName(t, i))
			}
		}
		return names
	}
	bigNames := func() []string {
		var names []string
		for t := range n {
			names = append(names, bigName(t))
		}
		return names
	}
	// Each thread writes its own content, which does not compress.
	data := make([][]byte, n)
	for t := range data {
		data[t] = pattern(byte(t+1), int(o.BlockSize))
	}
	small := int64(n) * int64(o.SmallFileCount)
	eachSmall := func(t int, tick func(), fn func(name string) error) error {
		for i := range o.SmallFileCount {
			if err := fn(smallName(t, i)); err != nil {
				return err
			}
			tick()
		}
		return nil
	}
	return []phase{
		{it: &r.BigWrite, ops: int64(n) * bigBlocks, per: "block", files: n, bytes: int64(n) * o.BigFileSize,
			fn: func(ctx context.Context, t int, tick func()) error {
				return writeFile(ctx, bigName(t), data[t], o.BigFileSize, true, tick)
			}},
		{it: &r.BigRead, ops: int64(n) * bigBlocks, drop: bigNames, per: "block", files: n, bytes: int64(n) * o.BigFileSize,
			fn: func(ctx context.Context, t int, tick func()) error {
				return readFile(ctx, bigName(t), data[t], o.BigFileSize, tick)
			}},
		{it: &r.SmallWrite, ops: small, per: "file", files: int(small), bytes: small * o.SmallFileSize,
			fn: func(ctx context.Context, t int, tick func()) error {
				return eachSmall(t, tick, func(name string) error {
					return writeFile(ctx, name, data[t], o.SmallFileSize, false, nil)
				})
			}},
		{it: &r.SmallRead, ops: small, drop: smallNames, per: "file", files: int(small), bytes: small * o.SmallFileSize,
			fn: func(ctx context.Context, t int, tick func()) error {
				return eachSmall(t, tick, func(name string) error {
					return readFile(ctx, name, data[t], o.SmallFileSize, nil)
				})
			}},
		{it: &r.Stat, ops: small, per: "stat", files: int(small),
			fn: func(ctx context.Context, t int, tick func()) error {
				return eachSmall(t, tick, func(name string) error {
					if err := ctx.Err(); err != nil {
						return err
					}
					_, err := os.Lstat(name)
					return err
				})
			}},
	}
}

// runPhase runs fn(t) for t in [0, threads) at once and returns the wall
// time and the threads' times summed.
func runPhase(ctx context.Context, threads int, fn func(ctx context.Context, t int) error) (wall, busy time.Duration, err error) {
	times := make([]time.Duration, threads)
	g, gctx := errgroup.WithContext(ctx)
	start := time.Now()
	for t := range threads {
		g.Go(func() error {
			s := time.Now()
			err := fn(gctx, t)
			times[t] = time.Since(s)
			return err
		})
	}
	err = g.Wait()
	wall = time.Since(start)
	for _, d := range times {
		busy += d
	}
	return wall, busy, err
}

// writeFile creates name and writes size bytes to it, cycling through
// block, one write per block; tick, when not nil, is called after each.
// With sync it fsyncs the file before closing it.
func writeFile(ctx context.Context, name string, block []byte, size int64, sync bool, tick func()) error {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	for off := int64(0); off < size; off += int64(len(block)) {
		if err := ctx.Err(); err != nil {
			f.Close()
			return err
		}
		if _, err := f.Write(block[:min(int64(len(block)), size-off)]); err != nil {
			f.Close()
			return err
		}
		if tick != nil {
			tick()
		}
	}
	if sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// readFile reads name back in reads of len(block) bytes and checks that
// it holds what writeFile wrote.
func readFile(ctx context.Context, name string, block []byte, size int64, tick func()) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, len(block))
	for off := int64(0); off < size; off += int64(len(block)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		want := block[:min(int64(len(block)), size-off)]
		if _, err := io.ReadFull(f, buf[:len(want)]); err != nil {
			return fmt.Errorf("read %s at %d: %w", name, off, err)
		}
		if !bytes.Equal(buf[:len(want)], want) {
			return fmt.Errorf("read %s at %d: the data differs from what was written", name, off)
		}
		if tick != nil {
			tick()
		}
	}
	return nil
}

// dropCache drops the page cache of the named files with
// posix_fadvise(POSIX_FADV_DONTNEED), and, when all names the
// drop_caches file, all the machine's caches.
func dropCache(names []string, all string) error {
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
		if err != nil {
			return fmt.Errorf("posix_fadvise %s: %w", name, err)
		}
	}
	if all == "" {
		return nil
	}
	unix.Sync()
	if err := os.WriteFile(all, []byte("3\n"), 0); err != nil {
		return fmt.Errorf("--drop-caches: %w", err)
	}
	return nil
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
