package meta

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Xattr flags, as in setxattr(2).
const (
	XattrCreate  = 1
	XattrReplace = 2
)

// FlagXattrs marks a node with extended attributes other than its ACLs
// (which FlagACL and FlagDefaultACL mark), on volumes whose metadata
// version keeps it (MetaVersion 2 on): a node without any of the three
// has no extended attributes at all, so listing them (cp -a does for
// every file), the capabilities the kernel asks for before a write, and
// deleting them with the node need no read. SetXattr sets it and
// RemoveXattr of the last such attribute clears it, in the transaction
// that changes the attributes.
const FlagXattrs = 0x10

// xattrFlagsVersion is the first metadata version whose nodes keep
// FlagXattrs; on older volumes it means nothing.
const xattrFlagsVersion = 2

// NoXattrs reports whether a, attributes read from the volume, say the
// node has no extended attributes at all. It is false whenever the
// volume does not keep FlagXattrs.
func (c *Client) NoXattrs(a *Attr) bool {
	return c.format.MetaVersion >= xattrFlagsVersion && a.Flags&(FlagXattrs|FlagACL|FlagDefaultACL) == 0
}

// Limits on extended attributes, as Linux applies them.
const (
	MaxXattrName  = 255
	MaxXattrValue = 65536
)

// isACL reports whether name is one of the POSIX ACL attributes.
func isACL(name string) bool { return name == XattrACLAccess || name == XattrACLDefault }

// unsupportedXattr reports whether name is in no namespace this volume
// keeps, which fails with EOPNOTSUPP whatever the node: answered before
// any transaction, since programs that copy files (cp -a, rsync -A) ask
// for and set the POSIX ACL attributes of every file, also on volumes
// without ACLs.
func (c *Client) unsupportedXattr(name string) bool {
	if name == "" || len(name) > MaxXattrName {
		return false // checkXattr's errors come first
	}
	for _, ns := range []string{"user.", "trusted.", "security."} {
		if strings.HasPrefix(name, ns) {
			return false
		}
	}
	return !(isACL(name) && c.format.EnableACL)
}

// XattrCaps is the extended attribute that holds a file's capabilities
// (capabilities(7)), which a write or truncation by anyone drops.
const XattrCaps = "security.capability"

// XattrSupported reports whether the volume keeps extended attributes
// named name at all: a request for any other name fails with EOPNOTSUPP
// whatever the node, and changes nothing.
func (c *Client) XattrSupported(name string) bool { return !c.unsupportedXattr(name) }

// checkXattr applies the namespace rules of Linux to a request on n, for
// a name its caller checked is in a namespace the volume keeps
// (unsupportedXattr).
func (c *Client) checkXattr(tx store.Tx, cred Cred, n *Attr, name string, write bool) error {
	if name == "" {
		return syscall.EINVAL
	}
	if len(name) > MaxXattrName {
		return syscall.ERANGE
	}
	switch {
	case strings.HasPrefix(name, "user."):
		if n.Type != store.TypeFile && n.Type != store.TypeDir {
			if write {
				return syscall.EPERM
			}
			return syscall.ENODATA
		}
		if n.Type == store.TypeDir && n.Mode&modeSticky != 0 && write && !cred.IsRoot() && cred.Uid != n.Uid {
			return syscall.EPERM
		}
		mask := uint32(MayRead)
		if write {
			mask = MayWrite
		}
		return checkAccess(tx, cred, n, mask)
	case strings.HasPrefix(name, "trusted."):
		if !cred.IsRoot() {
			return syscall.EPERM
		}
	case strings.HasPrefix(name, "security."):
		if write && !cred.IsRoot() && cred.Uid != n.Uid {
			return syscall.EPERM
		}
	case isACL(name) && c.format.EnableACL:
		if write && !cred.IsRoot() && cred.Uid != n.Uid {
			return syscall.EPERM
		}
	}
	return nil
}

// GetXattr returns the value of extended attribute name of ino.
func (c *Client) GetXattr(ctx context.Context, ino Ino, name string) ([]byte, error) {
	if c.unsupportedXattr(name) {
		return nil, syscall.EOPNOTSUPP
	}
	cred := CredOf(ctx)
	var out []byte
	err := c.st.View(ctx, func(tx store.Tx) error {
		n, err := node(tx, ino)
		if err != nil {
			return err
		}
		if err := c.checkXattr(tx, cred, n, name, false); err != nil {
			return err
		}
		out, err = tx.Xattr(ino, name)
		if errors.Is(err, store.ErrNotFound) {
			return syscall.ENODATA
		}
		return err
	})
	return out, err
}

