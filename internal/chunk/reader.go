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

// ReadFile fills p with the committed content of file ino at offset off.
// The caller limits p to the file's length; holes read as zeros. The
// deletion of a slice through this Store waits for the reads that began
// before it, so a list src returned stays readable until ReadFile returns.
func (s *Store) ReadFile(ctx context.Context, src SliceSource, ino meta.Ino, p []byte, off uint64) error {
	defer s.readers.leave(s.readers.enter())
	for len(p) > 0 {
		idx := uint32(off / meta.ChunkSize)
		start := uint32(off % meta.ChunkSize)
		n := min(len(p), meta.ChunkSize-int(start))
		slices, err := src.ReadChunk(ctx, ino, idx)
		if err != nil {
			return fmt.Errorf("read chunk %d of inode %d: %w", idx, ino, err)
		}
		for _, g := range meta.Visible(slices, start, start+uint32(n)) {
			dst := p[g.Start-start : g.End-start]
			if g.Slice == nil || g.Slice.Id == 0 {
				clear(dst)
				continue
			}
			if err := s.readSlice(ctx, g.Slice.Id, g.Slice.Size, g.SliceOff(), dst); err != nil {
				return err
			}
		}
		p = p[n:]
		off += uint64(n)
	}
	return nil
}
