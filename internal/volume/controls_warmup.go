package volume

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/control"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/object"
)

// warmup is the "warmup" control: for every regular file of the inodes
// of WarmupArgs (directories with their trees) it fetches the blocks
// their chunks show into this mount's block cache, reports how much of
// them is cached, or evicts them, WarmupArgs.Threads blocks at once (see
// chunk.Store.Warm for the cache tiers). A file that fails (the caller
// may not read it, a block is missing) is recorded and the others go on.
func (t *tools) warmup(ctx context.Context, req control.Request, progress func(any)) (any, error) {
	var args control.WarmupArgs
	if err := decodeArgs(req, &args); err != nil {
		return nil, err
	}
	args.Mode = cmp.Or(args.Mode, control.WarmupFetch)
	args.Threads = cmp.Or(args.Threads, defaultWarmupThreads)
	switch {
	case args.Mode != control.WarmupFetch && args.Mode != control.WarmupCheck && args.Mode != control.WarmupEvict:
		return nil, fmt.Errorf("warmup: unknown mode %q: %w", args.Mode, syscall.EINVAL)
	case args.Paths != nil && len(args.Paths) != len(args.Inos):
		return nil, fmt.Errorf("warmup: %d paths for %d inodes: %w", len(args.Paths), len(args.Inos), syscall.EINVAL)
	case args.Threads < 1 || args.Threads > maxWarmupThreads:
		return nil, fmt.Errorf("warmup: %d threads, want 1 to %d: %w", args.Threads, maxWarmupThreads, syscall.EINVAL)
	case args.CacheGroup && !t.cs.InGroup():
		return nil, fmt.Errorf("warmup --cache-group: the mount is in no cache group (mount it with --cache-group NAME): %w", syscall.EINVAL)
	}
	r := &warmRun{t: t, args: args, root: meta.CredOf(ctx).IsRoot()}
	if !args.Background {
		return r.run(ctx, progress)
	}
	// The work outlives the request; it keeps the caller's credentials.
	bctx := context.WithoutCancel(ctx)
	go func() {
		res, err := r.run(bctx, func(any) {})
		if err != nil {
			t.log.Warn("background warmup failed", "mode", args.Mode, "paths", len(args.Inos), "err", err)
			return
		}
		t.log.Info("background warmup done", "mode", args.Mode, "paths", len(args.Inos), "files", res.Total.Files,
			"bytes", res.Total.Bytes, "cached", res.Total.Cached, "fetched", res.Fetched, "failed", res.Failed)
	}()
	res := &control.WarmupResult{Mode: args.Mode, Tiers: t.cs.CacheTiers(), Background: true,
		Paths: make([]control.WarmupPath, len(args.Inos))}
	for i, ino := range args.Inos {
		res.Paths[i] = control.WarmupPath{Ino: ino, Path: r.pathOf(i)}
	}
	return res, nil
}

// warmRun is one warmup.
type warmRun struct {
	t    *tools
	args control.WarmupArgs
	root bool // the caller is root: no permission checks

	fails                control.Failures
	files, done, fetched atomic.Int64 // files found, bytes of blocks handled and fetched
}

// warmAcc adds up what warmup found in one of its paths.
type warmAcc struct {
	files, blocks, bytes, cached atomic.Int64
}

// warmFile is a file whose blocks are being handled.
type warmFile struct {
	ino    meta.Ino
	path   string
	failed atomic.Bool // a failure was recorded (one is enough), or the file changed
}

// warmBlock is one block to handle.
type warmBlock struct {
	b    chunk.BlockRef
	acc  *warmAcc
	file *warmFile
}

// run walks the paths of the warmup, hands the blocks of their files to
// r.args.Threads workers, and returns what it found. Only the end of ctx
// fails it.
func (r *warmRun) run(ctx context.Context, progress func(any)) (*control.WarmupResult, error) {
	blocks := make(chan warmBlock, 4*r.args.Threads)
	var workers sync.WaitGroup
	for range r.args.Threads {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for j := range blocks {
				r.handle(ctx, j)
			}
		}()
	}
	stop := reportProgress(ctx, progress, func() control.Progress {
		return control.Progress{Files: r.files.Load(), Bytes: r.done.Load()}
	})
	accs := make([]warmAcc, len(r.args.Inos))
	var err error
	for i, ino := range r.args.Inos {
		if err = r.input(ctx, ino, r.pathOf(i), &accs[i], blocks); err != nil {
			break
		}
	}
	close(blocks)
	workers.Wait()
	stop()
	if err != nil {
		return nil, err
	}
	if r.args.Mode == control.WarmupFetch {
		r.t.cs.FlushCache()
	}
	res := &control.WarmupResult{Mode: r.args.Mode, Tiers: r.t.cs.CacheTiers(), Fetched: r.fetched.Load(),
		Paths: make([]control.WarmupPath, len(accs))}
	for i := range accs {
		a := &accs[i]
		p := control.WarmupPath{Ino: r.args.Inos[i], WarmupTotals: control.WarmupTotals{Files: a.files.Load(),
			Blocks: a.blocks.Load(), Bytes: a.bytes.Load(), Cached: a.cached.Load()}}
		if r.args.Paths != nil {
			p.Path = r.args.Paths[i]
		}
		res.Paths[i] = p
		res.Total.Add(p.WarmupTotals)
	}
	res.Failed, res.Failures = r.fails.List()
	return res, nil
}

