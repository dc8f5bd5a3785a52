package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// ErrChunkChanged reports that a chunk's slice list changed between the
// read a compaction started from and its commit; the caller may read the
// chunk again and retry, or skip it. It wraps EAGAIN.
var ErrChunkChanged = fmt.Errorf("chunk changed during compaction: %w", syscall.EAGAIN)

// compactHolderBase starts the inode numbers under which CompactChunk
// keeps replaced slice lists until they expire. They have no attributes
// and no names, only chunk records and a deletion-queue record, so the
// normal deletion of files releases them. They sort after every ordinary
// inode, so expired ordinary deletions never wait behind them, and among
// themselves in the order they were made (by slice id), so they expire
// first-in, first-out.
const compactHolderBase Ino = 0x7000000000000000

// CompactChunk replaces the slice list of chunk idx of file ino with the
// single slice s, which holds the chunk's visible bytes from s.Pos on
// (holes as zeros) and is already stored; an s with Id 0 empties the
// chunk. old is the list the caller read before it copied the data: the
// swap happens in one transaction only while the chunk still has exactly
// that list, else it returns ErrChunkChanged and changes nothing (the
// caller then deletes the blocks of s).
//
// The replaced slices lose their references through the usual path, so a
// slice shared with another file (copy_file_range) survives. With keepOld
// > 0 they are released only after keepOld: a reader that still replays
// the old list (another mount between two opens) keeps finding its
// blocks. A crash at any point leaves either the old list or the new one,
// never a list naming deleted blocks.
func (c *Client) CompactChunk(ctx context.Context, ino Ino, idx uint32, old []Slice, s Slice, keepOld time.Duration) error {
	if err := c.writable(); err != nil {
		return err
	}
	if s.Id != 0 && (s.Off != 0 || s.Len != s.Size || uint64(s.Pos)+uint64(s.Len) > ChunkSize) {
		return fmt.Errorf("compact chunk %d of inode %d: bad slice %+v: %w", idx, ino, s, syscall.EINVAL)
	}
	if len(old) == 0 {
		return ErrChunkChanged
	}
	holder := compactHolderBase + Ino(s.Id)
	if keepOld > 0 && s.Id == 0 {
		id, err := c.NewSliceID(ctx)
		if err != nil {
			return err
		}
		holder = compactHolderBase + Ino(id)
	}
	err := c.st.Update(ctx, func(tx store.Tx) error {
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
		if !slices.Equal(cur, old) {
			return ErrChunkChanged
		}
		var list []Slice
		if s.Id != 0 {
			list = []Slice{s}
		}
		tx.SetChunk(ino, idx, list)
		if keepOld <= 0 {
			return releaseSlices(tx, old)
		}
		var bytes uint64
		for _, o := range old {
			bytes += uint64(o.Len)
		}
		tx.SetChunk(holder, 0, old)
		tx.SetDelFile(store.DelFile{Ino: holder, Length: bytes, Expire: c.conf.Now().Add(keepOld).Unix()}, true)
		return nil
	})
	if err != nil && !errors.Is(err, ErrChunkChanged) {
		return fmt.Errorf("compact chunk %d of inode %d: %w", idx, ino, err)
	}
	return err
}

// ChunkUsage is one chunk of a file with the number of slices in its list.
type ChunkUsage struct {
	Idx    uint32
	Slices int
}

// FileChunks lists the chunks of file ino with their slice counts, for a
// compactor choosing what to rewrite.
func (c *Client) FileChunks(ctx context.Context, ino Ino) ([]ChunkUsage, error) {
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
