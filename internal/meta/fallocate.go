package meta

import (
	"context"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Fallocate modes, as in fallocate(2).
const (
	FallocKeepSize  = 0x01
	FallocPunchHole = 0x02
	FallocZeroRange = 0x10
)

// Fallocate applies fallocate(2) to ino. The default mode grows the file to
// cover the range; FallocKeepSize alone does nothing more (Sluice reserves
// no space ahead in object storage); FallocPunchHole (with KeepSize) and
// FallocZeroRange cover the range with a hole, which reads as zeros.
// Other modes fail with EOPNOTSUPP.
func (c *Client) Fallocate(ctx context.Context, ino Ino, mode uint32, off, length uint64) error {
	if err := c.writable(); err != nil {
		return err
	}
	switch mode {
	case 0, FallocKeepSize, FallocPunchHole | FallocKeepSize, FallocZeroRange, FallocZeroRange | FallocKeepSize:
	case FallocPunchHole:
		return syscall.EINVAL // punching a hole must keep the size
	default:
		return syscall.EOPNOTSUPP
	}
	if length == 0 {
		return syscall.EINVAL
	}
	if off+length < off || off+length > MaxFileSize {
		return syscall.EFBIG
	}
	var grow int64
	err := c.extending(ctx, ino, func() error {
		return c.st.Update(ctx, func(tx store.Tx) error {
			grow = 0
			n, err := node(tx, ino)
			if err != nil {
				return err
			}
			switch n.Type {
			case store.TypeFile:
			case store.TypeDir:
				return syscall.EISDIR
			default:
				return syscall.ENODEV
			}
			if n.Flags&FlagImmutable != 0 || n.Flags&FlagAppend != 0 && mode&(FallocPunchHole|FallocZeroRange) != 0 {
				return syscall.EPERM
			}
			end := off + length
			if mode&FallocKeepSize == 0 && end > n.Length && n.Flags&flagTruncating != 0 {
				return errTruncating
			}
			if mode&(FallocPunchHole|FallocZeroRange) != 0 {
				holeEnd := end
				if mode&FallocKeepSize != 0 {
					holeEnd = min(end, n.Length)
				}
				if off < holeEnd {
					appendHoles(tx, ino, off, holeEnd)
				}
			}
			sec, nsec := c.stamp()
			if mode&FallocKeepSize == 0 && end > n.Length {
				grow = align4K(end) - align4K(n.Length)
				if err := c.checkSpaceQuota(tx, grow); err != nil {
					return err
				}
				n.Length = end
				touchMtime(n, sec, nsec)
			}
			if mode&(FallocPunchHole|FallocZeroRange) != 0 {
				touchMtime(n, sec, nsec)
			}
			tx.SetNode(n)
			return nil
		})
	})
	if err == nil {
		c.usedSpace.Add(grow)
	}
	return err
}

// appendHoles covers the file range [off, end) with hole slices, one per
// chunk it touches.
func appendHoles(tx store.Tx, ino Ino, off, end uint64) {
	for off < end {
		idx := uint32(off / ChunkSize)
		pos := uint32(off % ChunkSize)
		n := min(end-off, ChunkSize-uint64(pos))
		tx.AppendSlice(ino, idx, Slice{Pos: pos, Len: uint32(n)})
		off += n
	}
}

// CopyFileRange copies length bytes of file src at srcOff to file dst at
// dstOff without copying data: dst's chunks get slices that name the
// same stored blocks, whose reference counts go up. It returns the bytes
// copied, fewer when src ends first, and dst's attributes after the copy
// (a copy past dst's end grows it), which spares the caller reading them
// again.
func (c *Client) CopyFileRange(ctx context.Context, src Ino, srcOff uint64, dst Ino, dstOff uint64, length uint64) (uint64, *Attr, error) {
	sec, nsec := c.stamp()
	n, _, a, err := c.copyRange(ctx, HeldCopy{Src: src, SrcOff: srcOff, Dst: dst, DstOff: dstOff, Len: length, Mtime: sec, Mtimensec: nsec}, nil)
	return n, a, err
}

// HeldCopy is a copy_file_range(2) that the mount answered at once and
// holds back, as it holds back buffered writes, to commit later with the
// attribute changes made after it (CommitCopy): cp -a copies a file and
// then sets its owner, mode and times, and both then cost one
// transaction. Mtime is when the copy was asked for, which the mount has
// shown as the file's modification time since.
type HeldCopy struct {
	Src       Ino
	SrcOff    uint64
	Dst       Ino
	DstOff    uint64
	Len       uint64
	Mtime     int64
	Mtimensec uint32
}

// CommitCopy commits cp, then changes, held back after it on cp.Dst, in
// one transaction (see HeldCopy and ApplyAttrChanges). It returns dst's
// version before the transaction, for the caller to tell its own change
// from another mount's, and dst's attributes after it. A copy that can
// no longer be made (src shrank meanwhile) copies what there is.
func (c *Client) CommitCopy(ctx context.Context, cp HeldCopy, changes []AttrChange) (Version, *Attr, error) {
	_, before, a, err := c.copyRange(ctx, cp, changes)
	return before, a, err
}

// copyRange is CopyFileRange and CommitCopy: it copies cp, stamps dst
// with cp's time, applies changes to dst, and returns the bytes copied,
// dst's version before and its attributes after.
func (c *Client) copyRange(ctx context.Context, cp HeldCopy, changes []AttrChange) (uint64, Version, *Attr, error) {
	src, srcOff, dst, dstOff, length := cp.Src, cp.SrcOff, cp.Dst, cp.DstOff, cp.Len
	if err := c.writable(); err != nil {
		return 0, Version{}, nil, err
	}
	if err := CheckCopyRange(src, srcOff, dst, dstOff, length); err != nil {
		return 0, Version{}, nil, err
	}
	var copied uint64
	var grow int64
	var before Version
	var out *Attr
	err := c.extending(ctx, dst, func() error {
		return c.st.Update(ctx, func(tx store.Tx) error {
			copied, grow, out = 0, 0, nil
			sn, err := node(tx, src)
			if err != nil {
				return err
			}
			dn := sn
			if dst != src {
				if dn, err = node(tx, dst); err != nil {
					return err
				}
			}
			for _, n := range []*Attr{sn, dn} {
				switch n.Type {
				case store.TypeFile:
				case store.TypeDir:
					return syscall.EISDIR
				default:
					return syscall.EINVAL
				}
			}
			if dn.Flags&(FlagImmutable|FlagAppend) != 0 {
				return syscall.EPERM
			}
			out, before = dn, VersionOf(dn)
			if srcOff < sn.Length {
				length := min(length, sn.Length-srcOff)
				if dstOff+length > dn.Length && dn.Flags&flagTruncating != 0 {
					return errTruncating
				}
				for done := uint64(0); done < length; {
					s, d := srcOff+done, dstOff+done
					n := min(length-done, ChunkSize-s%ChunkSize, ChunkSize-d%ChunkSize)
					if err := shareRange(tx, src, s, dst, d, uint32(n)); err != nil {
						return err
					}
					done += n
				}
				copied = length
				if end := dstOff + length; end > dn.Length {
					grow = align4K(end) - align4K(dn.Length)
					if err := c.checkSpaceQuota(tx, grow); err != nil {
						return err
					}
					dn.Length = end
				}
				touchMtime(dn, cp.Mtime, cp.Mtimensec)
			} else if len(changes) == 0 {
				return nil // nothing to copy, nothing to change
			}
			if err := c.applyChanges(tx, dn, changes); err != nil {
				return err
			}
			tx.SetNode(dn)
			return nil
		})
	})
	if err != nil {
		return 0, Version{}, nil, err
	}
	c.usedSpace.Add(grow)
	return copied, before, out, nil
}

// CheckCopyRange refuses a copy_file_range(2) that no state of the files
// allows: one within a file onto an overlapping range, or one past the
// largest file size.
func CheckCopyRange(src Ino, srcOff uint64, dst Ino, dstOff uint64, length uint64) error {
	if src == dst && srcOff < dstOff+length && dstOff < srcOff+length {
		return syscall.EINVAL
	}
	if dstOff+length < dstOff || dstOff+length > MaxFileSize {
		return syscall.EFBIG
	}
	return nil
}

// shareRange makes n bytes of dst at d (within one chunk) name the slices
// that hold n bytes of src at s (within one chunk).
func shareRange(tx store.Tx, src Ino, s uint64, dst Ino, d uint64, n uint32) error {
	slices, err := tx.Chunk(src, uint32(s/ChunkSize))
	if err != nil {
		return err
	}
	start := uint32(s % ChunkSize)
	shift := int64(d%ChunkSize) - int64(start)
	didx := uint32(d / ChunkSize)
	for _, g := range Visible(slices, start, start+n) {
		pos := uint32(int64(g.Start) + shift)
		if g.Slice == nil || g.Slice.Id == 0 {
			tx.AppendSlice(dst, didx, Slice{Pos: pos, Len: g.End - g.Start})
			continue
		}
		tx.AddSliceRef(g.Slice.Id, g.Slice.Size, 1)
		tx.AppendSlice(dst, didx, Slice{Pos: pos, Id: g.Slice.Id, Size: g.Slice.Size, Off: g.SliceOff(), Len: g.End - g.Start})
	}
	return nil
}
