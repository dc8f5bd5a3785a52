package meta

import (
	"context"
	"errors"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// CleanStaleSessions cleans up after sessions whose heartbeat is older than
// the session timeout: mounts that died without unmounting. Their locks
// are released and the files they kept open after unlink are deleted
// (unless another session may still hold them: see orphan.go); then the
// session record goes. Every live client runs it periodically;
// running it twice at once is harmless.
func (c *Client) CleanStaleSessions(ctx context.Context) error {
	if c.conf.ReadOnly {
		return nil
	}
	var stale []uint64
	err := c.st.View(ctx, func(tx store.Tx) error {
		ss, err := tx.Sessions()
		if err != nil {
			return err
		}
		stale = stale[:0]
		limit := c.conf.Now().Add(-c.conf.SessionTimeout).Unix()
		for _, s := range ss {
			if s.Sid != c.sid && s.Heartbeat < limit {
				stale = append(stale, s.Sid)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, sid := range stale {
		if err := c.cleanSession(ctx, sid); err != nil {
			return err
		}
		c.log.Info("cleaned up stale session", "sid", sid)
	}
	return nil
}

// cleanSession releases what session sid held and deletes its record.
func (c *Client) cleanSession(ctx context.Context, sid uint64) error {
	var r removal
	err := c.st.Update(ctx, func(tx store.Tx) error {
		r = removal{}
		locked, err := tx.LockedInodes(sid)
		if err != nil {
			return err
		}
		for _, ino := range locked {
			for _, kind := range []byte{store.LockFlock, store.LockPosix} {
				held, err := tx.Locks(ino, kind)
				if err != nil {
					return err
				}
				for _, h := range held {
					if h.Sid == sid {
						tx.SetLock(ino, kind, store.LockRecord{Sid: sid, Owner: h.Owner})
					}
				}
			}
			tx.SetLockedInode(sid, ino, false)
		}
		sustained, err := tx.Sustained(sid)
		if err != nil {
			return err
		}
		var kept map[Ino]bool
		if len(sustained) > 0 {
			if kept, err = keptByOthers(tx, sid); err != nil {
				return err
			}
		}
		for _, ino := range sustained {
			tx.SetSustained(sid, ino, false)
			if kept[ino] {
				continue // an orphan round or another session deletes it
			}
			n, err := tx.Node(ino)
			if errors.Is(err, store.ErrNotFound) {
				continue // already gone
			}
			if err != nil {
				return err
			}
			if n.Nlink == 0 {
				if err := c.destroy(tx, n, &r); err != nil {
					return err
				}
			}
		}
		tx.DeleteSession(sid)
		return nil
	})
	if err == nil {
		c.applyRemoval(&r)
	}
	return err
}
