// Package fsck checks a volume: its metadata (meta.Check: entries, link
// counts, parents, slice ranges, reference counts) and then that every
// block of every slice a checked file names exists in object storage with
// the right length (on volumes that store blocks as they are; with
// compression or encryption, only that it exists and is not empty).
//
// Run reports each problem as it finds it and returns the totals; printing
// is the caller's business.
package fsck

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/object"
)

// Defaults of Options.
const (
	// DefaultThreads is the number of concurrent block checks.
	DefaultThreads = 10
	// DefaultMaxPaths bounds the problems whose inode gets its path
	// looked up: each lookup walks up the tree, and a badly damaged
	// volume can have millions of problems.
	DefaultMaxPaths = 1000
)

// Volume is what Run needs of an open volume; *volume.Volume has it.
type Volume interface {
	Store() store.Store
	Format() *meta.Format
	// Objects returns the volume's object storage, keys relative to the
	// volume ("chunks/...").
	Objects() object.Store
}

// Options tune Run.
type Options struct {
	// Path limits the check to the subtree at this path of the volume;
	// empty checks the whole volume.
	Path string
	// Threads bounds concurrent block checks. Default DefaultThreads.
	Threads int
	// MaxPaths bounds the problems whose Path is looked up; later ones
	// get "?". Default DefaultMaxPaths; negative looks up none.
	MaxPaths int
	// OnProblem, when set, is told each problem as it is found. Calls are
	// serialized.
	OnProblem func(Problem)
	// Progress, when set, is told now and then how far Run got. Calls are
	// serialized with each other and with OnProblem.
	Progress func(Progress)
}

// Problem is one problem Run found.
type Problem struct {
	// Ino is the inode concerned; 0 for records of no inode.
	Ino meta.Ino
	// Path is a path of Ino in the volume, "?" when it was not looked up
	// (past Options.MaxPaths); empty when Ino is 0.
	Path string
	// Slice is the slice whose block is missing or wrong, and Chunk the
	// index of the chunk of Ino that names it; both 0 for a problem of
	// the metadata.
	Slice uint64
	Chunk uint32
	// Block is the key of the block concerned; empty for a problem of the
	// metadata.
	Block string
	// Msg says what is wrong.
	Msg string
}

// Phase is a step of Run.
type Phase int

// The steps of Run, in order.
const (
	CheckMetadata Phase = iota // checking the metadata; Done counts inodes
	CheckBlocks                // checking blocks; Done counts blocks
)

// Progress says how far Run got in a phase.
type Progress struct {
	Phase Phase
	Done  int64
}

// Report sums up a check.
type Report struct {
	Inodes   int64 // inodes checked
	Slices   int64 // slices the checked files name
	Blocks   int64 // blocks checked
	Problems int64 // problems found, in the metadata and the blocks
}

// Run checks v's volume. It fails only when it cannot check (an engine
// or object storage error other than a missing block); problems found are
// counted in the report and told to OnProblem.
func Run(ctx context.Context, v Volume, opts Options) (*Report, error) {
	if opts.Threads == 0 {
		opts.Threads = DefaultThreads
	}
	if opts.Threads < 0 {
		return nil, fmt.Errorf("fsck: %d threads", opts.Threads)
	}
	if opts.MaxPaths == 0 {
		opts.MaxPaths = DefaultMaxPaths
	}
	c := &checker{ctx: ctx, st: v.Store(), opts: opts}
	r := &Report{}
	res, err := meta.Check(ctx, c.st, meta.CheckOptions{
		Path:     opts.Path,
		OnDamage: func(d meta.Damage) { c.report(Problem{Ino: d.Ino, Msg: d.Msg}) },
		Progress: func(n int64) { c.progress(Progress{Phase: CheckMetadata, Done: n}) },
	})
	if err != nil {
		return r, fmt.Errorf("check metadata: %w", err)
	}
	r.Inodes, r.Slices, r.Problems = res.Inodes, int64(len(res.Slices)), res.Damages
	blocks, bad, err := c.checkBlocks(v.Objects(), v.Format(), res.Slices)
	r.Blocks, r.Problems = blocks, r.Problems+bad
	return r, err
}

// checker holds the state of one Run that its callbacks share.
type checker struct {
	ctx   context.Context
	st    store.Store
	opts  Options
	mu    sync.Mutex // serializes the callbacks; guards paths
	paths int        // paths looked up
}

// report fills in p's path and tells OnProblem.
func (c *checker) report(p Problem) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.Ino != 0 {
		p.Path = "?"
		if c.paths < c.opts.MaxPaths {
			c.paths++
			p.Path = meta.InodePath(c.ctx, c.st, p.Ino)
		}
	}
	if c.opts.OnProblem != nil {
		c.opts.OnProblem(p)
	}
}

func (c *checker) progress(p Progress) {
	if c.opts.Progress == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opts.Progress(p)
}

// checkBlocks checks with Head that every block of the slices exists and,
// on volumes that store blocks as they are, has its length. It returns the
// blocks checked and the problems found.
func (c *checker) checkBlocks(obj object.Store, f *meta.Format, slices map[meta.SliceKey]meta.SliceUse) (int64, int64, error) {
	bs := f.BlockSize << 10
	sized := (f.Compression == "" || f.Compression == "none") && f.EncryptKey == ""
	var checked, bad atomic.Int64
	g, gctx := errgroup.WithContext(c.ctx)
	g.SetLimit(c.opts.Threads)
	for k, u := range slices {
		for i := 0; i*bs < int(k.Size); i++ {
			want := min(bs, int(k.Size)-i*bs)
			key := chunk.BlockKey(k.Id, i, want, f.HashPrefix)
			g.Go(func() error {
				info, err := obj.Head(gctx, key)
				c.progress(Progress{Phase: CheckBlocks, Done: checked.Add(1)})
				var msg string
				switch {
				case errors.Is(err, object.ErrNotFound):
					msg = fmt.Sprintf("block %s missing", key)
				case err != nil:
					return fmt.Errorf("check block %s: %w", key, err)
				case sized && info.Size != int64(want):
					msg = fmt.Sprintf("block %s has %d bytes, want %d", key, info.Size, want)
				case info.Size == 0:
					msg = fmt.Sprintf("block %s is empty", key)
				default:
					return nil
				}
				bad.Add(1)
				c.report(Problem{Ino: u.Ino, Slice: k.Id, Chunk: u.Idx, Block: key, Msg: msg})
				return nil
			})
		}
	}
	err := g.Wait()
	return checked.Load(), bad.Load(), err
}
