package volume

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/control"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/vfs"
)

// The controls of the tools `sluice info`, `summary`, `warmup` and `rmr`
// (package control defines their arguments and results). They run in the
// mount, next to the metadata client, the chunk store and its caches,
// with the credentials of the process that asked: a walk of a big tree
// costs round trips to the engine from here instead of a system call
// per entry through the kernel, and warmup fills this mount's block
// cache, which no other process can reach.
const (
	// walkPage is how many entries a walk lists at once.
	walkPage = 1000
	// walkListers bounds the directories one walk lists at once.
	walkListers = 8
	// rmrWorkers bounds the entries one rmr removes at once.
	rmrWorkers = 8
	// defaultWarmupThreads is the blocks warmup handles at once unless
	// asked otherwise; maxWarmupThreads bounds what may be asked.
	defaultWarmupThreads = 4
	maxWarmupThreads     = 256
	// progressEvery is how often a long control reports its progress.
	progressEvery = 250 * time.Millisecond
	// maxDepth bounds the directories checked above an inode.
	maxDepth = 4096
)

// tools serves the tool controls of one volume.
type tools struct {
	mc  *meta.Client
	cs  *chunk.Store
	log *slog.Logger
	// fs is the VFS, which rmr removes through; set once it exists.
	fs atomic.Pointer[vfs.VFS]
}

// addToolControls adds the controls "info", "summary", "warmup" and "rmr"
// to c. The returned tools serve "rmr" once their fs is set to the VFS
// made from c.
func addToolControls(c *vfs.Config, cs *chunk.Store, mc *meta.Client) *tools {
	t := &tools{mc: mc, cs: cs, log: c.Logger}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	controls := map[string]vfs.Control{
		control.OpInfo:    t.info,
		control.OpSummary: t.summary,
		control.OpWarmup:  t.warmup,
		control.OpRmr:     t.rmr,
	}
	for name, fn := range c.Controls {
		controls[name] = fn
	}
	c.Controls = controls
	return t
}

// decodeArgs decodes the arguments of req into args.
func decodeArgs(req control.Request, args any) error {
	if len(req.Args) == 0 {
		return nil
	}
	if err := json.Unmarshal(req.Args, args); err != nil {
		return fmt.Errorf("%s: bad arguments: %v: %w", req.Op, err, syscall.EINVAL)
	}
	return nil
}

// checkReach checks that the caller in ctx may search every directory
// above ino, as a path lookup that reaches ino would: the control channel
// takes inode numbers, which a caller could name without a path. A
// hard-linked file has no single parent; then only its existence is
// checked.
func (t *tools) checkReach(ctx context.Context, ino meta.Ino) error {
	a, err := t.mc.GetAttr(ctx, ino)
	if err != nil || meta.CredOf(ctx).IsRoot() {
		return err
	}
	for p, n := a.Parent, 0; p != 0 && n < maxDepth; n++ {
		if err := t.mc.Access(ctx, p, meta.MayExec); err != nil {
			return err
		}
		if p == meta.RootIno {
			return nil
		}
		d, err := t.mc.GetAttr(ctx, p)
		if err != nil {
			return err
		}
		p = d.Parent
	}
	return nil
}

