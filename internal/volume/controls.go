package volume

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/control"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
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
	mc  *meta.Session
	cs  *chunk.Store
	log *slog.Logger
	// fs is the VFS, which rmr removes through; set once it exists.
	fs atomic.Pointer[vfs.VFS]
}

// addToolControls adds the controls "info", "summary", "warmup" and "rmr"
// to c. The returned tools serve "rmr" once their fs is set to the VFS
// made from c.
func addToolControls(c *vfs.Config, cs *chunk.Store, mc *meta.Session) *tools {
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
		return fmt.Errorf("%s: bad arguments: %v: %w", req.Op, err, syscall.EINVAL) //lint:nowrap the cause is EINVAL, the errno the caller gets; the decoder's words only explain it
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
