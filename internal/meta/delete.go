package meta

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// processDeletions works through the deletion queues: the chunks of
// deleted files are dropped (queueing their slices), unfinished
// truncations are finished, and queued slices have their blocks deleted
// through Config.DeleteSlice, Config.DeleteWorkers at a time, before they
// leave the queue. A crash at any point leaves work queued, never data
// named by metadata but deleted from storage.
func (c *Client) processDeletions(ctx context.Context) error {
	c.delMu.Lock()
	defer c.delMu.Unlock()
	var files []store.DelFile
	if err := c.st.View(ctx, func(tx store.Tx) error {
		var err error
		files, err = tx.DelFiles(100)
		return err
	}); err != nil {
		return fmt.Errorf("list deleted files: %w", err)
	}
	now := c.conf.Now().Unix() // queued with the same clock, see destroy
	for _, f := range files {
		if f.Expire > now {
			continue
		}
		if err := c.dropFileData(ctx, f); err != nil {
			return err
		}
	}
	if err := c.processTruncations(ctx); err != nil {
		return err
	}
	if c.conf.DeleteSlice == nil {
		return nil
	}
	for {
		var slices []Slice
		if err := c.st.View(ctx, func(tx store.Tx) error {
			var err error
			slices, err = tx.DelSlices(c.batch.delSlices)
			return err
		}); err != nil {
			return fmt.Errorf("list deleted slices: %w", err)
		}
		if err := c.deleteSlices(ctx, slices); err != nil {
			return err
		}
		if len(slices) < c.batch.delSlices || ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// deleteSlices deletes the blocks of queued slices concurrently, then
// removes the queue records of those deleted in one transaction. Slices
// whose deletion failed stay queued for the next round.
func (c *Client) deleteSlices(ctx context.Context, slices []Slice) error {
	var mu sync.Mutex
	var deleted []Slice
	var errs []error
	var g errgroup.Group
	g.SetLimit(c.conf.DeleteWorkers)
	for _, s := range slices {
		g.Go(func() error {
			err := c.conf.DeleteSlice(ctx, s.Id, s.Size)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("delete slice %d: %w", s.Id, err))
			} else {
				deleted = append(deleted, s)
			}
			return nil
		})
	}
	g.Wait()
	if len(deleted) > 0 {
		err := c.st.Update(ctx, func(tx store.Tx) error {
			for _, s := range deleted {
				tx.SetDelSlice(s.Id, s.Size, false)
			}
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("unqueue %d deleted slices: %w", len(deleted), err))
		}
	}
	return errors.Join(errs...)
}

// dropFileData drops the chunks of a deleted file in bounded batches and
// then its queue record.
func (c *Client) dropFileData(ctx context.Context, f store.DelFile) error {
	for {
		var done bool
		err := c.st.Update(ctx, func(tx store.Tx) error {
			var err error
			if done, err = c.dropChunksTx(tx, f.Ino, 0); err != nil {
				return err
			}
			if done {
				tx.SetDelFile(f, false)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("drop chunks of deleted inode %d: %w", f.Ino, err)
		}
		if done || ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// FlushDeletions runs the deletion queues once, now. Tests and `sluice gc`
// use it; mounts run it in the background.
func (c *Client) FlushDeletions(ctx context.Context) error {
	return c.processDeletions(ctx)
}
