package meta

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// processDeletions works through the deletion queues: the chunks of
// deleted files are dropped (queueing their slices), and queued slices have
// their blocks deleted through Config.DeleteSlice before they leave the
// queue. A crash at any point leaves work queued, never data named by
// metadata but deleted from storage.
func (c *Client) processDeletions(ctx context.Context) error {
	var files []store.DelFile
	if err := c.st.View(ctx, func(tx store.Tx) error {
		var err error
		files, err = tx.DelFiles(100)
		return err
	}); err != nil {
		return err
	}
	now := time.Now().Unix()
	for _, f := range files {
		if f.Expire > now {
			continue
		}
		if err := c.dropFileData(ctx, f); err != nil {
			return err
		}
	}
	if c.conf.DeleteSlice == nil {
		return nil
	}
	for {
		var slices []Slice
		if err := c.st.View(ctx, func(tx store.Tx) error {
			var err error
			slices, err = tx.DelSlices(100)
			return err
		}); err != nil {
			return err
		}
		for _, s := range slices {
			if err := c.conf.DeleteSlice(ctx, s.Id, s.Size); err != nil {
				return fmt.Errorf("delete slice %d: %w", s.Id, err)
			}
			if err := c.st.Update(ctx, func(tx store.Tx) error {
				tx.SetDelSlice(s.Id, s.Size, false)
				return nil
			}); err != nil {
				return err
			}
		}
		if len(slices) < 100 || ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// dropFileData drops the chunks of a deleted file in batches and then its
// queue record.
func (c *Client) dropFileData(ctx context.Context, f store.DelFile) error {
	for {
		var more bool
		err := c.st.Update(ctx, func(tx store.Tx) error {
			idxs, err := tx.ChunkIndexes(f.Ino, 0, 100)
			if err != nil {
				return err
			}
			for _, idx := range idxs {
				if err := dropChunk(tx, f.Ino, idx); err != nil {
					return err
				}
			}
			more = len(idxs) == 100
			if !more {
				tx.SetDelFile(f, false)
			}
			return nil
		})
		if err != nil || !more {
			return err
		}
	}
}

// FlushDeletions runs the deletion queues once, now. Tests and `sluice gc`
// use it; mounts run it in the background.
func (c *Client) FlushDeletions(ctx context.Context) error {
	return c.processDeletions(ctx)
}
