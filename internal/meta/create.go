package meta

import (
	"bytes"
	"context"
	"errors"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// MaxSymlink is the longest symlink target accepted, in bytes.
const MaxSymlink = 4096

// NewNode describes a node to create.
type NewNode struct {
	Type   uint8
	Mode   uint16 // permission bits with setuid, setgid and sticky
	Umask  uint16
	Rdev   uint32
	Target []byte // symlink target
}

// Mknod creates name in parent: a file, directory, symlink, fifo, socket or
// device, as described by nn.
func (c *Client) Mknod(ctx context.Context, parent Ino, name []byte, nn NewNode) (*Attr, error) {
	if err := c.writable(); err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	if isDot(name) {
		return nil, syscall.EEXIST
	}
	if err := checkNewEntry(parent, name); err != nil {
		return nil, err
	}
	if nn.Type < store.TypeFile || nn.Type > store.TypeSocket {
		return nil, syscall.EINVAL
	}
	if nn.Type == store.TypeSymlink && (len(nn.Target) == 0 || len(nn.Target) > MaxSymlink) {
		if len(nn.Target) == 0 {
			return nil, syscall.ENOENT
		}
		return nil, syscall.ENAMETOOLONG
	}
	ino, err := c.newIno(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.checkInodeQuota(ctx); err != nil {
		return nil, err
	}
	cred := CredOf(ctx)
	var out, outDir *Attr
	gen := c.recent.begin()
	err = c.st.Update(ctx, func(tx store.Tx) error {
		dir, existing, err := nodeEdge(tx, parent, name)
		if err != nil {
			return err
		}
		if err := checkDirWrite(tx, cred, dir); err != nil {
			return err
		}
		if dir.Nlink == 0 {
			return syscall.ENOENT // the directory was removed
		}
		if existing.Ino != 0 {
			return syscall.EEXIST
		}
		sec, nsec := c.stamp()
		n, err := newNode(tx, cred, dir, ino, nn, sec, nsec)
		if err != nil {
			return err
		}
		switch nn.Type {
		case store.TypeDir:
			n.Nlink = 2
			n.Length = 4096
			dir.Nlink++
		case store.TypeSymlink:
			n.Mode = 0o777
			n.Length = uint64(len(nn.Target))
			tx.SetSymlink(ino, bytes.Clone(nn.Target))
		}
		c.touchDir(tx, dir, sec, nsec, nn.Type == store.TypeDir)
		tx.SetNode(n)
		tx.SetEdge(parent, store.Edge{Name: bytes.Clone(name), Ino: ino, Type: nn.Type})
		out, outDir = n, dir
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.recent.record(gen, outDir)
	c.usedInodes.Add(1)
	c.usedSpace.Add(align4K(0))
	return out, nil
}

// newNode returns node ino of the type, mode and device nn describes, to
// be made in dir by cred at time sec.nsec: owned by the caller (the
// group of a setgid directory, which a new directory inherits), with
// dir's default ACL applied, and one link. It stores the ACLs it
// inherits; the caller stores the node and its entry.
func newNode(tx store.Tx, cred Cred, dir *Attr, ino Ino, nn NewNode, sec int64, nsec uint32) (*Attr, error) {
	n := &Attr{Ino: ino, Type: nn.Type, Uid: cred.Uid, Gid: cred.Gid, Nlink: 1, Parent: dir.Ino, Rdev: nn.Rdev}
	if err := inheritACL(tx, dir, n, nn.Mode&0o7777, nn.Umask); err != nil {
		return nil, err
	}
	n.Atime, n.Atimensec = sec, nsec
	touchMtime(n, sec, nsec)
	if dir.Mode&modeSetgid != 0 {
		n.Gid = dir.Gid
		if nn.Type == store.TypeDir {
			n.Mode |= modeSetgid
		}
	}
	if nn.Type != store.TypeDir && n.Mode&modeSetgid != 0 && !cred.IsRoot() && !cred.InGroup(n.Gid) {
		n.Mode &^= modeSetgid
	}
	return n, nil
}

// Link adds a new name for ino in newParent. A file without a link gets
// one only when this client made it with Tmpfile (see tmpfile.go);
// otherwise ENOENT.
func (c *Client) Link(ctx context.Context, ino, newParent Ino, name []byte) (*Attr, error) {
	if err := c.writable(); err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	if isDot(name) {
		return nil, syscall.EEXIST
	}
	if err := checkNewEntry(newParent, name); err != nil {
		return nil, err
	}
	cred := CredOf(ctx)
	var out, outDir *Attr
	var unnamed bool
	gen := c.recent.begin()
	err := c.st.Update(ctx, func(tx store.Tx) error {
		n, err := node(tx, ino)
		if err != nil {
			return err
		}
		if n.Type == store.TypeDir {
			return syscall.EPERM
		}
		if n.Flags&(FlagImmutable|FlagAppend) != 0 {
			return syscall.EPERM
		}
		unnamed = n.Nlink == 0
		if unnamed && (n.Type != store.TypeFile || !c.linkable(ino)) {
			return syscall.ENOENT
		}
		if n.Nlink >= 65000 {
			return syscall.EMLINK
		}
		dir, err := node(tx, newParent)
		if err != nil {
			return err
		}
		if err := checkDirWrite(tx, cred, dir); err != nil {
			return err
		}
		if dir.Nlink == 0 {
			return syscall.ENOENT
		}
		if _, err := tx.Edge(newParent, name); err == nil {
			return syscall.EEXIST
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		sec, nsec := c.stamp()
		n.Nlink++
		n.Parent = 0
		if unnamed {
			// The first name of a file made by Tmpfile: it is no longer
			// kept for its handles.
			n.Parent = newParent
			tx.SetSustained(c.sid, ino, false)
		}
		touchCtime(n, sec, nsec)
		tx.SetNode(n)
		c.touchDir(tx, dir, sec, nsec, false)
		tx.SetEdge(newParent, store.Edge{Name: bytes.Clone(name), Ino: ino, Type: n.Type})
		out, outDir = n, dir
		return nil
	})
	if err == nil {
		c.recent.record(gen, outDir)
		if unnamed {
			c.named(ino)
		}
	}
	return out, err
}

// ReadLink returns the target of a symlink.
func (c *Client) ReadLink(ctx context.Context, ino Ino) ([]byte, error) {
	var out []byte
	err := c.st.View(ctx, func(tx store.Tx) error {
		n, err := node(tx, ino)
		if err != nil {
			return err
		}
		if n.Type != store.TypeSymlink {
			return syscall.EINVAL
		}
		out, err = tx.Symlink(ino)
		if errors.Is(err, store.ErrNotFound) {
			return syscall.EIO
		}
		return err
	})
	return out, err
}
