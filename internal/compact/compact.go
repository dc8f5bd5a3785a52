// Package compact rewrites chunks whose slice lists cost too much. Every
// write appends a slice to its chunk's list, reads replay the whole list,
// and a slice stays stored until nothing names it, so a file written in
// many small pieces reads slowly and a file overwritten in place keeps the
// overwritten bytes stored. Policy decides, from a list alone, what to
// keep, what to drop and what to copy; a Compactor carries the plan out:
// it copies the visible bytes of the slices to rewrite into one new slice
// and asks meta.Session.CompactChunk to swap the list in one transaction,
// which succeeds only if the list did not change meanwhile (but for slices
// appended after it). The replaced slices are deleted at once:
// chunk.Store.Delete waits for this mount's reads that may still use
// them, and other mounts that find a block gone read the list again.
package compact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/object"
)

// Config tunes a Compactor.
type Config struct {
	// Policy decides when chunks this mount writes are compacted
	// (ChunkIfDue); Settle, when a chunk has been left alone (ChunkSettle).
	// Defaults: Policy{} and SettlePolicy().
	Policy, Settle *Policy
	// Retries is how often a chunk that changed during compaction is
	// read and tried again before it is skipped. Default 3.
	Retries int
	// Swapped, when set, is called after a chunk of ino got its new list
	// and before the slices it replaced are deleted: a mount drops the
	// lists it cached, so its later reads do not look for them.
	Swapped func(ino meta.Ino)
	// Logger receives a line per compacted chunk at debug level. Nil
	// discards them.
	Logger *slog.Logger
	// Progress, when set, is told the running totals of Tree after each
	// file.
	Progress func(Stats)
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.Policy == nil {
		c.Policy = &Policy{}
	}
	c.Policy.Defaults()
	if c.Settle == nil {
		p := SettlePolicy()
		c.Settle = &p
	}
	c.Settle.Defaults()
	if c.Retries <= 0 {
		c.Retries = 3
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Stats counts what a compaction did.
type Stats struct {
	Chunks  int   // chunks whose list changed
	Slices  int   // entries they had before
	Dropped int   // entries dropped without copying (nothing showed them)
	Bytes   int64 // bytes copied into new slices
	Freed   int64 // bytes of slices that lost their last reference
	Skipped int   // chunks that kept changing and were left alone
	Waste   int64 // bytes stored beyond the visible ones, in the chunks looked at, before
	Left    int64 // the same, after
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Chunks += o.Chunks
	s.Slices += o.Slices
	s.Dropped += o.Dropped
	s.Bytes += o.Bytes
	s.Freed += o.Freed
	s.Skipped += o.Skipped
	s.Waste += o.Waste
	s.Left += o.Left
}

// Compactor rewrites chunks of one volume.
type Compactor struct {
	m    *meta.Session
	data *chunk.Store
	conf Config
}

// New returns a Compactor working through m and data.
func New(m *meta.Session, data *chunk.Store, conf Config) *Compactor {
	conf.Defaults()
	return &Compactor{m: m, data: data, conf: conf}
}

// ChunkIfDue compacts chunk idx of file ino as Config.Policy says; the
// write path calls it after committing slices.
func (c *Compactor) ChunkIfDue(ctx context.Context, ino meta.Ino, idx uint32) (Stats, error) {
	return c.chunk(ctx, ino, idx, c.conf.Policy.Plan)
}

// ChunkSettle compacts chunk idx of file ino as Config.Settle says, once
// its writer left it alone.
func (c *Compactor) ChunkSettle(ctx context.Context, ino meta.Ino, idx uint32) (Stats, error) {
	return c.chunk(ctx, ino, idx, c.conf.Settle.Plan)
}

// Chunk compacts chunk idx of file ino whole if it has more than one
// slice.
func (c *Compactor) Chunk(ctx context.Context, ino meta.Ino, idx uint32) (Stats, error) {
	return c.chunk(ctx, ino, idx, func(ss []meta.Slice) Plan {
		if len(ss) < 2 {
			return Plan{Keep: ss, Entries: len(ss)}
		}
		return FullPlan(ss)
	})
}

func (c *Compactor) chunk(ctx context.Context, ino meta.Ino, idx uint32, plan func([]meta.Slice) Plan) (Stats, error) {
	for attempt := 0; attempt < c.conf.Retries; attempt++ {
		old, err := c.m.ReadChunk(ctx, ino, idx)
		if err != nil {
			return Stats{}, fmt.Errorf("compact inode %d chunk %d: %w", ino, idx, err)
		}
		p := plan(old)
		if !p.Due() {
			return Stats{Waste: p.Waste, Left: p.Waste}, nil
		}
		dropFirst := p.Dropped > 0 && len(p.Copy) > 0
		if dropFirst {
			// Free what costs nothing to free before storing copies, so
			// the bucket does not hold both at once.
			p = Plan{Keep: p.Shown, Shown: p.Shown, Entries: p.Entries, Dropped: p.Dropped,
				Stored: p.Stored, Visible: p.Visible, Waste: p.Waste, Left: p.Waste}
		}
		st, err := c.apply(ctx, ino, idx, old, p)
		// A block gone: another mount compacted the chunk and deleted
		// what this one read.
		if errors.Is(err, meta.ErrChunkChanged) || errors.Is(err, object.ErrNotFound) {
			continue
		}
		if err != nil {
			return Stats{}, fmt.Errorf("compact inode %d chunk %d: %w", ino, idx, err)
		}
		c.conf.Logger.Debug("chunk compacted", "inode", ino, "chunk", idx, "entries", len(old),
			"dropped", st.Dropped, "copied", st.Bytes, "freed", st.Freed, "waste", p.Waste)
		if dropFirst {
			more, err := c.chunk(ctx, ino, idx, plan)
			more.Chunks, more.Slices, more.Waste = 1, st.Slices, st.Waste
			more.Dropped += st.Dropped
			more.Freed += st.Freed
			return more, err
		}
		return st, nil
	}
	return Stats{Skipped: 1}, nil
}

// apply carries plan out on chunk idx of ino, whose list was old.
func (c *Compactor) apply(ctx context.Context, ino meta.Ino, idx uint32, old []meta.Slice, plan Plan) (Stats, error) {
	repl := append([]meta.Slice(nil), plan.Keep...)
	var id uint64
	var size uint32
	if len(plan.Copy) > 0 {
		var err error
		if id, err = c.m.NewSliceID(ctx); err != nil {
			return Stats{}, err
		}
		var entries []meta.Slice
		entries, size = layout(id, plan.Copy)
		if err := c.data.WriteSliceFunc(ctx, id, size, c.filler(plan.Copy)); err != nil {
			c.cleanup(id, size)
			return Stats{}, err
		}
		repl = append(repl, entries...)
	}
	released, err := c.m.CompactChunk(ctx, ino, idx, old, repl)
	if err != nil {
		if id != 0 {
			c.cleanup(id, size)
		}
		return Stats{}, err
	}
	if c.conf.Swapped != nil {
		c.conf.Swapped(ino)
	}
	st := Stats{Chunks: 1, Slices: len(old), Dropped: plan.Dropped, Bytes: int64(size), Waste: plan.Waste, Left: plan.Left}
	for _, s := range released {
		st.Freed += int64(s.Size)
	}
	if err := c.m.DeleteReleased(ctx, released); err != nil {
		// They stay queued for the background deletion.
		c.conf.Logger.Debug("delete compacted slices now", "inode", ino, "chunk", idx, "err", err)
	}
	return st, nil
}

// layout places the pieces back to back in new slice id and returns the
// entries that show them, one per run of pieces adjacent in the chunk,
// and the slice's size.
func layout(id uint64, pieces []meta.Segment) ([]meta.Slice, uint32) {
	var out []meta.Slice
	var off uint32
	for i, g := range pieces {
		n := g.End - g.Start
		if i > 0 && pieces[i-1].End == g.Start {
			out[len(out)-1].Len += n
		} else {
			out = append(out, meta.Slice{Pos: g.Start, Id: id, Off: off, Len: n})
		}
		off += n
	}
	for i := range out {
		out[i].Size = off
	}
	return out, off
}

// filler returns the function that fills a range of the new slice from
// the pieces it is made of, read from their slices.
func (c *Compactor) filler(pieces []meta.Segment) func(ctx context.Context, off uint32, p []byte) error {
	starts := make([]uint32, len(pieces)) // offset of each piece in the new slice
	var at uint32
	for i, g := range pieces {
		starts[i] = at
		at += g.End - g.Start
	}
	return func(ctx context.Context, off uint32, p []byte) error {
		i := sort.Search(len(starts), func(i int) bool { return starts[i]+pieces[i].End-pieces[i].Start > off })
		for len(p) > 0 && i < len(pieces) {
			g := pieces[i]
			in := off - starts[i]
			n := min(uint32(len(p)), g.End-g.Start-in)
			if err := c.data.ReadSlice(ctx, g.Slice.Id, g.Slice.Size, g.SliceOff()+in, p[:n]); err != nil {
				return err
			}
			p, off = p[n:], off+n
			i++
		}
		return nil
	}
}

// cleanup deletes the blocks of a new slice that was never committed; a
// failure leaves them for `sluice gc`.
func (c *Compactor) cleanup(id uint64, size uint32) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.data.Delete(ctx, id, size); err != nil {
		c.conf.Logger.Warn("delete uncommitted compacted slice; `sluice gc` will find it", "slice", id, "err", err)
	}
}

// File compacts every chunk of file ino that has more than one slice.
func (c *Compactor) File(ctx context.Context, ino meta.Ino) (Stats, error) {
	var total Stats
	chunks, err := c.m.FileChunks(ctx, ino)
	if err != nil {
		return total, fmt.Errorf("compact inode %d: %w", ino, err)
	}
	for _, ch := range chunks {
		if ch.Slices < 2 {
			continue
		}
		st, err := c.Chunk(ctx, ino, ch.Idx)
		total.Add(st)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// Tree compacts every file in the tree at ino (a file or a directory),
// reading directories page by page.
func (c *Compactor) Tree(ctx context.Context, ino meta.Ino) (Stats, error) {
	var total Stats
	a, err := c.m.GetAttr(ctx, ino)
	if err != nil {
		return total, fmt.Errorf("compact inode %d: %w", ino, err)
	}
	if a.Type == store.TypeFile {
		return c.File(ctx, ino)
	}
	if a.Type != store.TypeDir {
		return total, nil
	}
	dirs := []meta.Ino{ino}
	for len(dirs) > 0 {
		d := dirs[len(dirs)-1]
		dirs = dirs[:len(dirs)-1]
		var after []byte
		for {
			es, err := c.m.ReadDir(ctx, d, after, 1000, false)
			if err != nil {
				return total, fmt.Errorf("compact directory %d: %w", d, err)
			}
			for _, e := range es {
				switch e.Type {
				case store.TypeDir:
					dirs = append(dirs, e.Ino)
				case store.TypeFile:
					st, err := c.File(ctx, e.Ino)
					total.Add(st)
					if err != nil {
						return total, err
					}
					if c.conf.Progress != nil {
						c.conf.Progress(total)
					}
				}
			}
			if len(es) < 1000 {
				break
			}
			after = bytes.Clone(es[len(es)-1].Name)
		}
	}
	return total, nil
}

// WithSwapped returns a Compactor like c that calls fn where
// Config.Swapped would be called.
func (c *Compactor) WithSwapped(fn func(ino meta.Ino)) *Compactor {
	cc := *c
	cc.conf.Swapped = fn
	return &cc
}
