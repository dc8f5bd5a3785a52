package meta

import (
	"context"
	"errors"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// removal records what a transaction freed, applied to the client's
// counters only after the transaction commits.
type removal struct {
	inodes int64
	space  int64
	// sustain lists inodes whose last name went while this client holds
	// them open: they stay until closed.
	sustain []Ino
	// others caches othersMayHold for the transaction: 0 not asked yet, 1
	// other sessions exist, -1 none.
	others int8
	// sessions is what the transaction read of the session list, if it
	// did.
	sessions *sessionsSeen
	// dirs are the directories whose entries the transaction changed, as
	// it stored them; gone the directories it removed or moved, and
	// trashed whether it moved a file to the trash (see recentDirs).
	dirs    []*Attr
	gone    []Ino
	trashed bool
}

// noteDirs tells recentDirs what a committed removal or rename, begun at
// generation gen, did to directories.
func (c *Client) noteDirs(gen uint64, r *removal) {
	c.recent.record(gen, r.dirs...)
	if r.trashed {
		// The trash, and the root when the trash was created, changed
		// outside the recorded directories.
		r.gone = append(r.gone, RootIno, TrashIno)
	}
	if len(r.gone) > 0 {
		c.recent.forget(r.gone...)
	}
}

func (c *Client) applyRemoval(r *removal) {
	c.setSessionsSeen(r.sessions)
	c.usedInodes.Add(-r.inodes)
	c.usedSpace.Add(-r.space)
	if len(r.sustain) > 0 {
		c.mu.Lock()
		for _, ino := range r.sustain {
			c.mu.sustained[ino] = true
		}
		c.mu.Unlock()
	}
}

func (c *Client) isOpen(ino Ino) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.open[ino] > 0
}

// dropLink removes one link of n, whose entry name in parent the caller
// removed. At the last link of a non-directory on a volume with a trash
// (and outside the trash) the node moves to the trash instead. Otherwise
// the last link of a file this client holds open sustains it until
// closed, and the last link of a file while other sessions exist (which
// might hold it open) makes it an orphan (orphan.go); any other node goes
// with its data.
func (c *Client) dropLink(tx store.Tx, parent Ino, name []byte, n *Attr, r *removal) error {
	sec, nsec := c.stamp()
	touchCtime(n, sec, nsec)
	if n.Type != store.TypeDir && n.Nlink == 1 && c.trashEnabled() && !IsTrash(parent) {
		r.trashed = true
		return c.moveToTrash(tx, parent, name, n)
	}
	if n.Type == store.TypeDir {
		n.Nlink = 0
	} else {
		n.Nlink--
	}
	if n.Nlink > 0 {
		tx.SetNode(n)
		return nil
	}
	if n.Type == store.TypeFile {
		open := c.isOpen(n.Ino)
		others, err := c.othersMayHold(tx, r)
		if err != nil {
			return err
		}
		if open || others {
			tx.SetNode(n)
			if open {
				tx.SetSustained(c.sid, n.Ino, true)
				r.sustain = append(r.sustain, n.Ino)
			}
			if others {
				tx.SetSustained(orphanSid, n.Ino, true)
			}
			return nil
		}
	}
	return c.destroy(tx, n, r)
}

// destroy deletes node n and queues its data for deletion.
func (c *Client) destroy(tx store.Tx, n *Attr, r *removal) error {
	if !c.NoXattrs(n) {
		names, err := tx.XattrNames(n.Ino)
		if err != nil {
			return err
		}
		for _, name := range names {
			tx.DeleteXattr(n.Ino, name)
		}
	}
	switch n.Type {
	case store.TypeSymlink:
		tx.DeleteSymlink(n.Ino)
	case store.TypeFile:
		// A file's data lives in chunks only below its length, or past it
		// while a truncation is unfinished, so an empty file has nothing
		// to delete later.
		if n.Length > 0 || n.Flags&flagTruncating != 0 {
			tx.SetDelFile(store.DelFile{Ino: n.Ino, Length: n.Length, Expire: c.conf.Now().Unix()}, true)
		}
		if n.Flags&flagTruncating != 0 {
			tx.SetTruncation(store.Truncation{Ino: n.Ino}, false)
		}
	}
	tx.DeleteNode(n.Ino)
	if IsTrash(n.Ino) {
		return nil // trash directories are not counted
	}
	r.inodes++
	r.space += SpaceOf(n)
	return nil
}