// reportProgress calls progress with what snapshot returns every
// progressEvery until the returned stop is called; stop waits, so that
// nothing is reported after it.
func reportProgress(ctx context.Context, progress func(any), snapshot func() control.Progress) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				progress(snapshot())
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// joinPath joins a relative path and a name ("" is the top).
func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// info is the "info" control: the attributes of req.Ino, a file's chunks
// (with InfoArgs.Raw their slices and blocks), a directory's totals (with
// InfoArgs.Recursive).
func (t *tools) info(ctx context.Context, req control.Request, progress func(any)) (any, error) {
	var args control.InfoArgs
	if err := decodeArgs(req, &args); err != nil {
		return nil, err
	}
	if err := t.checkReach(ctx, req.Ino); err != nil {
		return nil, err
	}
	a, err := t.mc.GetAttr(ctx, req.Ino)
	if err != nil {
		return nil, err
	}
	res := &control.InfoResult{Ino: a.Ino, Type: control.TypeName(a.Type), Mode: a.Mode, Uid: a.Uid, Gid: a.Gid,
		Nlink: a.Nlink, Length: a.Length, Rdev: a.Rdev,
		Atime: time.Unix(a.Atime, int64(a.Atimensec)).UTC(),
		Mtime: time.Unix(a.Mtime, int64(a.Mtimensec)).UTC(),
		Ctime: time.Unix(a.Ctime, int64(a.Ctimensec)).UTC()}
	switch a.Type {
	case store.TypeSymlink:
		target, err := t.mc.ReadLink(ctx, a.Ino)
		if err != nil {
			return nil, err
		}
		res.Target = string(target)
	case store.TypeFile:
		if err := t.mc.Access(ctx, a.Ino, meta.MayRead); err != nil {
			return nil, err
		}
		if res.Chunks, err = t.chunks(ctx, a.Ino, args.Raw); err != nil {
			return nil, err
		}
	case store.TypeDir:
		if !args.Recursive {
			break
		}
		w := t.newWalker(ctx, args.Strict)
		stop := reportProgress(ctx, progress, w.progress)
		top, entries, err := w.top(ctx, a.Ino)
		stop()
		if err != nil {
			return nil, err
		}
		res.Tree, res.Entries = &top.Totals, &entries
		res.Failed, res.Failures = w.fails.List()
	}
	return res, nil
}

// chunks lists the chunks of file ino that hold slices, with raw their
// slices and the keys of their blocks.
func (t *tools) chunks(ctx context.Context, ino meta.Ino, raw bool) ([]control.ChunkInfo, error) {
	cs, err := t.mc.FileChunks(ctx, ino)
	if err != nil {
		return nil, err
	}
	prefix := t.mc.Format().Name + "/"
	out := make([]control.ChunkInfo, 0, len(cs))
	for _, c := range cs {
		if c.Slices == 0 {
			continue
		}
		ci := control.ChunkInfo{Index: c.Idx, Count: c.Slices}
		if raw {
			ss, err := t.mc.ReadChunk(ctx, ino, c.Idx)
			if err != nil {
				return nil, err
			}
			ci.Count = len(ss)
			for _, s := range ss {
				si := control.SliceInfo{ID: s.Id, Size: s.Size, Off: s.Off, Len: s.Len, Pos: s.Pos}
				for _, b := range t.cs.SliceBlocks(s.Id, s.Size, s.Off, s.Len) {
					si.Blocks = append(si.Blocks, control.BlockInfo{Key: prefix + b.Key(), Len: b.Len})
				}
				ci.Slices = append(ci.Slices, si)
			}
		}
		out = append(out, ci)
	}
	return out, nil
}

// summary is the "summary" control: the totals of the tree at req.Ino
// and of its entries down to SummaryArgs.Depth, the biggest
// SummaryArgs.Entries of each directory.
func (t *tools) summary(ctx context.Context, req control.Request, progress func(any)) (any, error) {
	args := control.SummaryArgs{Depth: 2, Entries: 10}
	if err := decodeArgs(req, &args); err != nil {
		return nil, err
	}
	if args.Depth < 0 || args.Entries < 1 {
		return nil, fmt.Errorf("summary: depth %d and entries %d: want depth >= 0 and entries >= 1: %w",
			args.Depth, args.Entries, syscall.EINVAL)
	}
	if err := t.checkReach(ctx, req.Ino); err != nil {
		return nil, err
	}
	a, err := t.mc.GetAttr(ctx, req.Ino)
	if err != nil {
		return nil, err
	}
	if a.Type != store.TypeDir {
		n := &control.SummaryNode{Totals: control.Totals{Files: 1}}
		if a.Type == store.TypeFile {
			n.Length = int64(a.Length)
		}
		return &control.SummaryResult{Tree: n}, nil
	}
	w := t.newWalker(ctx, args.Strict)
	w.depth, w.entries = args.Depth, args.Entries
	stop := reportProgress(ctx, progress, w.progress)
	top, _, err := w.top(ctx, a.Ino)
	stop()
	if err != nil {
		return nil, err
	}
	res := &control.SummaryResult{Tree: top}
	res.Failed, res.Failures = w.fails.List()
	return res, nil
}

