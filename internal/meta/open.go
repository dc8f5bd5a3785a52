package meta

import (
	"context"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Open checks that the caller may open ino with the open(2) flags given
// and counts the handle, so that an unlink while open keeps the file. Every
// successful Open must be paired with Release.
func (c *Client) Open(ctx context.Context, ino Ino, flags uint32) (*Attr, error) {
	var mask uint32
	switch flags & syscall.O_ACCMODE {
	case syscall.O_RDONLY:
		mask = MayRead
	case syscall.O_WRONLY:
		mask = MayWrite
	case syscall.O_RDWR:
		mask = MayRead | MayWrite
	}
	if flags&syscall.O_TRUNC != 0 {
		mask |= MayWrite
	}
	if mask&MayWrite != 0 {
		if err := c.writable(); err != nil {
			return nil, err
		}
	}
	n, err := c.checked(ctx, ino, mask, func(n *Attr) error {
		if mask&MayWrite == 0 {
			return nil
		}
		if n.Type == store.TypeDir {
			return syscall.EISDIR
		}
		if n.Flags&FlagImmutable != 0 || n.Flags&FlagAppend != 0 && flags&syscall.O_APPEND == 0 {
			return syscall.EPERM
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.mu.open[ino]++
	c.mu.Unlock()
	return n, nil
}

// Release forgets one handle of ino counted by Open. At the last handle of
// a file that was unlinked while open, the file is deleted.
func (c *Client) Release(ctx context.Context, ino Ino) error {
	c.mu.Lock()
	c.mu.open[ino]--
	last := c.mu.open[ino] <= 0
	if last {
		delete(c.mu.open, ino)
	}
	sustained := last && c.mu.sustained[ino]
	c.mu.Unlock()
	if sustained {
		return c.deleteSustained(ctx, ino)
	}
	return nil
}

// Created counts a handle for a file the caller just created, which needs
// no permission check.
func (c *Client) Created(ino Ino) {
	c.mu.Lock()
	c.mu.open[ino]++
	c.mu.Unlock()
}
