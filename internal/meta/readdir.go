package meta

import (
	"context"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Entry is one directory entry returned by ReadDir.
type Entry struct {
	Name []byte
	Ino  Ino
	Type uint8
	Attr *Attr // with plus only; nil if the inode vanished meanwhile
}

// ReadDir returns up to limit entries of directory ino whose names sort
// after after (from the start when after is nil). With plus it also
// returns their attributes, fetched in one batch. Directories are read in
// pages so that a huge directory is never loaded whole.
func (c *Client) ReadDir(ctx context.Context, ino Ino, after []byte, limit int, plus bool) ([]Entry, error) {
	var out []Entry
	err := c.st.View(ctx, func(tx store.Tx) error {
		es, err := tx.Edges(ino, after, limit)
		if err != nil {
			return err
		}
		out = make([]Entry, len(es))
		for i, e := range es {
			out[i] = Entry{Name: e.Name, Ino: e.Ino, Type: e.Type}
		}
		if !plus || len(es) == 0 {
			return nil
		}
		inos := make([]Ino, len(es))
		for i, e := range es {
			inos[i] = e.Ino
		}
		nodes, err := tx.Nodes(inos)
		if err != nil {
			return err
		}
		for i := range out {
			out[i].Attr = nodes[i]
		}
		return nil
	})
	return out, err
}

// OpenDir checks that ino is a directory the caller may list.
func (c *Client) OpenDir(ctx context.Context, ino Ino) (*Attr, error) {
	gen, keep := c.opened.begin()
	var at time.Time
	if keep {
		at = c.conf.Now()
	}
	n, err := c.checked(ctx, ino, MayRead, func(n *Attr) error {
		if n.Type != store.TypeDir {
			return syscall.ENOTDIR
		}
		return nil
	})
	if err == nil && keep {
		c.opened.keep(gen, at, n)
	}
	return n, err
}
