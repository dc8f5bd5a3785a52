package meta

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

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
	for first := true; ; first = false {
		var slices []Slice
		if err := c.st.View(ctx, func(tx store.Tx) error {
			var err error
			slices, err = tx.DelSlices(c.batch.delSlices)
			return err
		}); err != nil {
			return fmt.Errorf("list deleted slices: %w", err)
		}
		if first {
			var n int64
			for _, s := range slices {
				n += int64(s.Size)
			}
			c.dels.queued.Store(int64(len(slices)))
			c.dels.queuedBytes.Store(n)
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
				c.dels.failed.Add(1)
				errs = append(errs, fmt.Errorf("delete slice %d: %w", s.Id, err))
			} else {
				c.dels.deleted.Add(1)
				c.dels.bytes.Add(int64(s.Size))
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

// deletionCounters count what a client deleted, for DeletionStats.
type deletionCounters struct {
	deleted, bytes, failed atomic.Int64
	queued, queuedBytes    atomic.Int64
}

// DeletionStats is what a client's deletion of slices did since it
// started, and what it last saw queued.
type DeletionStats struct {
	Deleted, DeletedBytes int64 // slices whose blocks it deleted, and their bytes
	Failed                int64 // deletions that failed (and stayed queued)
	// Queued and QueuedBytes are the slices queued at the start of its
	// last background round, at most one batch of them (100 or 200).
	Queued, QueuedBytes int64
}

// DeletionStats returns what this client deleted, for metrics.
func (c *Client) DeletionStats() DeletionStats {
	return DeletionStats{Deleted: c.dels.deleted.Load(), DeletedBytes: c.dels.bytes.Load(), Failed: c.dels.failed.Load(),
		Queued: c.dels.queued.Load(), QueuedBytes: c.dels.queuedBytes.Load()}
}

// FlushDeletions runs the deletion queues once, now. Tests and `sluice gc`
// use it; mounts run it in the background.
func (c *Client) FlushDeletions(ctx context.Context) error {
	return c.processDeletions(ctx)
}
