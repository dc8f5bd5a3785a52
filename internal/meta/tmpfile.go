package meta

import (
	"context"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Unnamed files (open(2) with O_TMPFILE).
//
// Tmpfile makes a regular file that no directory names and counts a
// handle of it open, as an unlink of a file this session holds open
// leaves one: no link, and sustained by the session (orphan.go), so that
// the last Release deletes it, and so does the cleanup of the session
// when the mount dies holding it. Until then Link may give it a name (the
// kernel lets linkat through only for a file opened with O_TMPFILE and
// without O_EXCL); the link ends the sustained record, and the file is
// then an ordinary one that outlives its handles. The client remembers
// which unlinked files it made so: Link refuses with ENOENT, as before,
// every other file without a link, so that no other path brings back a
// file whose last name went. (A client attached again after a restart of
// the metadata server has forgotten them: it deletes them at their last
// Release, but refuses to link them.)

// Tmpfile makes an unnamed regular file in directory parent, described
// by nn (mode and umask; owner, group and default ACLs as Mknod gives
// them), and counts a handle of it open, as Created would. The file has
// no link until Link gives it one; if none does, the last Release deletes
// it.
func (c *Client) Tmpfile(ctx context.Context, parent Ino, nn NewNode) (*Attr, error) {
	if err := c.writable(); err != nil {
		return nil, err
	}
	if c.sid == 0 {
		return nil, syscall.EROFS // no session to keep the file for
	}
	if err := checkNewEntry(parent, nil); err != nil {
		return nil, err
	}
	if nn.Type != store.TypeFile {
		return nil, syscall.EINVAL
	}
	ino, err := c.newIno(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.checkInodeQuota(ctx); err != nil {
		return nil, err
	}
	cred := CredOf(ctx)
	var out *Attr
	err = c.st.Update(ctx, func(tx store.Tx) error {
		dir, err := node(tx, parent)
		if err != nil {
			return err
		}
		if err := checkDirWrite(tx, cred, dir); err != nil {
			return err
		}
		if dir.Nlink == 0 {
			return syscall.ENOENT // the directory was removed
		}
		sec, nsec := c.stamp()
		n, err := newNode(tx, cred, dir, ino, nn, sec, nsec)
		if err != nil {
			return err
		}
		n.Nlink = 0
		tx.SetNode(n)
		tx.SetSustained(c.sid, ino, true)
		out = n
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.mu.open[ino]++
	c.mu.sustained[ino] = true
	c.mu.unnamed[ino] = true
	c.mu.Unlock()
	c.usedInodes.Add(1)
	c.usedSpace.Add(align4K(0))
	return out, nil
}

// linkable reports whether Link may give ino, which has no link, a name:
// whether this client made it with Tmpfile and it has had none since.
func (c *Client) linkable(ino Ino) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.unnamed[ino]
}

// named forgets that ino, made by Tmpfile, has no name: Link just gave it
// one, in the transaction that ended its sustained record.
func (c *Client) named(ino Ino) {
	c.mu.Lock()
	delete(c.mu.unnamed, ino)
	delete(c.mu.sustained, ino)
	c.mu.Unlock()
}