// pathOf returns the name of input i for failures.
func (r *warmRun) pathOf(i int) string {
	if r.args.Paths != nil {
		return r.args.Paths[i]
	}
	return fmt.Sprintf("inode %d", r.args.Inos[i])
}

// input queues the blocks of the file or tree ino, named path.
func (r *warmRun) input(ctx context.Context, ino meta.Ino, path string, acc *warmAcc, out chan<- warmBlock) error {
	a, err := r.t.mc.GetAttr(ctx, ino)
	if err == nil {
		err = r.t.checkReach(ctx, ino)
	}
	if err != nil {
		return r.fail(ctx, path, err)
	}
	switch a.Type {
	case store.TypeFile:
		return r.file(ctx, ino, a.Length, path, acc, out)
	case store.TypeDir:
		w := r.t.newWalker(ctx, false)
		w.fails, w.prefix = &r.fails, path
		w.file = func(ctx context.Context, e meta.Entry, rel string) error {
			return r.file(ctx, e.Ino, e.Attr.Length, joinPath(path, rel), acc, out)
		}
		if _, _, err := w.top(ctx, ino); err != nil {
			var pe *walkPathError
			if errors.As(err, &pe) {
				return r.fail(ctx, joinPath(path, pe.path), pe.err)
			}
			return r.fail(ctx, path, err)
		}
	}
	return nil
}

// fail records that path failed with err and returns nil, or returns the
// end of ctx. A file removed meanwhile is no failure: there is nothing
// left to warm up.
func (r *warmRun) fail(ctx context.Context, path string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if !errors.Is(err, syscall.ENOENT) {
		r.fails.Add(path, err)
	}
	return nil
}

// file queues the blocks of file ino, length bytes long, named path.
func (r *warmRun) file(ctx context.Context, ino meta.Ino, length uint64, path string, acc *warmAcc, out chan<- warmBlock) error {
	if !r.root {
		if err := r.t.mc.Access(ctx, ino, meta.MayRead); err != nil {
			return r.fail(ctx, path, err)
		}
	}
	bs, err := r.t.fileBlocks(ctx, ino, length)
	if err != nil {
		return r.fail(ctx, path, err)
	}
	acc.files.Add(1)
	r.files.Add(1)
	f := &warmFile{ino: ino, path: path}
	for _, b := range bs {
		acc.blocks.Add(1)
		acc.bytes.Add(int64(b.Len))
		select {
		case out <- warmBlock{b: b, acc: acc, file: f}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// fileBlocks lists the blocks that hold what the chunks of file ino,
// length bytes long, show: the blocks a read of the whole file needs,
// each once.
func (t *tools) fileBlocks(ctx context.Context, ino meta.Ino, length uint64) ([]chunk.BlockRef, error) {
	var out []chunk.BlockRef
	seen := map[chunk.BlockRef]bool{}
	for idx := uint32(0); uint64(idx)*meta.ChunkSize < length; idx++ {
		ss, err := t.mc.ReadChunk(ctx, ino, idx)
		if err != nil {
			return nil, err
		}
		end := uint32(min(meta.ChunkSize, length-uint64(idx)*meta.ChunkSize))
		for _, g := range meta.Visible(ss, 0, end) {
			if g.Slice == nil || g.Slice.Id == 0 {
				continue
			}
			for _, b := range t.cs.SliceBlocks(g.Slice.Id, g.Slice.Size, g.SliceOff(), g.End-g.Start) {
				if !seen[b] {
					seen[b] = true
					out = append(out, b)
				}
			}
		}
	}
	return out, nil
}

// handle fetches, checks or evicts one block.
func (r *warmRun) handle(ctx context.Context, j warmBlock) {
	n := int64(j.b.Len)
	defer r.done.Add(n)
	switch r.args.Mode {
	case control.WarmupFetch:
		fetched, err := r.t.cs.Warm(ctx, j.b)
		if err != nil {
			if !j.file.failed.Load() && !(errors.Is(err, object.ErrNotFound) && r.changed(ctx, j)) &&
				j.file.failed.CompareAndSwap(false, true) {
				_ = r.fail(ctx, j.file.path, err)
			}
			return
		}
		j.acc.cached.Add(n)
		if fetched {
			r.fetched.Add(n)
		}
	case control.WarmupCheck:
		if r.t.cs.Cached(j.b) {
			j.acc.cached.Add(n)
		}
	case control.WarmupEvict:
		if r.t.cs.Evict(j.b) {
			j.acc.cached.Add(n)
		}
	}
}

// changed reports whether the file of j no longer shows block j.b, whose
// object is missing: the file was overwritten, truncated or removed since
// its slices were read, which deleted the block, and there is nothing to
// report. A file that still shows the block has lost it.
func (r *warmRun) changed(ctx context.Context, j warmBlock) bool {
	a, err := r.t.mc.GetAttr(ctx, j.file.ino)
	if errors.Is(err, syscall.ENOENT) {
		j.file.failed.Store(true)
		return true
	}
	if err != nil {
		return false
	}
	bs, err := r.t.fileBlocks(ctx, j.file.ino, a.Length)
	if err != nil || slices.Contains(bs, j.b) {
		return false
	}
	j.file.failed.Store(true)
	return true
}
