package meta

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Attach returns a session that works for session sid, which another
// client registered and owns: the metadata server runs one for each
// mount that sends it whole operations, while the mount's own client
// keeps the session alive and does the background work (heartbeats,
// data deletion, trash, cleaning up after dead sessions).
//
// The attached client counts the handles of open files it is told of
// (open, the counts the mount holds, and then Open, Created and
// Release) and takes the files the session sustains and the inodes it
// holds locks on from st, so that one attached again after a server
// restart deletes a sustained file at its last release and finds the
// session's locks. Its background work only flushes its usage counts
// and reloads the volume's settings; Close flushes the counts and leaves
// the session as it is. Deleting data is left queued (conf.DeleteSlice
// is ignored) for the owner, which has the object store.
func Attach(ctx context.Context, st store.Store, sid uint64, open map[Ino]int, conf Config) (*Session, error) {
	if sid == 0 {
		return nil, fmt.Errorf("attach: no session")
	}
	conf.DeleteSlice, conf.RestoreSlice = nil, nil
	conf.Statahead = 0
	c, err := newClient(ctx, st, conf)
	if err != nil {
		return nil, err
	}
	c.sid, c.attached = sid, true
	var sustained, locked []Ino
	if err := c.st.View(ctx, func(tx store.Tx) error {
		var err error
		if sustained, err = tx.Sustained(sid); err != nil {
			return err
		}
		locked, err = tx.LockedInodes(sid)
		return err
	}); err != nil {
		return nil, fmt.Errorf("attach session %d: %w", sid, err)
	}
	c.mu.Lock()
	for ino, n := range open {
		if n > 0 {
			c.mu.open[ino] = n
		}
	}
	for _, ino := range sustained {
		c.mu.sustained[ino] = true
	}
	for _, ino := range locked {
		c.mu.posix[ino] = true
	}
	c.mu.Unlock()
	bg, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.attachedBackground(bg)
	return &Session{Client: c}, nil
}

// attachedBackground is the periodic work of an attached client: usage
// flushes every second and the volume's settings every heartbeat.
func (c *Client) attachedBackground(ctx context.Context) {
	defer close(c.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastBeat := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if ctx.Err() != nil { // see background
			return
		}
		if err := c.flushUsageDetached(ctx); err != nil {
			c.log.Warn("flush usage counters", "err", err)
		}
		if time.Since(lastBeat) >= c.conf.Heartbeat {
			lastBeat = time.Now()
			if err := c.reloadFormat(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("reload volume settings", "err", err)
			}
		}
	}
}
