package chunk

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
)

// WriteSlice stores data as the blocks of slice id, uploading them
// concurrently within the store's upload limit. It does not commit the
// slice to metadata: the caller does (a compaction swaps it into a chunk),
// or deletes the blocks again with Delete when it cannot.
func (s *Store) WriteSlice(ctx context.Context, id uint64, data []byte) error {
	if len(data) == 0 {
		return fmt.Errorf("write slice %d: no data", id)
	}
	bs := s.conf.BlockSize
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.conf.MaxUploads)
	for i := 0; i*bs < len(data); i++ {
		block := data[i*bs : min(len(data), (i+1)*bs)]
		g.Go(func() error { return s.putBlock(gctx, id, i, block) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("write slice %d: %w", id, err)
	}
	return nil
}
