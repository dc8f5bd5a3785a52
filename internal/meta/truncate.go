package meta

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Truncation and the dropping of chunks.
//
// Shrinking a file past many chunks cannot drop them all in the
// transaction that changes its length: an engine may bound the operations
// of a transaction (store.Limits; etcd refuses more than its --max-txn-ops,
// 128 by default), and on any engine one huge transaction holds locks or
// conflicts for long. So the transaction that changes the length drops
// what fits in one bounded batch (Client.batch, see batchesFor)
// and, when chunks are left, marks the node (flagTruncating) and records a
// store.Truncation. Later transactions, each within the same bound, drop
// the rest: first in the truncating call itself (Config.TruncateSyncBatches),
// then in every client's background deletion loop.
//
// Reads never see the leftover chunks, since the length bounds them. An
// operation that would extend a marked file (a write, truncate up,
// fallocate, copy_file_range into it) first finishes dropping them
// (errTruncating makes it do so and retry), so a later extension reads
// zeros, not old data. Operations within the length go ahead: they cannot
// touch a chunk at or past the first leftover one, whose start is at or
// past the length. The chunks left over are therefore always those from
// ceil(length / ChunkSize) on.

// flagTruncating marks a file with chunks left past its length by an
// unfinished truncation.
const flagTruncating = 0x20

// errTruncating reports that an operation would extend a file whose
// truncation is unfinished; extending finishes it and retries.
var errTruncating = errors.New("file has chunks left over from a truncation")

// truncateTx changes the length of file n from oldLen to newLen. Shrinking
// covers the cut part of the last chunk with a hole, so that growing the
// file again reads zeros there, and drops the chunks past the end: all of
// them when they fit one batch, else the first batch, reporting pending
// (see the top of this file).
func (c *Client) truncateTx(tx store.Tx, n *Attr, oldLen, newLen uint64) (pending bool, err error) {
	n.Length = newLen
	if newLen >= oldLen {
		return false, nil
	}
	first := uint32(newLen / ChunkSize)
	if off := uint32(newLen % ChunkSize); off != 0 {
		end := uint64(ChunkSize)
		if rest := oldLen - uint64(first)*ChunkSize; rest < end {
			end = rest
		}
		tx.AppendSlice(n.Ino, first, Slice{Pos: off, Len: uint32(end) - off})
		first++
	}
	done, err := c.dropChunksTx(tx, n.Ino, first)
	if err != nil {
		return false, err
	}
	if done {
		if n.Flags&flagTruncating != 0 {
			n.Flags &^= flagTruncating
			tx.SetTruncation(store.Truncation{Ino: n.Ino}, false)
		}
		return false, nil
	}
	n.Flags |= flagTruncating
	tx.SetTruncation(store.Truncation{Ino: n.Ino, From: first}, true)
	return true, nil
}

// dropChunksTx drops chunks of ino at index from and above, releasing
// their slices, as far as one transaction's budget allows. A chunk with
// more slices than fit is cut down instead, and finished by the next
// call. It reports whether no chunk at or above from is left.
func (c *Client) dropChunksTx(tx store.Tx, ino Ino, from uint32) (done bool, err error) {
	budget, scan := c.batch.dropBudget, c.batch.dropScan
	idxs, err := tx.ChunkIndexes(ino, from, scan)
	if err != nil {
		return false, err
	}
	ops := len(idxs) // every listed chunk record was read
	for i, idx := range idxs {
		ss, err := tx.Chunk(ino, idx)
		if err != nil {
			return false, err
		}
		cost := 1 + 2*countStored(ss)
		if ops+cost <= budget {
			tx.SetChunk(ino, idx, nil)
			if err := releaseSlices(tx, ss); err != nil {
				return false, err
			}
			ops += cost
			continue
		}
		if i == 0 {
			keep, drop := splitStored(ss, (budget-ops-1)/2)
			tx.SetChunk(ino, idx, keep)
			if err := releaseSlices(tx, drop); err != nil {
				return false, err
			}
		}
		return false, nil
	}
	return len(idxs) < scan, nil
}

