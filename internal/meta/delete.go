package meta

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// processDeletions works through the deletion queues: the chunks of
// deleted files are dropped (queueing their slices), unfinished
// truncations are finished, and queued slices have their blocks deleted
// through Config.DeleteSlice, Config.DeleteWorkers at a time, before they
// leave the queue. A crash at any point leaves work queued, never data
// named by metadata but deleted from storage.
//
// Deleted files are dropped one after another, batch after batch,
// until none is due or, with a budget above 0, until the budget has
// passed: the background round stays within its tick, and a removal of a
// large tree is reclaimed at the pace of the engine's round trips rather
// than one batch a round.
func (c *Client) processDeletions(ctx context.Context, budget time.Duration) error {
	c.delMu.Lock()
	defer c.delMu.Unlock()
	start := time.Now()
	for {
		var files []store.DelFile
		if err := c.st.View(ctx, func(tx store.Tx) error {
			var err error
			files, err = tx.DelFiles(delFilesBatch)
			return err
		}); err != nil {
			return fmt.Errorf("list deleted files: %w", err)
		}
		now := c.conf.Now().Unix() // queued with the same clock, see destroy
		due := 0
		for _, f := range files {
			if f.Expire > now {
				continue
			}
			due++
			if err := c.dropFileData(ctx, f); err != nil {
				return err
			}
		}
		// Files not due yet stay first in the queue: a batch of them
		// alone ends the round.
		if len(files) < delFilesBatch || due == 0 || ctx.Err() != nil ||
			(budget > 0 && time.Since(start) >= budget) {
			break
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

// delFilesBatch is how many queued deleted files one listing takes. They
// are dropped one at a time: each drop is a few round trips (the chunk
// list, the slices' references, the commit), and four at once emptied a
// removed tree's blocks sooner but slowed the removal itself by two
// thirds on Redis (bench/drain.sh).
const delFilesBatch = 100

// deletionBudget bounds the time a mount's background round spends
// dropping deleted files, so that the round, which also beats the
// session's heartbeat, ends about when its one-second tick comes again.
// A round after callers changed the volume (Client.changes) gets oneBatch
// instead: dropping competes with them for the engine and the CPU (an
// `rm -rf` of a tree took twice as long beside a full budget on SQLite),
// so the backlog a removal leaves is worked off once the mount is quiet.
const (
	deletionBudget = 300 * time.Millisecond
	oneBatch       = time.Nanosecond // a budget that ends a round after its first batch
)

// deletionRound returns the budget of a background deletion round:
// oneBatch when callers changed the volume since the round that last saw
// the count of changes in *seen, deletionBudget when they did not.
func (c *Client) deletionRound(seen *uint64) time.Duration {
	if n := c.changes.Load(); n != *seen {
		*seen = n
		return oneBatch
	}
	return deletionBudget
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
func (s *Session) DeletionStats() DeletionStats {
	c := s.Client
	return DeletionStats{Deleted: c.dels.deleted.Load(), DeletedBytes: c.dels.bytes.Load(), Failed: c.dels.failed.Load(),
		Queued: c.dels.queued.Load(), QueuedBytes: c.dels.queuedBytes.Load()}
}

// FlushDeletions runs the deletion queues until every deleted file that
// is due has been dropped, now. Tests and `sluice gc` use it; mounts run
// the queues in the background, within deletionBudget a round.
func (s *Session) FlushDeletions(ctx context.Context) error {
	c := s.Client
	return c.processDeletions(ctx, 0)
}
