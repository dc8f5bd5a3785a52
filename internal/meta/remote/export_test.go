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

// MknodAs is Mknod (Create when create is set) of a node of type typ,
// sent with call number seq, flagged as sent again when again is set.
func (c *Client) MknodAs(ctx context.Context, seq uint64, again, create bool, parent meta.Ino, name []byte, typ uint8) (*meta.Attr, error) {
	var a *meta.Attr
	method := uint64(mMknod)
	if create {
		method = mCreate
	}
	err := c.callAs(ctx, seq, again, method, nodeArgs(parent, name, meta.NewNode{Type: typ, Mode: 0o755}),
		func(r *wire.Reader) { a = getAttr(r); getDirs(r) }, nil)
	return a, err
}

// UnlinkAs is Unlink sent with call number seq, flagged as sent again
// when again is set.
func (c *Client) UnlinkAs(ctx context.Context, seq uint64, again bool, parent meta.Ino, name []byte) error {
	return c.callAs(ctx, seq, again, mUnlink, nameArgs(parent, name), func(r *wire.Reader) { getDirs(r) }, nil)
}

// RenameAs is Rename sent with call number seq, flagged as sent again
// when again is set.
func (c *Client) RenameAs(ctx context.Context, seq uint64, again bool, sp meta.Ino, sn []byte, dp meta.Ino, dn []byte) error {
	return c.callAs(ctx, seq, again, mRename, func(b *wire.Buf) {
		b.Uvarint(uint64(sp))
		b.Bytes(sn)
		b.Uvarint(uint64(dp))
		b.Bytes(dn)
		b.Uvarint(0)
	}, func(r *wire.Reader) { getDirs(r) }, nil)
}

// SetXattrAs is SetXattr sent with call number seq, flagged as sent
// again when again is set.
func (c *Client) SetXattrAs(ctx context.Context, seq uint64, again bool, ino meta.Ino, name string, value []byte, flags uint32) error {
	return c.callAs(ctx, seq, again, mSetXattr, func(b *wire.Buf) {
		b.Uvarint(uint64(ino))
		b.Bytes([]byte(name))
		b.Bytes(value)
		b.Uvarint(uint64(flags))
	}, nil, nil)
}

// CopyFileRangeAs is CopyFileRange sent with call number seq, flagged as
// sent again when again is set.
func (c *Client) CopyFileRangeAs(ctx context.Context, seq uint64, again bool, src meta.Ino, srcOff uint64, dst meta.Ino, dstOff, length uint64) (uint64, error) {
	var n uint64
	err := c.callAs(ctx, seq, again, mCopyFileRange, func(b *wire.Buf) {
		b.Uvarint(uint64(src))
		b.Uvarint(srcOff)
		b.Uvarint(uint64(dst))
		b.Uvarint(dstOff)
		b.Uvarint(length)
	}, func(r *wire.Reader) { n = r.Uvarint(); getAttr(r) }, nil)
	return n, err
}
