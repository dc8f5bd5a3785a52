package chunk

import (
	"context"
	"fmt"

	"github.com/sluicefs/sluice/internal/meta"
)

// SliceSource lists the committed slices of a chunk; *meta.Client
// implements it.
type SliceSource interface {
	ReadChunk(ctx context.Context, ino meta.Ino, idx uint32) ([]meta.Slice, error)
}

var _ SliceSource = (*meta.Client)(nil)

// segment is a run of a chunk that reads from one slice (or a hole).
type segment struct {
	start, end uint32 // chunk offsets
	slice      *meta.Slice
}

// visible replays slices over the chunk range [start, end): later slices
// cover earlier ones; what no slice covers is a hole (slice nil).
func visible(slices []meta.Slice, start, end uint32) []segment {
	segs := []segment{{start: start, end: end}}
	for i := range slices {
		s := &slices[i]
		lo, hi := s.Pos, s.Pos+s.Len
		if hi <= start || lo >= end || s.Len == 0 {
			continue
		}
		next := make([]segment, 0, len(segs)+2)
		for _, g := range segs {
			if g.end <= lo || g.start >= hi {
				next = append(next, g)
				continue
			}
			if g.start < lo {
				next = append(next, segment{g.start, lo, g.slice})
			}
			next = append(next, segment{max(g.start, lo), min(g.end, hi), s})
			if g.end > hi {
				next = append(next, segment{hi, g.end, g.slice})
			}
		}
		segs = next
	}
	return segs
}

// ReadFile fills p with the committed content of file ino at offset off.
// The caller limits p to the file's length; holes read as zeros.
func (s *Store) ReadFile(ctx context.Context, src SliceSource, ino meta.Ino, p []byte, off uint64) error {
	for len(p) > 0 {
		idx := uint32(off / meta.ChunkSize)
		start := uint32(off % meta.ChunkSize)
		n := min(len(p), meta.ChunkSize-int(start))
		slices, err := src.ReadChunk(ctx, ino, idx)
		if err != nil {
			return fmt.Errorf("read chunk %d of inode %d: %w", idx, ino, err)
		}
		for _, g := range visible(slices, start, start+uint32(n)) {
			dst := p[g.start-start : g.end-start]
			if g.slice == nil || g.slice.Id == 0 {
				clear(dst)
				continue
			}
			sliceOff := g.slice.Off + (g.start - g.slice.Pos)
			if err := s.ReadSlice(ctx, g.slice.Id, g.slice.Size, sliceOff, dst); err != nil {
				return err
			}
		}
		p = p[n:]
		off += uint64(n)
	}
	return nil
}
