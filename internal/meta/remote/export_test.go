package remote

import (
	"context"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/metaserver/wire"
)

// CreateAs is Create sent with call number seq, as a retry would send
// it again.
func (c *Client) CreateAs(ctx context.Context, seq uint64, parent meta.Ino, name []byte) (*meta.Attr, error) {
	var a *meta.Attr
	err := c.callAs(ctx, seq, false, mCreate, nodeArgs(parent, name, meta.NewNode{Type: store.TypeFile, Mode: 0o644}),
		func(r *wire.Reader) { a = getAttr(r); getDirs(r) }, nil)
	return a, err
}

// WriteSliceAs is WriteSliceAttr of slice s at the start of ino, sent
// with call number seq, flagged as sent again when again is set.
func (c *Client) WriteSliceAs(ctx context.Context, seq uint64, again bool, ino meta.Ino, s meta.Slice) error {
	return c.callAs(ctx, seq, again, mWriteSliceAttr, func(b *wire.Buf) {
		b.Uvarint(uint64(ino))
		b.Uvarint(0)
		putSlice(b, s)
		putChanges(b, nil)
		putBool(b, false)
	}, nil, nil)
}

// Seq returns the number of the client's last call.
func (c *Client) Seq() uint64 { return c.seq.Load() }
