// Package compact rewrites fragmented chunks. Every write appends a slice
// to its chunk's list and reads replay the whole list, so a file written
// in many small pieces reads slowly and keeps overwritten bytes stored. A
// Compactor reads a chunk's visible bytes (holes as zeros), stores them as
// one new slice, and asks meta.Client.CompactChunk to swap the list in one
// transaction, which succeeds only if the chunk did not change meanwhile.
//
// Choosing what to compact (Policy) is pure and apart from the IO. The
// replaced slices are released through the normal reference-counted
// deletion after Config.KeepOld, so readers that still replay the old
// list (other mounts, until their next open) keep reading correct data.
package compact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// Policy decides when a chunk is fragmented enough to compact.
//
// The defaults weigh what a long list costs (every read replays it from
// the newest slice back, and a list of many small slices also means many
// small objects) against what compaction costs (rewriting the whole
// chunk): fsx, which fsyncs small writes all the time, spent a fifth of the
// mount's CPU compacting with a threshold of 20 small slices. A chunk is due when it has MaxSlices slices, or more than
// MinSlices of which at least half are shorter than SmallSlice.
type Policy struct {
	MaxSlices  int    // default 200
	MinSlices  int    // default 50
	SmallSlice uint32 // default 128 KiB
}

// Defaults fills unset fields.
func (p *Policy) Defaults() {
	if p.MaxSlices <= 0 {
		p.MaxSlices = 200
	}
	if p.MinSlices <= 0 {
		p.MinSlices = 50
	}
	if p.SmallSlice == 0 {
		p.SmallSlice = 128 << 10
	}
}

// Due reports whether a chunk with this slice list should be compacted.
func (p Policy) Due(ss []meta.Slice) bool {
	p.Defaults()
	if len(ss) >= p.MaxSlices {
		return true
	}
	if len(ss) <= p.MinSlices {
		return false
	}
	small := 0
	for _, s := range ss {
		if s.Len < p.SmallSlice {
			small++
		}
	}
	return 2*small >= len(ss)
}

// Config tunes a Compactor.
type Config struct {
	Policy Policy
	// KeepOld delays the release of replaced slices, so that readers
	// holding the old list keep finding its blocks. Default 10 minutes;
	// negative releases them at once.
	KeepOld time.Duration
	// Retries is how often a chunk that changed during compaction is
	// read and tried again before it is skipped. Default 3.
	Retries int
	// Logger receives a line per compacted chunk at debug level. Nil
	// discards them.
	Logger *slog.Logger
	// Progress, when set, is told the running totals of Tree after each
	// file.
	Progress func(Stats)
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	c.Policy.Defaults()
	if c.KeepOld == 0 {
		c.KeepOld = 10 * time.Minute
	}
	if c.Retries <= 0 {
		c.Retries = 3
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Stats counts what a compaction did.
type Stats struct {
	Chunks  int   // chunks rewritten
	Slices  int   // slices they had before
	Bytes   int64 // bytes written into new slices
	Skipped int   // chunks that kept changing and were left alone
}

func (s *Stats) add(o Stats) {
	s.Chunks += o.Chunks
	s.Slices += o.Slices
	s.Bytes += o.Bytes
	s.Skipped += o.Skipped
}

// Compactor rewrites chunks of one volume.
type Compactor struct {
	m    *meta.Client
	data *chunk.Store
	conf Config
}

// New returns a Compactor working through m and data.
func New(m *meta.Client, data *chunk.Store, conf Config) *Compactor {
	conf.Defaults()
	return &Compactor{m: m, data: data, conf: conf}
}

// ChunkIfDue compacts chunk idx of file ino when the policy says it is
// fragmented; the write path calls it after committing slices.
func (c *Compactor) ChunkIfDue(ctx context.Context, ino meta.Ino, idx uint32) (Stats, error) {
	return c.chunk(ctx, ino, idx, c.conf.Policy.Due)
}

// Chunk compacts chunk idx of file ino if it has more than one slice.
func (c *Compactor) Chunk(ctx context.Context, ino meta.Ino, idx uint32) (Stats, error) {
	return c.chunk(ctx, ino, idx, func(ss []meta.Slice) bool { return len(ss) > 1 })
}

func (c *Compactor) chunk(ctx context.Context, ino meta.Ino, idx uint32, due func([]meta.Slice) bool) (Stats, error) {
	for attempt := 0; attempt < c.conf.Retries; attempt++ {
		old, err := c.m.ReadChunk(ctx, ino, idx)
		if err != nil {
			return Stats{}, fmt.Errorf("compact inode %d chunk %d: %w", ino, idx, err)
		}
		if !due(old) {
			return Stats{}, nil
		}
		st, err := c.rewrite(ctx, ino, idx, old)
		if errors.Is(err, meta.ErrChunkChanged) {
			continue
		}
		if err != nil {
			return Stats{}, fmt.Errorf("compact inode %d chunk %d: %w", ino, idx, err)
		}
		c.conf.Logger.Debug("chunk compacted", "inode", ino, "chunk", idx, "slices", len(old), "bytes", st.Bytes)
		return st, nil
	}
	return Stats{Skipped: 1}, nil
}

// rewrite stores the visible bytes of old as one slice and swaps it in.
func (c *Compactor) rewrite(ctx context.Context, ino meta.Ino, idx uint32, old []meta.Slice) (Stats, error) {
	segs := meta.Visible(old, 0, meta.ChunkSize)
	first, last := -1, -1
	for i, g := range segs {
		if g.Slice != nil && g.Slice.Id != 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	st := Stats{Chunks: 1, Slices: len(old)}
	if first < 0 { // only holes
		return st, c.m.CompactChunk(ctx, ino, idx, old, meta.Slice{}, c.conf.KeepOld)
	}
	start, end := segs[first].Start, segs[last].End
	buf := make([]byte, end-start)
	for _, g := range segs[first : last+1] {
		if g.Slice == nil || g.Slice.Id == 0 {
			continue // zeros already
		}
		if err := c.data.ReadSlice(ctx, g.Slice.Id, g.Slice.Size, g.SliceOff(), buf[g.Start-start:g.End-start]); err != nil {
			return Stats{}, err
		}
	}
	id, err := c.m.NewSliceID(ctx)
	if err != nil {
		return Stats{}, err
	}
	if err := c.data.WriteSlice(ctx, id, buf); err != nil {
		c.cleanup(id, len(buf))
		return Stats{}, err
	}
	s := meta.Slice{Pos: start, Id: id, Size: uint32(len(buf)), Len: uint32(len(buf))}
	if err := c.m.CompactChunk(ctx, ino, idx, old, s, c.conf.KeepOld); err != nil {
		c.cleanup(id, len(buf))
		return Stats{}, err
	}
	st.Bytes = int64(len(buf))
	return st, nil
}

// cleanup deletes the blocks of a new slice that was never committed; a
// failure leaves them for `sluice gc`.
func (c *Compactor) cleanup(id uint64, size int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.data.Delete(ctx, id, uint32(size)); err != nil {
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
		total.add(st)
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
					total.add(st)
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
