package meta

import (
	"context"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// SetAttr masks: which fields of a SetAttr request apply.
const (
	SetMode = 1 << iota
	SetUid
	SetGid
	SetSize
	SetAtime
	SetMtime
	SetAtimeNow
	SetMtimeNow
	SetCtime
	SetFlags
	// SetViaHandle marks a size change through an open file handle, which
	// was checked for writing at open.
	SetViaHandle
)

// SetAttr changes the attributes of ino selected by mask to those in in.
func (c *Client) SetAttr(ctx context.Context, ino Ino, mask uint32, in *Attr) (*Attr, error) {
	if err := c.writable(); err != nil {
		return nil, err
	}
	cred := CredOf(ctx)
	var out *Attr
	var r removal
	var grow int64
	err := c.st.Update(ctx, func(tx store.Tx) error {
		r, grow = removal{}, 0
		n, err := node(tx, ino)
		if err != nil {
			return err
		}
		oldLen := n.Length
		if err := applyAttr(tx, cred, n, mask, in); err != nil {
			return err
		}
		if mask&SetSize != 0 && in.Length > oldLen {
			if err := c.checkSpaceQuota(tx, align4K(in.Length)-align4K(oldLen)); err != nil {
				return err
			}
		}
		if mask&SetSize != 0 && in.Length != oldLen {
			if err := truncateTx(tx, n, oldLen, in.Length, &r); err != nil {
				return err
			}
			grow = align4K(in.Length) - align4K(oldLen)
		}
		tx.SetNode(n)
		out = n
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.usedSpace.Add(grow)
	c.applyRemoval(&r)
	return out, nil
}

// applyAttr checks and applies the ownership, mode and time changes.
func applyAttr(tx store.Tx, cred Cred, n *Attr, mask uint32, in *Attr) error {
	owner := cred.IsRoot() || cred.Uid == n.Uid
	if n.Flags&(FlagImmutable|FlagAppend) != 0 && mask&^(SetViaHandle|SetFlags) != 0 {
		return syscall.EPERM
	}
	sec, nsec := stamp()
	changed := false
	if mask&(SetUid|SetGid) != 0 {
		newUid, newGid := n.Uid, n.Gid
		if mask&SetUid != 0 {
			newUid = in.Uid
		}
		if mask&SetGid != 0 {
			newGid = in.Gid
		}
		if !cred.IsRoot() {
			if newUid != n.Uid || cred.Uid != n.Uid {
				return syscall.EPERM
			}
			if newGid != n.Gid && !cred.InGroup(newGid) {
				return syscall.EPERM
			}
		}
		if n.Type != store.TypeDir {
			// As Linux does on chown: drop setuid, and setgid when the
			// group may execute.
			n.Mode &^= modeSetuid
			if n.Mode&0o010 != 0 {
				n.Mode &^= modeSetgid
			}
		}
		n.Uid, n.Gid = newUid, newGid
		changed = true
	}
	if mask&SetMode != 0 {
		if !owner {
			return syscall.EPERM
		}
		mode := in.Mode & 0o7777
		if !cred.IsRoot() && mode&modeSetgid != 0 && !cred.InGroup(n.Gid) {
			mode &^= modeSetgid
		}
		n.Mode = mode
		if n.Flags&FlagACL != 0 {
			a, err := loadACL(tx, n, XattrACLAccess)
			if err != nil {
				return err
			}
			if a != nil {
				setACL(tx, n, XattrACLAccess, a.withMode(mode))
			}
		}
		changed = true
	}
	if mask&SetSize != 0 {
		switch n.Type {
		case store.TypeDir:
			return syscall.EISDIR
		case store.TypeFile:
		default:
			return syscall.EINVAL
		}
		if mask&SetViaHandle == 0 {
			if err := checkAccess(tx, cred, n, MayWrite); err != nil {
				return err
			}
		}
		if in.Length != n.Length {
			touchMtime(n, sec, nsec)
		}
	}
	if mask&(SetAtime|SetMtime|SetAtimeNow|SetMtimeNow) != 0 {
		// Setting explicit times needs ownership; setting them to now
		// needs ownership or write access.
		if mask&(SetAtime|SetMtime) != 0 && !owner {
			return syscall.EPERM
		}
		if !owner {
			if err := checkAccess(tx, cred, n, MayWrite); err != nil {
				return err
			}
		}
		switch {
		case mask&SetAtimeNow != 0:
			n.Atime, n.Atimensec = sec, nsec
		case mask&SetAtime != 0:
			n.Atime, n.Atimensec = in.Atime, in.Atimensec
		}
		switch {
		case mask&SetMtimeNow != 0:
			n.Mtime, n.Mtimensec = sec, nsec
		case mask&SetMtime != 0:
			n.Mtime, n.Mtimensec = in.Mtime, in.Mtimensec
		}
		changed = true
	}
	if mask&SetFlags != 0 {
		if !cred.IsRoot() {
			return syscall.EPERM
		}
		n.Flags = in.Flags&^(FlagACL|FlagDefaultACL) | n.Flags&(FlagACL|FlagDefaultACL)
		changed = true
	}
	if changed {
		touchCtime(n, sec, nsec)
	}
	if mask&SetCtime != 0 && owner {
		n.Ctime, n.Ctimensec = in.Ctime, in.Ctimensec
	}
	return nil
}

// truncateTx changes the length of file n from oldLen to newLen. Shrinking
// drops the chunks past the end and covers the cut part of the last chunk
// with a hole, so that growing the file again reads zeros there.
func truncateTx(tx store.Tx, n *Attr, oldLen, newLen uint64, r *removal) error {
	n.Length = newLen
	if newLen >= oldLen {
		return nil
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
	for {
		idxs, err := tx.ChunkIndexes(n.Ino, first, 1000)
		if err != nil {
			return err
		}
		for _, idx := range idxs {
			if err := dropChunk(tx, n.Ino, idx); err != nil {
				return err
			}
		}
		if len(idxs) < 1000 {
			return nil
		}
		first = idxs[len(idxs)-1] + 1
	}
}

// dropChunk deletes one chunk's slice list and releases its slices.
func dropChunk(tx store.Tx, ino Ino, idx uint32) error {
	ss, err := tx.Chunk(ino, idx)
	if err != nil {
		return err
	}
	tx.SetChunk(ino, idx, nil)
	return releaseSlices(tx, ss)
}

// releaseSlices drops one reference to each slice; a slice with no
// references left is queued for block deletion.
func releaseSlices(tx store.Tx, ss []Slice) error {
	for _, s := range ss {
		if s.Id == 0 {
			continue
		}
		extra, err := tx.SliceRef(s.Id, s.Size)
		if err != nil {
			return err
		}
		if extra > 0 {
			tx.SetSliceRef(s.Id, s.Size, extra-1)
		} else {
			tx.SetDelSlice(s.Id, s.Size, true)
		}
	}
	return nil
}
