package meta

import (
	"cmp"
	"context"
	"slices"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// ReadChunk returns the slice list of chunk idx of file ino.
func (c *Client) ReadChunk(ctx context.Context, ino Ino, idx uint32) ([]Slice, error) {
	var out []Slice
	err := c.st.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = tx.Chunk(ino, idx)
		return err
	})
	return out, err
}

// WriteSliceAttr commits slice s into chunk idx of ino and returns the
// file's version just before (so that a writer caching the file can
// tell whether anybody else changed it since it last looked) and its
// attributes after. It then applies changes, in order, in the
// same transaction: attribute changes a mount held back (see PreviewAttr)
// until the data written before them commits, so that a file unpacked
// with its owner, mode and times costs one transaction, not four. A
// change the engine's attributes no longer allow (another mount changed
// the file meanwhile) is skipped and logged; the slice commits anyway.
//
// unsynced tells that the object store may not have made the slice's
// blocks durable yet (object.Syncer): the transaction records the slice
// for this session, so that if the host crashes before the writer calls
// Synced, whoever cleans up after the session restores blocks the crash
// lost (Config.RestoreSlice) rather than leave a file naming them.
func (c *Client) WriteSliceAttr(ctx context.Context, ino Ino, idx uint32, s Slice, changes []AttrChange, unsynced bool) (Version, *Attr, error) {
	if err := c.writable(); err != nil {
		return Version{}, nil, err
	}
	end := uint64(idx)*ChunkSize + uint64(s.Pos) + uint64(s.Len)
	if uint64(s.Pos)+uint64(s.Len) > ChunkSize {
		return Version{}, nil, syscall.EINVAL
	}
	if end > MaxFileSize {
		return Version{}, nil, syscall.EFBIG
	}
	// Commits of one file through this client take turns: racing, all
	// but one would conflict on the file's node (see turns).
	done, err := c.commits.take(ctx, ino)
	if err != nil {
		return Version{}, nil, err
	}
	defer done()
	var grow int64
	var out *Attr
	var before Version
	err = c.extending(ctx, ino, func() error {
		return c.st.Update(ctx, func(tx store.Tx) error {
			n, err := node(tx, ino)
			if err != nil {
				return err
			}
			if n.Type != store.TypeFile {
				return syscall.EBADF
			}
			before = VersionOf(n)
			grow = 0
			if sentAgain(ctx) {
				cur, err := tx.Chunk(ino, idx)
				if err != nil {
					return err
				}
				if slices.Contains(cur, s) {
					out = n // the first run of this call wrote it
					return nil
				}
			}
			if end > n.Length {
				if n.Flags&flagTruncating != 0 {
					return errTruncating
				}
				if err := c.checkSpaceQuota(tx, align4K(end)-align4K(n.Length)); err != nil {
					return err
				}
				grow = align4K(end) - align4K(n.Length)
				n.Length = end
			}
			tx.AppendSlice(ino, idx, s)
			if unsynced {
				tx.SetUnsynced(c.sid, UnsyncedSlice{Id: s.Id, Size: s.Size, Ino: ino, Idx: idx}, true)
			}
			sec, nsec := c.stamp()
			touchMtime(n, sec, nsec)
			if err := c.applyChanges(tx, n, changes); err != nil {
				return err
			}
			tx.SetNode(n)
			out = n
			return nil
		})
	})
	if err != nil {
		return Version{}, nil, err
	}
	c.usedSpace.Add(grow)
	return before, out, nil
}

// Synced forgets slices this session committed unsynced, once the object
// store made their blocks durable: one transaction for all of them.
func (s *Session) Synced(ctx context.Context, ss []UnsyncedSlice) error {
	c := s.Client
	if len(ss) == 0 {
		return nil
	}
	return c.st.Update(ctx, func(tx store.Tx) error {
		for _, s := range ss {
			tx.SetUnsynced(c.sid, s, false)
		}
		return nil
	})
}

// Segment is a run of a chunk that reads from one slice, or from no slice
// (a hole, Slice nil).
type Segment struct {
	Start, End uint32 // chunk offsets
	Slice      *Slice
}

// SliceOff returns the offset in the stored slice object where the
// segment's bytes begin.
func (g Segment) SliceOff() uint32 { return g.Slice.Off + (g.Start - g.Slice.Pos) }

// Visible replays the slices of list over the chunk range [start, end): later slices
// cover earlier ones; what no slice covers is a hole. Slices with Id 0 are
// holes that cover what came before them. The segments tile [start, end)
// in order.
//
// It walks the list from the newest slice back, keeping the spans no
// slice has covered yet, and stops once nothing is left uncovered, so a
// chunk of many small overwrites costs little more than its newest slices.
func Visible(list []Slice, start, end uint32) []Segment {
	if start >= end {
		return nil
	}
	var segs []Segment
	gaps := []span{{start, end}} // uncovered, in order
	var next []span
	for i := len(list) - 1; i >= 0 && len(gaps) > 0; i-- {
		s := &list[i]
		lo, hi := s.Pos, s.Pos+s.Len
		if s.Len == 0 || hi <= gaps[0].start || lo >= gaps[len(gaps)-1].end {
			continue
		}
		next = next[:0]
		for _, g := range gaps {
			if g.end <= lo || g.start >= hi {
				next = append(next, g)
				continue
			}
			if g.start < lo {
				next = append(next, span{g.start, lo})
			}
			segs = append(segs, Segment{max(g.start, lo), min(g.end, hi), s})
			if g.end > hi {
				next = append(next, span{hi, g.end})
			}
		}
		gaps, next = next, gaps
	}
	for _, g := range gaps {
		segs = append(segs, Segment{Start: g.start, End: g.end})
	}
	slices.SortFunc(segs, func(a, b Segment) int { return cmp.Compare(a.Start, b.Start) })
	return segs
}

// span is a byte range [start, end) of a chunk.
type span struct{ start, end uint32 }
