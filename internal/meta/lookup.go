package meta

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// ErrNoInode is the error of an operation on an inode that does not
// exist (any more): ENOENT to a caller that only asks for the errno. A
// mount tells it apart from a missing name, because the kernel reached
// such an inode through a name it cached, and answers ESTALE so that the
// kernel looks the name up again.
var ErrNoInode = fmt.Errorf("no such inode: %w", syscall.ENOENT)

// node reads ino, turning a missing record into ErrNoInode.
func node(tx store.Tx, ino Ino) (*Attr, error) {
	n, err := tx.Node(ino)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNoInode
	}
	if err != nil {
		return nil, fmt.Errorf("read inode %d: %w", ino, err)
	}
	return n, nil
}

// edge reads a directory entry, turning a missing record into ENOENT.
func edge(tx store.Tx, parent Ino, name []byte) (store.Edge, error) {
	e, err := tx.Edge(parent, name)
	if errors.Is(err, store.ErrNotFound) {
		return e, syscall.ENOENT
	}
	if err != nil {
		return e, fmt.Errorf("read entry %q of %d: %w", name, parent, err)
	}
	return e, nil
}

// nodeEdge reads directory parent and its entry name in one round trip;
// a missing parent is ErrNoInode, a missing name an Edge with Ino 0.
func nodeEdge(tx store.Tx, parent Ino, name []byte) (*Attr, store.Edge, error) {
	n, e, err := tx.NodeEdge(parent, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, e, ErrNoInode
	}
	if err != nil {
		return nil, e, fmt.Errorf("read entry %q of %d: %w", name, parent, err)
	}
	return n, e, nil
}

// lookupEntry reads directory parent, its entry name and the node the
// entry names, in one round trip where the engine can: a missing parent
// is ErrNoInode, a missing name an Edge with Ino 0, and the named node is
// nil when it is missing (the caller decides when that is ErrNoInode).
func lookupEntry(tx store.Tx, parent Ino, name []byte) (*Attr, store.Edge, *Attr, error) {
	dir, e, n, err := tx.Lookup(parent, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, e, nil, ErrNoInode
	}
	if err != nil {
		return nil, e, nil, fmt.Errorf("read entry %q of %d: %w", name, parent, err)
	}
	return dir, e, n, nil
}

// Lookup finds name in directory parent and returns its attributes.
func (c *Client) Lookup(ctx context.Context, parent Ino, name []byte) (*Attr, error) {
	if len(name) > 255 {
		return nil, syscall.ENAMETOOLONG
	}
	cred := CredOf(ctx)
	var out *Attr
	err := c.st.View(ctx, func(tx store.Tx) error {
		dir, e, n, err := lookupEntry(tx, parent, name)
		if err != nil {
			return err
		}
		if dir.Type != store.TypeDir {
			return syscall.ENOTDIR
		}
		if err := checkAccess(tx, cred, dir, MayExec); err != nil {
			return err
		}
		switch string(name) {
		case ".":
			out = dir
			return nil
		case "..":
			target := dir.Parent
			if parent == RootIno {
				target = RootIno
			}
			if target == 0 {
				return syscall.ENOENT
			}
			out, err = node(tx, target)
			return err
		}
		if e.Ino == 0 {
			return syscall.ENOENT
		}
		if n == nil {
			return ErrNoInode
		}
		out = n
		return nil
	})
	return out, err
}

// GetAttr returns the attributes of ino.
func (c *Client) GetAttr(ctx context.Context, ino Ino) (*Attr, error) {
	if a, ok := c.recent.get(ino); ok {
		return a, nil
	}
	var out *Attr
	err := c.st.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = node(tx, ino)
		return err
	})
	return out, err
}

// Access checks mask (MayRead|MayWrite|MayExec, or 0 for existence) for
// the caller on ino, as access(2) does.
func (c *Client) Access(ctx context.Context, ino Ino, mask uint32) error {
	if mask&MayWrite != 0 {
		if err := c.writable(); err != nil {
			return err
		}
	}
	_, err := c.checked(ctx, ino, mask, func(n *Attr) error {
		if mask&MayWrite != 0 && n.Flags&FlagImmutable != 0 {
			return syscall.EPERM
		}
		return nil
	})
	return err
}

// checked reads ino and checks mask for the caller in one transaction,
// after check (which may be nil) has vetted the node.
func (c *Client) checked(ctx context.Context, ino Ino, mask uint32, check func(n *Attr) error) (*Attr, error) {
	var out *Attr
	err := c.st.View(ctx, func(tx store.Tx) error {
		n, err := node(tx, ino)
		if err != nil {
			return err
		}
		if check != nil {
			if err := check(n); err != nil {
				return err
			}
		}
		out = n
		return checkAccess(tx, CredOf(ctx), n, mask)
	})
	return out, err
}