// Unlink removes the entry name, which must not be a directory, from parent.
func (c *Client) Unlink(ctx context.Context, parent Ino, name []byte) error {
	return c.remove(ctx, parent, name, false)
}

// Rmdir removes the empty directory name from parent.
func (c *Client) Rmdir(ctx context.Context, parent Ino, name []byte) error {
	switch string(name) {
	case ".":
		return syscall.EINVAL
	case "..":
		return syscall.ENOTEMPTY
	}
	return c.remove(ctx, parent, name, true)
}

func (c *Client) remove(ctx context.Context, parent Ino, name []byte, isDir bool) error {
	if err := c.writable(); err != nil {
		return err
	}
	if len(name) > 255 {
		return syscall.ENAMETOOLONG
	}
	cred := CredOf(ctx)
	var r removal
	gen := c.recent.begin()
	err := c.st.Update(ctx, func(tx store.Tx) error {
		r = removal{}
		dir, e, n, err := lookupEntry(tx, parent, name)
		if err != nil {
			return err
		}
		if err := checkDirWrite(tx, cred, dir); err != nil {
			return err
		}
		if e.Ino == 0 {
			return syscall.ENOENT
		}
		if n == nil {
			return ErrNoInode
		}
		if n.Ino == TrashIno {
			return syscall.EPERM
		}
		if isDir {
			if n.Type != store.TypeDir {
				return syscall.ENOTDIR
			}
			if err := checkEmpty(tx, n.Ino); err != nil {
				return err
			}
		} else if n.Type == store.TypeDir {
			return syscall.EISDIR
		}
		if err := checkSticky(cred, dir, n); err != nil {
			return err
		}
		if n.Flags&(FlagImmutable|FlagAppend) != 0 {
			return syscall.EPERM
		}
		sec, nsec := c.stamp()
		if isDir {
			dir.Nlink--
		}
		c.touchDir(tx, dir, sec, nsec, isDir)
		tx.DeleteEdge(parent, name)
		r.dirs = append(r.dirs, dir)
		if isDir {
			r.gone = append(r.gone, n.Ino)
		}
		return c.dropLink(tx, parent, name, n, &r)
	})
	if err != nil {
		return err
	}
	c.noteDirs(gen, &r)
	c.applyRemoval(&r)
	return nil
}

func checkEmpty(tx store.Tx, dir Ino) error {
	es, err := tx.Edges(dir, nil, 1)
	if err != nil {
		return err
	}
	if len(es) > 0 {
		return syscall.ENOTEMPTY
	}
	return nil
}

// deleteSustained deletes a file that was unlinked while open, now that
// its last handle is closed, unless another session may still hold it.
func (c *Client) deleteSustained(ctx context.Context, ino Ino) error {
	var r removal
	err := c.st.Update(ctx, func(tx store.Tx) error {
		r = removal{}
		tx.SetSustained(c.sid, ino, false)
		n, err := tx.Node(ino)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if n.Nlink > 0 {
			return nil // linked again meanwhile
		}
		kept, err := keptByOthers(tx, c.sid)
		if err != nil || kept[ino] {
			return err // an orphan round or another session's last close deletes it
		}
		return c.destroy(tx, n, &r)
	})
	if err == nil {
		c.mu.Lock()
		delete(c.mu.sustained, ino)
		c.mu.Unlock()
		c.applyRemoval(&r)
	}
	return err
}