// ListXattr returns the extended attribute names of ino that the caller
// may see, sorted.
func (c *Client) ListXattr(ctx context.Context, ino Ino) ([]string, error) {
	cred := CredOf(ctx)
	var out []string
	err := c.st.View(ctx, func(tx store.Tx) error {
		out = out[:0]
		n, err := node(tx, ino)
		if err != nil || c.NoXattrs(n) {
			return err
		}
		names, err := tx.XattrNames(ino)
		if err != nil {
			return err
		}
		for _, name := range names {
			if strings.HasPrefix(name, "trusted.") && !cred.IsRoot() {
				continue
			}
			out = append(out, name)
		}
		sort.Strings(out)
		return nil
	})
	return out, err
}

// SetXattr sets extended attribute name of ino; flags may ask that it be
// created (XattrCreate) or replaced (XattrReplace).
func (c *Client) SetXattr(ctx context.Context, ino Ino, name string, value []byte, flags uint32) error {
	c.recent.forget(ino) // see recentDirs: before, and after the change commits
	defer c.recent.forget(ino)
	if err := c.writable(); err != nil {
		return err
	}
	if len(value) > MaxXattrValue {
		return syscall.E2BIG
	}
	if c.unsupportedXattr(name) {
		return syscall.EOPNOTSUPP
	}
	cred := CredOf(ctx)
	return c.st.Update(ctx, func(tx store.Tx) error {
		n, err := node(tx, ino)
		if err != nil {
			return err
		}
		if err := c.checkXattr(tx, cred, n, name, true); err != nil {
			return err
		}
		if n.Flags&(FlagImmutable|FlagAppend) != 0 {
			return syscall.EPERM
		}
		_, err = tx.Xattr(ino, name)
		exists := err == nil
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		switch {
		case flags&XattrCreate != 0 && exists:
			return syscall.EEXIST
		case flags&XattrReplace != 0 && !exists:
			return syscall.ENODATA
		}
		if isACL(name) {
			if err := setACLXattr(tx, cred, n, name, value); err != nil {
				return err
			}
		} else {
			tx.SetXattr(ino, name, bytes.Clone(value))
			n.Flags |= FlagXattrs
		}
		sec, nsec := c.stamp()
		touchCtime(n, sec, nsec)
		tx.SetNode(n)
		return nil
	})
}

// RemoveXattr deletes extended attribute name of ino.
func (c *Client) RemoveXattr(ctx context.Context, ino Ino, name string) error {
	c.recent.forget(ino) // see recentDirs: before, and after the change commits
	defer c.recent.forget(ino)
	if err := c.writable(); err != nil {
		return err
	}
	if c.unsupportedXattr(name) {
		return syscall.EOPNOTSUPP
	}
	cred := CredOf(ctx)
	return c.st.Update(ctx, func(tx store.Tx) error {
		n, err := node(tx, ino)
		if err != nil {
			return err
		}
		if err := c.checkXattr(tx, cred, n, name, true); err != nil {
			// A write by someone who may write the file drops its file
			// capabilities, as it drops setuid: the kernel asks for
			// that with this request, as the writer (a removal that a
			// program asks for needs CAP_SETFCAP, which the kernel
			// checked before sending it).
			if name != XattrCaps || checkAccess(tx, cred, n, MayWrite) != nil {
				return err
			}
		}
		if n.Flags&(FlagImmutable|FlagAppend) != 0 {
			return syscall.EPERM
		}
		if _, err := tx.Xattr(ino, name); errors.Is(err, store.ErrNotFound) {
			return syscall.ENODATA
		} else if err != nil {
			return err
		}
		if isACL(name) {
			setACL(tx, n, name, nil)
		} else {
			// The flag goes with the last attribute besides the ACLs.
			names, err := tx.XattrNames(ino)
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(names, func(o string) bool { return o != name && !isACL(o) }) {
				n.Flags &^= FlagXattrs
			}
			tx.DeleteXattr(ino, name)
		}
		sec, nsec := c.stamp()
		touchCtime(n, sec, nsec)
		tx.SetNode(n)
		return nil
	})
}
