package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// ErrChunkChanged reports that a chunk's slice list changed between the
// read a compaction started from and its commit, other than by slices
// appended after it; the caller may read the chunk again and retry, or
// skip it. It wraps EAGAIN.
var ErrChunkChanged = fmt.Errorf("chunk changed during compaction: %w", syscall.EAGAIN)

// CompactChunk replaces the entries old of chunk idx of file ino with
// repl, in one transaction, and returns the slices whose last reference
// that dropped (they are queued for deletion; see DeleteReleased).
//
// old is the slice list the caller read before it copied any data. The
// swap happens only while the chunk's list still starts with exactly old:
// slices appended after it meanwhile (a writer committing) stay, on top of
// repl, so a busy writer never starves a compaction; any other change
// (a truncation, another compaction) returns ErrChunkChanged and changes
// nothing, and the caller then deletes the blocks it stored for repl.
//
// repl must read the same bytes as old. It may keep entries of old
// unchanged, and name new slices, already stored, whose entries may share
// one id at different offsets (each entry is a reference; CompactChunk
// records the extra ones). Entries of old's slices that repl does not keep
// lose their references through the usual path, so a slice another file
// still names (copy_file_range) survives. A crash at any point leaves
// either the old list or the new one, never a list naming deleted blocks.
func (s *Session) CompactChunk(ctx context.Context, ino Ino, idx uint32, old, repl []Slice) ([]Slice, error) {
	c := s.Client
	if err := c.writable(); err != nil {
		return nil, err
	}
	if len(old) == 0 {
		return nil, ErrChunkChanged
	}
	fresh, err := checkReplacement(old, repl)
	if err != nil {
		return nil, fmt.Errorf("compact chunk %d of inode %d: %w", idx, ino, err)
	}
	var released []Slice
	err = c.st.Update(ctx, func(tx store.Tx) error {
		released = released[:0]
		n, err := node(tx, ino)
		if err != nil {
			return err
		}
		if n.Type != store.TypeFile {
			return syscall.EINVAL
		}
		cur, err := tx.Chunk(ino, idx)
		if err != nil {
			return err
		}
		if len(cur) < len(old) || !slices.Equal(cur[:len(old)], old) {
			return ErrChunkChanged
		}
		list := make([]Slice, 0, len(repl)+len(cur)-len(old))
		list = append(append(list, repl...), cur[len(old):]...)
		tx.SetChunk(ino, idx, list)
		for id, f := range fresh {
			if f.entries > 1 {
				tx.SetSliceRef(id, f.size, int64(f.entries-1))
			}
		}
		released, err = releaseDropped(tx, old, repl, released)
		return err
	})
	if err != nil && !errors.Is(err, ErrChunkChanged) {
		return nil, fmt.Errorf("compact chunk %d of inode %d: %w", idx, ino, err)
	}
	return released, err
}

// freshSlice counts the entries of a slice new to a replacement list.
type freshSlice struct {
	size    uint32
	entries int
}

// checkReplacement validates repl against old: every entry lies within a
// chunk, an entry of a slice old names is one of old's entries (kept as
// it was, and no more often), and the entries of a new slice agree on its
// size and lie within it. It returns the new slices.
func checkReplacement(old, repl []Slice) (map[uint64]freshSlice, error) {
	kept := map[Slice]int{}
	oldIDs := map[uint64]bool{}
	for _, s := range old {
		kept[s]++
		oldIDs[s.Id] = true
	}
	fresh := map[uint64]freshSlice{}
	for _, s := range repl {
		if uint64(s.Pos)+uint64(s.Len) > ChunkSize || s.Len == 0 && s.Id != 0 {
			return nil, fmt.Errorf("bad slice %+v: %w", s, syscall.EINVAL)
		}
		if oldIDs[s.Id] || s.Id == 0 {
			if kept[s] == 0 {
				return nil, fmt.Errorf("slice %+v is not one of the replaced list's: %w", s, syscall.EINVAL)
			}
			kept[s]--
			continue
		}
		f := fresh[s.Id]
		if f.entries > 0 && f.size != s.Size || uint64(s.Off)+uint64(s.Len) > uint64(s.Size) {
			return nil, fmt.Errorf("bad slice %+v: %w", s, syscall.EINVAL)
		}
		f.size = s.Size
		f.entries++
		fresh[s.Id] = f
	}
	return fresh, nil
}

// releaseDropped drops one reference for each entry of old that repl does
// not keep, and appends to released the slices that lost their last one.
func releaseDropped(tx store.Tx, old, repl []Slice, released []Slice) ([]Slice, error) {
	keep := map[Slice]int{}
	for _, s := range repl {
		keep[s]++
	}
	for _, s := range old {
		if keep[s] > 0 {
			keep[s]--
			continue
		}
		if s.Id == 0 {
			continue
		}
		last, err := releaseSlice(tx, s)
		if err != nil {
			return nil, err
		}
		if last {
			released = append(released, s)
		}
	}
	return released, nil
}

// DeleteReleased deletes the blocks of slices that CompactChunk released,
// now, instead of at the background loop's next round, and takes them off
// the deletion queue. A failure leaves them queued for that loop; deleting
// a slice twice (the loop of another client may get there first) is
// harmless. Without Config.DeleteSlice it does nothing.
func (s *Session) DeleteReleased(ctx context.Context, released []Slice) error {
	c := s.Client
	if c.conf.DeleteSlice == nil || len(released) == 0 {
		return nil
	}
	return c.deleteSlices(ctx, released)
}

// ChunkUsage is one chunk of a file with the number of slices in its list.
type ChunkUsage struct {
	Idx    uint32
	Slices int
}

// FileChunks lists the chunks of file ino with their slice counts, for a
// compactor choosing what to rewrite.
func (s *Session) FileChunks(ctx context.Context, ino Ino) ([]ChunkUsage, error) {
	c := s.Client
	var out []ChunkUsage
	for from := uint32(0); ; {
		var page []ChunkUsage
		err := c.st.View(ctx, func(tx store.Tx) error {
			page = page[:0]
			idxs, err := tx.ChunkIndexes(ino, from, scanPage)
			if err != nil {
				return err
			}
			for _, idx := range idxs {
				ss, err := tx.Chunk(ino, idx)
				if err != nil {
					return err
				}
				page = append(page, ChunkUsage{Idx: idx, Slices: len(ss)})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < scanPage {
			return out, nil
		}
		from = page[len(page)-1].Idx + 1
	}
}
