package meta

import (
	"context"
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

// Write commits slice s, whose blocks are already stored, to chunk idx of
// file ino, extending the file when the slice ends past its length.
func (c *Client) Write(ctx context.Context, ino Ino, idx uint32, s Slice) (*Attr, error) {
	if err := c.writable(); err != nil {
		return nil, err
	}
	end := uint64(idx)*ChunkSize + uint64(s.Pos) + uint64(s.Len)
	var grow int64
	var out *Attr
	err := c.st.Update(ctx, func(tx store.Tx) error {
		n, err := node(tx, ino)
		if err != nil {
			return err
		}
		if n.Type != store.TypeFile {
			return syscall.EBADF
		}
		grow = 0
		if end > n.Length {
			if err := c.checkSpaceQuota(tx, align4K(end)-align4K(n.Length)); err != nil {
				return err
			}
			grow = align4K(end) - align4K(n.Length)
			n.Length = end
		}
		tx.AppendSlice(ino, idx, s)
		sec, nsec := stamp()
		touchMtime(n, sec, nsec)
		tx.SetNode(n)
		out = n
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.usedSpace.Add(grow)
	return out, nil
}
