package remote

import (
	"context"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/wire"
)

// CreateAs is Create sent with call number seq, as a retry would send
// it again.
func (c *Client) CreateAs(ctx context.Context, seq uint64, parent meta.Ino, name []byte) (*meta.Attr, error) {
	return callAs(ctx, c, seq, false, wire.Create, wire.T3[meta.Ino, []byte, meta.NewNode]{A: parent, B: name, C: meta.NewNode{Type: store.TypeFile, Mode: 0o644}}, nil)
}

// WriteSliceAs is WriteSliceAttr of slice s at the start of ino, sent
// with call number seq, flagged as sent again when again is set.
func (c *Client) WriteSliceAs(ctx context.Context, seq uint64, again bool, ino meta.Ino, s meta.Slice) error {
	_, err := callAs(ctx, c, seq, again, wire.WriteSliceAttr, wire.T5[meta.Ino, uint32, meta.Slice, []meta.AttrChange, bool]{A: ino, C: s}, nil)
	return err
}

// Seq returns the number of the client's last call.
func (c *Client) Seq() uint64 { return c.seq.Load() }

// MknodAs is Mknod (Create when create is set) of a node of type typ,
// sent with call number seq, flagged as sent again when again is set.
func (c *Client) MknodAs(ctx context.Context, seq uint64, again, create bool, parent meta.Ino, name []byte, typ uint8) (*meta.Attr, error) {
	op := wire.Mknod
	if create {
		op = wire.Create
	}
	return callAs(ctx, c, seq, again, op, wire.T3[meta.Ino, []byte, meta.NewNode]{A: parent, B: name, C: meta.NewNode{Type: typ, Mode: 0o755}}, nil)
}

// UnlinkAs is Unlink sent with call number seq, flagged as sent again
// when again is set.
func (c *Client) UnlinkAs(ctx context.Context, seq uint64, again bool, parent meta.Ino, name []byte) error {
	_, err := callAs(ctx, c, seq, again, wire.Unlink, wire.T2[meta.Ino, []byte]{A: parent, B: name}, nil)
	return err
}

// RenameAs is Rename sent with call number seq, flagged as sent again
// when again is set.
func (c *Client) RenameAs(ctx context.Context, seq uint64, again bool, sp meta.Ino, sn []byte, dp meta.Ino, dn []byte) error {
	_, err := callAs(ctx, c, seq, again, wire.Rename, wire.T5[meta.Ino, []byte, meta.Ino, []byte, uint32]{A: sp, B: sn, C: dp, D: dn}, nil)
	return err
}

// SetXattrAs is SetXattr sent with call number seq, flagged as sent
// again when again is set.
func (c *Client) SetXattrAs(ctx context.Context, seq uint64, again bool, ino meta.Ino, name string, value []byte, flags uint32) error {
	_, err := callAs(ctx, c, seq, again, wire.SetXattr, wire.T4[meta.Ino, string, []byte, uint32]{A: ino, B: name, C: value, D: flags}, nil)
	return err
}

// CopyFileRangeAs is CopyFileRange sent with call number seq, flagged as
// sent again when again is set.
func (c *Client) CopyFileRangeAs(ctx context.Context, seq uint64, again bool, src meta.Ino, srcOff uint64, dst meta.Ino, dstOff, length uint64) (uint64, error) {
	r, err := callAs(ctx, c, seq, again, wire.CopyFileRange, wire.T5[meta.Ino, uint64, meta.Ino, uint64, uint64]{A: src, B: srcOff, C: dst, D: dstOff, E: length}, nil)
	return r.A, err
}
