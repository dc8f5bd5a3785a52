package chunk

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
)

// compactUploads bounds the blocks one WriteSliceFunc fills and uploads at
// once, and so the memory and upload bandwidth a compaction takes from the
// writers it shares the store with.
const compactUploads = 4

// WriteSliceFunc stores a slice of size bytes as blocks of slice id,
// asking fill for the bytes of each block (fill(ctx, off, p) fills p with
// the slice's bytes at off) and uploading at most a few blocks at once, so the
// memory it holds stays a few blocks whatever the size. It does not commit
// the slice to metadata: the caller does (a compaction swaps it into a
// chunk), or deletes the blocks again with Delete when it cannot.
func (s *Store) WriteSliceFunc(ctx context.Context, id uint64, size uint32, fill func(ctx context.Context, off uint32, p []byte) error) error {
	if size == 0 {
		return fmt.Errorf("write slice %d: no data", id)
	}
	bs := s.conf.BlockSize
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(compactUploads)
	for i := 0; i*bs < int(size); i++ {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			block := make([]byte, s.blockLen(size, i))
			if err := fill(gctx, uint32(i*bs), block); err != nil {
				return err
			}
			// The copy is cached in memory only: writing it to the
			// disk cache too would take the disk from the writers. It
			// is uploaded before the swap even with writeback: nobody
			// waits for it, and the slices it replaces are deleted at
			// once, so other mounts must find it in the bucket.
			return s.put(gctx, id, i, block, s.mem, false)
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("write slice %d: %w", id, err)
	}
	return ctx.Err()
}
