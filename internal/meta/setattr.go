package meta

import (
	"context"
	"errors"
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
	// SetKillSetID drops setuid, and setgid when the group may execute,
	// from a regular file: what a write or truncation by a process
	// without CAP_FSETID does. It needs no permission of its own (it only
	// takes privilege away) and does nothing when the bits are clear.
	SetKillSetID
)

// AttrChange is a SetAttr request of a caller, held back by a mount to be
// applied with its next slice commit (WriteSliceAttr).
type AttrChange struct {
	Cred Cred
	Mask uint32
	In   Attr
}

// previewable are the SetAttr fields PreviewAttr decides alone.
const previewable = SetMode | SetUid | SetGid | SetAtime | SetMtime | SetAtimeNow | SetMtimeNow

// PreviewAttr returns the attributes SetAttr(mask, in) by the caller in
// ctx would give a regular file whose attributes are a, when that follows
// from a alone: owner, mode and time changes by root or the owner, on a
// file without an access ACL or immutable/append-only flags. Otherwise
// (or when the change would fail) it returns false and the caller must
// ask SetAttr. A mount uses it to hold a change back until its buffered
// writes commit (WriteSliceAttr), which checks it again.
func (c *Client) PreviewAttr(ctx context.Context, a *Attr, mask uint32, in *Attr) (*Attr, bool) {
	cred := CredOf(ctx)
	if mask == 0 || mask&^previewable != 0 || a.Type != store.TypeFile || c.writable() != nil ||
		a.Flags&(FlagACL|FlagImmutable|FlagAppend) != 0 || !cred.IsRoot() && cred.Uid != a.Uid {
		return nil, false
	}
	out := *a
	// With these conditions applyAttr never reads the engine: no ACL to
	// update, and the owner needs no access check.
	if err := c.applyAttr(nil, cred, &out, mask, in); err != nil {
		return nil, false
	}
	return &out, true
}

// ApplyAttrChanges applies changes a mount held back (see PreviewAttr)
// to ino in one transaction, in order, each checked again with its
// caller's credentials; like WriteSliceAttr it skips and logs one that is
// no longer allowed. It returns the attributes after them.
func (c *Client) ApplyAttrChanges(ctx context.Context, ino Ino, changes []AttrChange) (*Attr, error) {
	c.recent.forget(ino)
	defer c.recent.forget(ino)
	if err := c.writable(); err != nil {
		return nil, err
	}
	var out *Attr
	err := c.st.Update(ctx, func(tx store.Tx) error {
		n, err := node(tx, ino)
		if err != nil {
			return err
		}
		if err := c.applyChanges(tx, n, changes); err != nil {
			return err
		}
		tx.SetNode(n)
		out = n
		return nil
	})
	return out, err
}

// applyChanges applies held-back changes to n in tx (see
// ApplyAttrChanges); it fails only with an engine error.
func (c *Client) applyChanges(tx store.Tx, n *Attr, changes []AttrChange) error {
	for _, ch := range changes {
		cp := *n
		if err := c.applyAttr(tx, ch.Cred, &cp, ch.Mask, &ch.In); err != nil {
			var errno syscall.Errno
			if !errors.As(err, &errno) {
				return err // the engine's: the transaction retries or fails
			}
			c.log.Warn("held-back attribute change no longer allowed", "ino", n.Ino, "mask", ch.Mask, "err", err)
			continue
		}
		*n = cp
	}
	return nil
}