// walker walks directory trees with the caller's credentials, listing up
// to walkListers directories at once. It adds up what each directory
// holds and, for a summary, keeps the biggest entries down to depth.
type walker struct {
	mc     *meta.Client
	root   bool // the caller is root: no permission checks
	strict bool
	// depth is the levels below the top whose entries are kept (-1:
	// none); entries bounds those kept per directory.
	depth, entries int
	// file, when set, is called with each regular file; an error ends
	// the walk.
	file func(ctx context.Context, e meta.Entry, path string) error
	// fails records the subdirectories skipped, named prefix/path.
	fails  *control.Failures
	prefix string
	tokens chan struct{}

	files, dirs, bytes atomic.Int64 // progress
}

// newWalker returns a walker for the caller in ctx.
func (t *tools) newWalker(ctx context.Context, strict bool) *walker {
	return &walker{mc: t.mc, root: meta.CredOf(ctx).IsRoot(), strict: strict, depth: -1, entries: 1,
		fails: &control.Failures{}, tokens: make(chan struct{}, walkListers-1)}
}

func (w *walker) progress() control.Progress {
	return control.Progress{Files: w.files.Load(), Dirs: w.dirs.Load(), Bytes: w.bytes.Load()}
}

// top walks the directory ino, which the caller must be allowed to list,
// and returns its node and its number of entries.
func (w *walker) top(ctx context.Context, ino meta.Ino) (*control.SummaryNode, int64, error) {
	n, entries, err := w.dir(ctx, ino, "", 0)
	if err != nil {
		return nil, 0, err
	}
	return n, entries, nil
}

// dir walks directory ino at path, depth levels below the top. It
// returns the directory's node (counting at least the directory itself)
// and its number of entries; an error is the first the walk met, with
// the path it concerns.
func (w *walker) dir(ctx context.Context, ino meta.Ino, path string, depth int) (*control.SummaryNode, int64, error) {
	node := &control.SummaryNode{Path: path, Dir: true, Totals: control.Totals{Dirs: 1}}
	w.dirs.Add(1)
	if !w.root {
		if err := w.mc.Access(ctx, ino, meta.MayRead|meta.MayExec); err != nil {
			return node, 0, pathError(path, err)
		}
	}
	kids := &children{keep: depth < w.depth, max: w.entries, others: control.SummaryNode{Path: joinPath(path, "...")}}
	var entries int64
	var mu sync.Mutex // guards node and kids
	add := func(n *control.SummaryNode) {
		mu.Lock()
		defer mu.Unlock()
		node.Totals.Add(n.Totals)
		kids.add(n)
	}
	var errMu sync.Mutex
	var walkErr error
	setErr := func(err error) {
		errMu.Lock()
		walkErr = cmp.Or(walkErr, err)
		errMu.Unlock()
	}
	var after []byte
	for {
		es, err := w.mc.ReadDir(ctx, ino, after, walkPage, true)
		if err != nil {
			return node, entries, pathError(path, err)
		}
		entries += int64(len(es))
		var wg sync.WaitGroup
		for _, e := range es {
			if e.Attr == nil {
				continue // removed since the listing
			}
			p := joinPath(path, string(e.Name))
			if e.Type != store.TypeDir {
				n := &control.SummaryNode{Path: p, Totals: control.Totals{Files: 1}}
				if e.Type == store.TypeFile {
					n.Length = int64(e.Attr.Length)
					if w.file != nil {
						if err := w.file(ctx, e, p); err != nil {
							setErr(err)
						}
					}
				}
				w.files.Add(1)
				w.bytes.Add(n.Length)
				add(n)
				continue
			}
			sub := func() {
				n, _, err := w.dir(ctx, e.Ino, p, depth+1)
				if err = w.skip(p, err); err != nil {
					setErr(err)
				}
				add(n)
			}
			select {
			case w.tokens <- struct{}{}:
				wg.Add(1)
				go func() {
					defer func() { <-w.tokens; wg.Done() }()
					sub()
				}()
			default:
				sub()
			}
		}
		wg.Wait()
		if walkErr != nil {
			return node, entries, walkErr
		}
		if err := ctx.Err(); err != nil {
			return node, entries, err
		}
		if len(es) < walkPage {
			break
		}
		after = es[len(es)-1].Name
	}
	node.Children = kids.list()
	return node, entries, nil
}

