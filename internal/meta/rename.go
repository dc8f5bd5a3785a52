package meta

import (
	"bytes"
	"context"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Rename flags, as in renameat2(2).
const (
	RenameNoReplace = 1
	RenameExchange  = 2
	RenameWhiteout  = 4
)

// Rename moves entry srcName of srcParent to dstName of dstParent.
// flags are renameat2's: RenameNoReplace fails with EEXIST when dstName
// exists, RenameExchange swaps two existing names, and RenameWhiteout
// leaves at srcName, in the same transaction, a whiteout (the character
// device 0:0 with no permission bits, made by the caller as Mknod
// would), which overlayfs uses in its upper directory. RenameExchange
// combined with either other flag is EINVAL.
func (c *Client) Rename(ctx context.Context, srcParent Ino, srcName []byte, dstParent Ino, dstName []byte, flags uint32) error {
	if err := c.writable(); err != nil {
		return err
	}
	if flags&^(RenameNoReplace|RenameExchange|RenameWhiteout) != 0 ||
		flags&RenameExchange != 0 && flags&(RenameNoReplace|RenameWhiteout) != 0 {
		return syscall.EINVAL
	}
	for _, name := range [][]byte{srcName, dstName} {
		if err := checkName(name); err != nil {
			return err
		}
		if isDot(name) {
			return syscall.EBUSY
		}
	}
	// The trash and its hour directories stay where they are, and nothing
	// moves into the trash but through deletion.
	if isTrashEntry(srcParent, srcName) || srcParent == TrashIno {
		return syscall.EPERM
	}
	if err := checkNewEntry(dstParent, dstName); err != nil {
		return err
	}
	if flags&RenameExchange != 0 {
		if err := checkNewEntry(srcParent, srcName); err != nil {
			return err
		}
	}
	var whiteout Ino
	if flags&RenameWhiteout != 0 {
		var err error
		if whiteout, err = c.newIno(ctx); err != nil {
			return err
		}
		if err := c.checkInodeQuota(ctx); err != nil {
			return err
		}
	}
	cred := CredOf(ctx)
	var r removal
	gen := c.recent.begin()
	err := c.st.Update(ctx, func(tx store.Tx) error {
		r = removal{}
		return c.renameTx(tx, cred, srcParent, srcName, dstParent, dstName, flags, whiteout, &r)
	})
	if err != nil {
		return err
	}
	c.noteDirs(gen, &r)
	c.applyRemoval(&r)
	return nil
}

// whiteoutNode describes the node RENAME_WHITEOUT leaves behind.
var whiteoutNode = NewNode{Type: store.TypeCharDev}

// renameTx is Rename's transaction; whiteout is the inode number of the
// whiteout to leave at sn with RenameWhiteout. It reports whether it
// stored the whiteout.
func (c *Client) renameTx(tx store.Tx, cred Cred, sp Ino, sn []byte, dp Ino, dn []byte, flags uint32, whiteout Ino, r *removal) error {
	// Each directory with its entry and the entry's node, in one round
	// trip each where the engine can.
	sdir, se, src, err := lookupEntry(tx, sp, sn)
	if err != nil {
		return err
	}
	ddir, de, dst, err := lookupEntry(tx, dp, dn)
	if err != nil {
		return err
	}
	if dp == sp {
		ddir = sdir // one record, changed once for both roles
	}
	if err := checkDirWrite(tx, cred, sdir); err != nil {
		return err
	}
	if err := checkDirWrite(tx, cred, ddir); err != nil {
		return err
	}
	if se.Ino == 0 {
		return syscall.ENOENT
	}
	if src == nil {
		return ErrNoInode
	}
	if err := checkSticky(cred, sdir, src); err != nil {
		return err
	}
	if src.Flags&(FlagImmutable|FlagAppend) != 0 {
		return syscall.EPERM
	}
	if ddir.Nlink == 0 {
		return syscall.ENOENT
	}
	switch {
	case de.Ino != 0 && dst == nil:
		return ErrNoInode
	case de.Ino == 0 && flags&RenameExchange != 0:
		return syscall.ENOENT
	}
	if dst != nil && dst.Ino == src.Ino {
		if flags&RenameNoReplace != 0 {
			return syscall.EEXIST
		}
		return nil // two names of one inode: nothing to do
	}
	if dst != nil && flags&RenameNoReplace != 0 {
		return syscall.EEXIST
	}
	if dst != nil {
		if err := checkSticky(cred, ddir, dst); err != nil {
			return err
		}
		if dst.Flags&(FlagImmutable|FlagAppend) != 0 {
			return syscall.EPERM
		}
	}
	// A directory moving to another parent rewrites its "..": that needs
	// write access to it, and it must not move into its own subtree.
	if sp != dp {
		if src.Type == store.TypeDir {
			if err := checkAccess(tx, cred, src, MayWrite); err != nil {
				return err
			}
			if err := checkNotAncestor(tx, src.Ino, dp); err != nil {
				return err
			}
		}
		if flags&RenameExchange != 0 && dst.Type == store.TypeDir {
			if err := checkAccess(tx, cred, dst, MayWrite); err != nil {
				return err
			}
			if err := checkNotAncestor(tx, dst.Ino, sp); err != nil {
				return err
			}
		}
	}
	sec, nsec := c.stamp()
	r.dirs = append(r.dirs, sdir, ddir)
	r.gone = append(r.gone, src.Ino)
	if dst != nil {
		r.gone = append(r.gone, dst.Ino)
	}
	if flags&RenameExchange != 0 {
		return exchange(tx, sdir, ddir, sn, dn, src, dst, sec, nsec)
	}
	if dst != nil {
		if src.Type == store.TypeDir {
			if dst.Type != store.TypeDir {
				return syscall.ENOTDIR
			}
			if err := checkEmpty(tx, dst.Ino); err != nil {
				return err
			}
			ddir.Nlink--
		} else if dst.Type == store.TypeDir {
			return syscall.EISDIR
		}
	}
	tx.DeleteEdge(sp, sn)
	if flags&RenameWhiteout != 0 {
		w, err := newNode(tx, cred, sdir, whiteout, whiteoutNode, sec, nsec)
		if err != nil {
			return err
		}
		tx.SetNode(w)
		tx.SetEdge(sp, store.Edge{Name: bytes.Clone(sn), Ino: whiteout, Type: w.Type})
		// One inode more in use, charged as any node: applyRemoval
		// counts it with what the rename freed.
		r.inodes--
		r.space -= SpaceOf(w)
	}
	tx.SetEdge(dp, store.Edge{Name: bytes.Clone(dn), Ino: src.Ino, Type: src.Type})
	if src.Type == store.TypeDir && sp != dp {
		sdir.Nlink--
		ddir.Nlink++
	}
	if src.Nlink == 1 || src.Type == store.TypeDir {
		src.Parent = dp
	}
	touchCtime(src, sec, nsec)
	tx.SetNode(src)
	touchMtime(sdir, sec, nsec)
	touchMtime(ddir, sec, nsec)
	tx.SetNode(sdir)
	if ddir != sdir {
		tx.SetNode(ddir)
	}
	if dst != nil {
		// Last, after the directories are stored: moving dst to the trash
		// may read and update the root.
		return c.dropLink(tx, dp, dn, dst, r)
	}
	return nil
}

func exchange(tx store.Tx, sdir, ddir *Attr, sn, dn []byte, src, dst *Attr, sec int64, nsec uint32) error {
	tx.SetEdge(sdir.Ino, store.Edge{Name: bytes.Clone(sn), Ino: dst.Ino, Type: dst.Type})
	tx.SetEdge(ddir.Ino, store.Edge{Name: bytes.Clone(dn), Ino: src.Ino, Type: src.Type})
	if sdir.Ino != ddir.Ino {
		if src.Type == store.TypeDir {
			sdir.Nlink--
			ddir.Nlink++
		}
		if dst.Type == store.TypeDir {
			ddir.Nlink--
			sdir.Nlink++
		}
		if src.Type == store.TypeDir || src.Nlink == 1 {
			src.Parent = ddir.Ino
		}
		if dst.Type == store.TypeDir || dst.Nlink == 1 {
			dst.Parent = sdir.Ino
		}
	}
	touchCtime(src, sec, nsec)
	touchCtime(dst, sec, nsec)
	tx.SetNode(src)
	tx.SetNode(dst)
	touchMtime(sdir, sec, nsec)
	touchMtime(ddir, sec, nsec)
	tx.SetNode(sdir)
	if ddir != sdir {
		tx.SetNode(ddir)
	}
	return nil
}

// checkNotAncestor returns EINVAL when dir is dst or one of its ancestors.
func checkNotAncestor(tx store.Tx, dir, dst Ino) error {
	for ino, depth := dst, 0; ; depth++ {
		if ino == dir {
			return syscall.EINVAL
		}
		if ino == RootIno || depth > 100000 {
			return nil
		}
		n, err := node(tx, ino)
		if err != nil {
			return err
		}
		ino = n.Parent
	}
}
