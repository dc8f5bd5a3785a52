package meta

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Atime modes: when reading a file or listing a directory updates its
// access time.
const (
	// AtimeNone never updates atime on reads (the default: no write per read).
	AtimeNone = "noatime"
	// AtimeRelative updates atime when it is not newer than mtime or ctime,
	// or is more than a day old, as Linux's relatime does.
	AtimeRelative = "relatime"
	// AtimeStrict updates atime on every access the vfs reports.
	AtimeStrict = "strictatime"
)

// ParseAtimeMode checks an atime mode name.
func ParseAtimeMode(s string) (string, error) {
	switch s {
	case "", AtimeNone:
		return AtimeNone, nil
	case AtimeRelative, AtimeStrict:
		return s, nil
	}
	return "", fmt.Errorf("invalid atime mode %q (use noatime, relatime or strictatime)", s)
}

// AtimeDue reports whether mode records an access at time now to a node
// whose attributes are n.
func AtimeDue(mode string, n *Attr, now time.Time) bool {
	switch mode {
	case AtimeStrict:
		return true
	case AtimeRelative:
		at := time.Unix(n.Atime, int64(n.Atimensec))
		return !at.After(time.Unix(n.Mtime, int64(n.Mtimensec))) ||
			!at.After(time.Unix(n.Ctime, int64(n.Ctimensec))) ||
			now.Sub(at) > 24*time.Hour
	}
	return false
}

// RecordsAtime reports whether the mount's atime mode records reads at
// all: false for noatime and on a read-only mount.
func (c *Client) RecordsAtime() bool {
	return !c.conf.ReadOnly && c.conf.AtimeMode != AtimeNone && c.conf.AtimeMode != ""
}

// TouchAtime records an access to ino (a read of a file or a listing of a
// directory) according to the mount's atime mode. a is the attributes the
// caller holds, to skip the transaction when the mode says no.
func (c *Client) TouchAtime(ctx context.Context, ino Ino, a *Attr) error {
	if !c.RecordsAtime() {
		return nil
	}
	now := c.conf.Now()
	if a != nil && !AtimeDue(c.conf.AtimeMode, a, now) {
		return nil
	}
	c.recent.forget(ino) // see recentDirs: before, and after the change commits
	defer c.recent.forget(ino)
	return c.st.Update(ctx, func(tx store.Tx) error {
		n, err := node(tx, ino)
		if err != nil {
			return err
		}
		if n.Flags&FlagImmutable != 0 || !AtimeDue(c.conf.AtimeMode, n, now) {
			return nil
		}
		n.Atime, n.Atimensec = now.Unix(), uint32(now.Nanosecond())
		tx.SetNode(n)
		return nil
	})
}