// skip decides about the error of a subdirectory's walk: a directory the
// caller may not list is recorded and skipped unless the walk is strict,
// one removed meanwhile is skipped; any other error ends the walk.
func (w *walker) skip(path string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ENOENT):
		return nil
	case !w.strict && (errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)):
		var pe *walkPathError
		if errors.As(err, &pe) {
			err = pe.err
		}
		w.fails.Add(joinPath(w.prefix, path), err)
		return nil
	}
	return err
}

// pathError wraps err with the relative path it concerns (none for the
// top), unless it already names one.
func pathError(path string, err error) error {
	var pe *walkPathError
	if path == "" || errors.As(err, &pe) {
		return err
	}
	return &walkPathError{path: path, err: err}
}

// walkPathError is an error of a walk at a path below its top.
type walkPathError struct {
	path string
	err  error
}

func (e *walkPathError) Error() string { return e.path + ": " + e.err.Error() }
func (e *walkPathError) Unwrap() error { return e.err }

// children keeps the biggest entries of a directory for a summary and
// sums the others.
type children struct {
	keep   bool
	max    int
	kept   []*control.SummaryNode
	others control.SummaryNode
}

func (c *children) add(n *control.SummaryNode) {
	if !c.keep {
		return
	}
	c.kept = append(c.kept, n)
	if len(c.kept) >= 2*c.max+walkPage {
		c.trim()
	}
}

// trim keeps the max biggest entries and sums the rest in others.
func (c *children) trim() {
	slices.SortFunc(c.kept, func(a, b *control.SummaryNode) int {
		return cmp.Or(cmp.Compare(b.Length, a.Length), cmp.Compare(b.Files+b.Dirs, a.Files+a.Dirs), strings.Compare(a.Path, b.Path))
	})
	if len(c.kept) <= c.max {
		return
	}
	for _, n := range c.kept[c.max:] {
		c.others.Totals.Add(n.Totals)
		c.others.Others++
	}
	clear(c.kept[c.max:])
	c.kept = c.kept[:c.max]
}

// list returns the entries kept, biggest first, and the sum of the
// others as a last entry "...".
func (c *children) list() []*control.SummaryNode {
	if !c.keep {
		return nil
	}
	c.trim()
	if c.others.Others > 0 {
		return append(c.kept, &c.others)
	}
	return c.kept
}

// rmr is the "rmr" control: it removes the entry RmrArgs.Name of
// directory req.Ino and its tree (vfs.VFS.RemoveTree).
func (t *tools) rmr(ctx context.Context, req control.Request, progress func(any)) (any, error) {
	var args control.RmrArgs
	if err := decodeArgs(req, &args); err != nil {
		return nil, err
	}
	if args.Name == "" || args.Name == "." || args.Name == ".." || strings.Contains(args.Name, "/") {
		// The root of a mount has no name in a directory: it is never
		// removed.
		return nil, fmt.Errorf("rmr: cannot remove %q: %w", args.Name, syscall.EINVAL)
	}
	fs := t.fs.Load()
	if fs == nil {
		return nil, fmt.Errorf("rmr: the file system is not open: %w", syscall.EAGAIN)
	}
	if err := t.checkReach(ctx, req.Ino); err != nil {
		return nil, err
	}
	var res control.RmrResult
	var removed atomic.Int64
	var fails control.Failures
	stop := reportProgress(ctx, progress, func() control.Progress { return control.Progress{Removed: removed.Load()} })
	err := fs.RemoveTree(ctx, req.Ino, []byte(args.Name), rmrWorkers, &fails, func() { removed.Add(1) })
	stop()
	if err != nil {
		return nil, err
	}
	res.Removed = removed.Load()
	res.Failed, res.Failures = fails.List()
	return &res, nil
}

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
