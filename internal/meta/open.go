package meta

import (
	"context"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Open checks that the caller may open ino with the open(2) flags given
// and counts the handle, so that an unlink while open keeps the file. Every
// successful Open must be paired with Release.
func (c *Client) Open(ctx context.Context, ino Ino, flags uint32) (*Attr, error) {
	mask := openMask(flags)
	if mask&MayWrite != 0 {
		if err := c.writable(); err != nil {
			return nil, err
		}
	}
	gen, keep := c.opened.begin()
	var at time.Time
	if keep {
		at = c.conf.Now()
	}
	n, err := c.checked(ctx, ino, mask, func(n *Attr) error { return openRefused(n, mask, flags) })
	if err != nil {
		return nil, err
	}
	if keep && n.Type == store.TypeFile {
		c.opened.keep(gen, at, n)
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
		delete(c.mu.unnamed, ino) // made by Tmpfile and never linked: it goes now
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