// countStored counts the slices of ss that name stored data (not holes).
func countStored(ss []Slice) int {
	n := 0
	for _, s := range ss {
		if s.Id != 0 {
			n++
		}
	}
	return n
}

// splitStored splits ss into the first n slices naming stored data (drop)
// and the remaining ones (keep); holes in the dropped part go.
func splitStored(ss []Slice, n int) (keep, drop []Slice) {
	for i, s := range ss {
		if len(drop) == n {
			return ss[i:], drop
		}
		if s.Id != 0 {
			drop = append(drop, s)
		}
	}
	return nil, drop
}

// releaseSlices drops one reference to each slice; a slice with no
// references left is queued for block deletion.
func releaseSlices(tx store.Tx, ss []Slice) error {
	for _, s := range ss {
		if s.Id == 0 {
			continue
		}
		if _, err := releaseSlice(tx, s); err != nil {
			return err
		}
	}
	return nil
}

// releaseSlice drops one reference to stored slice s and reports whether
// it was the last, in which case s is queued for block deletion.
func releaseSlice(tx store.Tx, s Slice) (bool, error) {
	extra, err := tx.SliceRef(s.Id, s.Size)
	if err != nil {
		return false, err
	}
	if extra > 0 {
		tx.SetSliceRef(s.Id, s.Size, extra-1)
		return false, nil
	}
	tx.SetDelSlice(s.Id, s.Size, true)
	return true, nil
}

// finishTruncate drops the chunks an unfinished truncation of ino left,
// in bounded transactions, at most maxBatches of them (0: until done).
func (c *Client) finishTruncate(ctx context.Context, ino Ino, maxBatches int) error {
	for batch := 0; maxBatches <= 0 || batch < maxBatches; batch++ {
		var done bool
		err := c.st.Update(ctx, func(tx store.Tx) error {
			done = true
			n, err := tx.Node(ino)
			if errors.Is(err, store.ErrNotFound) {
				tx.SetTruncation(store.Truncation{Ino: ino}, false)
				return nil // deleted: its data goes with the file
			}
			if err != nil {
				return err
			}
			if n.Flags&flagTruncating == 0 {
				tx.SetTruncation(store.Truncation{Ino: ino}, false)
				return nil
			}
			from := uint32((n.Length + ChunkSize - 1) / ChunkSize)
			if done, err = c.dropChunksTx(tx, ino, from); err != nil || !done {
				return err
			}
			n.Flags &^= flagTruncating
			tx.SetNode(n)
			tx.SetTruncation(store.Truncation{Ino: ino}, false)
			return nil
		})
		if err != nil {
			return fmt.Errorf("drop chunks of inode %d past its length: %w", ino, err)
		}
		if done {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// extending runs op, an operation that may extend file ino. When op
// reports errTruncating, the file's unfinished truncation is finished and
// op runs again.
func (c *Client) extending(ctx context.Context, ino Ino, op func() error) error {
	for {
		err := op()
		if !errors.Is(err, errTruncating) {
			return err
		}
		// Finishing the truncation is not the effect of the call op runs
		// for (see store.WithoutCall).
		if err := c.finishTruncate(store.WithoutCall(ctx), ino, 0); err != nil {
			return err
		}
	}
}

// processTruncations finishes the truncations other calls left unfinished
// (crashed clients, truncations past truncateSyncBatches).
func (c *Client) processTruncations(ctx context.Context) error {
	var ts []store.Truncation
	if err := c.st.View(ctx, func(tx store.Tx) error {
		var err error
		ts, err = tx.Truncations(100)
		return err
	}); err != nil {
		return fmt.Errorf("list unfinished truncations: %w", err)
	}
	for _, t := range ts {
		if err := c.finishTruncate(ctx, t.Ino, 0); err != nil {
			return err
		}
	}
	return nil
}