// SetAttr changes the attributes of ino selected by mask to those in in.
func (c *Client) SetAttr(ctx context.Context, ino Ino, mask uint32, in *Attr) (*Attr, error) {
	c.recent.forget(ino) // see recentDirs: before, and after the change commits
	defer c.recent.forget(ino)
	if err := c.writable(); err != nil {
		return nil, err
	}
	if IsTrash(ino) {
		return nil, syscall.EPERM // managed by Sluice
	}
	cred := CredOf(ctx)
	var out *Attr
	var grow int64
	var pending bool
	err := c.extending(ctx, ino, func() error {
		return c.st.Update(ctx, func(tx store.Tx) error {
			grow, pending = 0, false
			n, err := node(tx, ino)
			if err != nil {
				return err
			}
			oldLen := n.Length
			if mask&SetSize != 0 && in.Length > oldLen && n.Flags&flagTruncating != 0 {
				return errTruncating
			}
			if err := c.applyAttr(tx, cred, n, mask, in); err != nil {
				return err
			}
			if mask&SetSize != 0 && in.Length > oldLen {
				if err := c.checkSpaceQuota(tx, align4K(in.Length)-align4K(oldLen)); err != nil {
					return err
				}
			}
			if mask&SetSize != 0 && in.Length != oldLen {
				if pending, err = c.truncateTx(tx, n, oldLen, in.Length); err != nil {
					return err
				}
				grow = align4K(in.Length) - align4K(oldLen)
			}
			tx.SetNode(n)
			out = n
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	c.usedSpace.Add(grow)
	if pending && c.conf.TruncateSyncBatches > 0 {
		// The length is final; drop a bounded number of batches of the
		// chunks past it now and leave the rest to the background.
		if err := c.finishTruncate(ctx, ino, c.conf.TruncateSyncBatches); err != nil && ctx.Err() == nil {
			c.log.Warn("finish truncation", "ino", ino, "err", err)
		}
	}
	return out, nil
}

// HasSetID reports whether mode has bits that a write by a process
// without CAP_FSETID drops: setuid, or setgid with group execute.
func HasSetID(mode uint16) bool {
	return mode&modeSetuid != 0 || mode&(modeSetgid|0o010) == modeSetgid|0o010
}

// killSetID returns mode without setuid, and without setgid when the
// group may execute.
func killSetID(mode uint16) uint16 {
	mode &^= modeSetuid
	if mode&0o010 != 0 {
		mode &^= modeSetgid
	}
	return mode
}

// killsSetID reports whether mode is old with only setuid and setgid
// bits cleared, at least one of them.
func killsSetID(old, mode uint16) bool {
	const setID = modeSetuid | modeSetgid
	return mode != old && mode|old&setID == old
}

// applyAttr checks and applies the ownership, mode and time changes.
func (c *Client) applyAttr(tx store.Tx, cred Cred, n *Attr, mask uint32, in *Attr) error {
	owner := cred.IsRoot() || cred.Uid == n.Uid
	if mask&SetKillSetID != 0 && !(n.Type == store.TypeFile && HasSetID(n.Mode)) {
		mask &^= SetKillSetID
	}
	if n.Flags&(FlagImmutable|FlagAppend) != 0 && mask&^(SetViaHandle|SetFlags) != 0 {
		return syscall.EPERM
	}
	sec, nsec := c.stamp()
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
			n.Mode = killSetID(n.Mode)
		}
		n.Uid, n.Gid = newUid, newGid
		changed = true
	}
	if mask&SetMode != 0 {
		mode := in.Mode & 0o7777
		if !owner {
			if !killsSetID(n.Mode, mode) {
				return syscall.EPERM
			}
			// A write by someone else clears setuid and setgid as a
			// side effect; the FUSE kernel asks for it with a mode
			// change from the writer, who need only be able to write.
			if mask&SetViaHandle == 0 {
				if err := checkAccess(tx, cred, n, MayWrite); err != nil {
					return syscall.EPERM
				}
			}
		}
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
		if in.Length > MaxFileSize {
			return syscall.EFBIG
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
	if mask&SetKillSetID != 0 {
		n.Mode = killSetID(n.Mode)
		changed = true
	}
	if mask&SetFlags != 0 {
		if !cred.IsRoot() {
			return syscall.EPERM
		}
		const kept = FlagACL | FlagDefaultACL | FlagXattrs | FlagSkipTrash | flagTruncating
		n.Flags = in.Flags&^kept | n.Flags&kept
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
