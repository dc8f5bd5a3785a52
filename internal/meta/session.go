package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// heartbeat stamps this session's record with the time and the files
// the mount has open (for `sluice status`), then reloads the volume's
// settings (ReloadFormat), so that a change by `sluice config` reaches
// every mount within a heartbeat.
func (c *Client) heartbeat(ctx context.Context) error {
	n, open := c.openFiles()
	var figures map[string]uint64
	if c.conf.Figures != nil {
		figures = c.conf.Figures()
	}
	err := c.st.Update(ctx, func(tx store.Tx) error {
		ss, err := tx.Sessions()
		if err != nil {
			return err
		}
		for _, s := range ss {
			if s.Sid != c.sid {
				continue
			}
			s.Heartbeat = c.conf.Now().Unix()
			var rec sessionRecord
			if json.Unmarshal(s.Info, &rec) == nil {
				rec.OpenFiles, rec.Open = n, open
				if figures != nil {
					rec.Figures = figures
				}
				if b, err := json.Marshal(rec); err == nil {
					s.Info = b
				}
			}
			tx.SetSession(s)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := c.reloadFormat(ctx); err != nil {
		return fmt.Errorf("reload volume settings: %w", err)
	}
	return nil
}

// followSettings reloads the volume's settings every heartbeat until ctx
// is cancelled: the background work of a read-only client, which has no
// session to stamp.
func (c *Client) followSettings(ctx context.Context) {
	tick := time.NewTicker(c.conf.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := c.reloadFormat(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("reload volume settings", "err", err)
		}
	}
}

// reloadFormat reads the volume's settings and, when they changed, makes
// them the client's (Format): capacity, inode limit and trash days apply
// at once, and Config.OnFormatChange is called for the rest. Settings
// of another volume (another UUID: the volume was destroyed and a new
// one formatted in its place) are refused, and the client keeps its own.
// Every heartbeat calls it.
func (c *Client) reloadFormat(ctx context.Context) error {
	f, err := Load(ctx, c.st)
	if err != nil {
		return err
	}
	c.reloadMu.Lock()
	defer c.reloadMu.Unlock()
	cur := c.settings.Load()
	if *f == *cur {
		return nil
	}
	if f.UUID != cur.UUID || f.Name != cur.Name {
		return fmt.Errorf("the metadata engine now holds volume %q (UUID %s), not %q (UUID %s): unmount this one", f.Name, f.UUID, cur.Name, cur.UUID)
	}
	c.settings.Store(f)
	c.log.Info("volume settings changed", "volume", f.Name, "capacity", f.Capacity, "inodes", f.Inodes,
		"trashDays", f.TrashDays, "uploadLimitMbps", f.UploadLimit, "downloadLimitMbps", f.DownloadLimit)
	if f.Storage != cur.Storage || f.Bucket != cur.Bucket || f.AccessKey != cur.AccessKey ||
		f.SecretKey != cur.SecretKey || f.SessionToken != cur.SessionToken {
		c.log.Warn("the volume's object storage or its credentials changed; this mount uses the old ones until it is mounted again",
			"volume", f.Name, "storage", f.Storage, "bucket", f.Bucket)
	}
	if c.conf.OnFormatChange != nil {
		cp := *f
		c.conf.OnFormatChange(&cp)
	}
	return nil
}

// SessionLive reports whether a session whose last heartbeat was at beat
// is live at now, by the rule CleanStaleSessions applies with a session
// timeout of timeout: a session silent for longer is stale, and any live
// client cleans up after it.
func SessionLive(beat, now time.Time, timeout time.Duration) bool {
	return beat.Unix() >= now.Add(-timeout).Unix()
}

// cleanStaleSessions cleans up after sessions whose heartbeat is older than
// the session timeout: mounts that died without unmounting. Their locks
// are released and the files they kept open after unlink are deleted
// (unless another session may still hold them: see orphan.go); then the
// session record goes. Every live client runs it periodically;
// running it twice at once is harmless.
func (c *Client) cleanStaleSessions(ctx context.Context) error {
	if c.conf.ReadOnly {
		return nil
	}
	now := c.conf.Now()
	stale, err := c.otherSessions(ctx, func(s store.Session) bool {
		return !SessionLive(time.Unix(s.Heartbeat, 0), now, c.conf.SessionTimeout)
	})
	if err != nil {
		return err
	}
	return c.cleanSessions(ctx, stale, "stale")
}

// otherSessions returns the ids of the sessions other than this client's
// for which match is true.
func (c *Client) otherSessions(ctx context.Context, match func(store.Session) bool) ([]uint64, error) {
	var sids []uint64
	err := c.st.View(ctx, func(tx store.Tx) error {
		ss, err := tx.Sessions()
		if err != nil {
			return err
		}
		sids = sids[:0]
		for _, s := range ss {
			if s.Sid != c.sid && match(s) {
				sids = append(sids, s.Sid)
			}
		}
		return nil
	})
	return sids, err
}

// cleanDeadLocalSessions cleans up, at once, after the sessions whose
// process ran on this host, boot and pid namespace and is gone (see
// hostproc.go), whatever their last heartbeat: a mount killed with
// SIGKILL, or crashed, and mounted again. NewSession runs it right after
// registering its own session, before the caller serves anything.
// Sessions of other hosts, and those it cannot tell about, are left to
// expire by heartbeat (CleanStaleSessions).
func (c *Client) cleanDeadLocalSessions(ctx context.Context) error {
	self, ok := thisProcess()
	if !ok || c.conf.ReadOnly {
		return nil
	}
	dead, err := c.otherSessions(ctx, func(s store.Session) bool {
		var rec sessionRecord
		return json.Unmarshal(s.Info, &rec) == nil && self.gone(c.conf.SessionInfo.Host, rec.SessionInfo)
	})
	if err != nil {
		return err
	}
	return c.cleanSessions(ctx, dead, "dead on this host")
}

// cleanSessions cleans up after each of sids (cleanSession); why says
// for the log what they are. A session this client cannot restore the
// unsynced blocks of is left for one that can.
func (c *Client) cleanSessions(ctx context.Context, sids []uint64, why string) error {
	for _, sid := range sids {
		err := c.cleanSession(ctx, sid)
		if errors.Is(err, errCannotRestore) {
			c.log.Debug("session left for a client with the object store", "sid", sid, "session", why)
			continue
		}
		if err != nil {
			return fmt.Errorf("clean up session %d (%s): %w", sid, why, err)
		}
		c.log.Info("cleaned up session", "sid", sid, "session", why)
	}
	return nil
}

// errCannotRestore tells that a session committed slices unsynced and
// this client cannot check their blocks (no Config.RestoreSlice).
var errCannotRestore = errors.New("session has unsynced slices and this client cannot restore blocks")

// cleanSession releases what session sid held and deletes its record.
// First it restores the blocks of slices sid committed unsynced that a
// crash of its host may have lost. This client's own session must have
// none left: their blocks may still be only in this host's memory, so
// the session stays for whoever cleans it up later.
func (c *Client) cleanSession(ctx context.Context, sid uint64) error {
	unsynced, err := c.restoreUnsynced(ctx, sid)
	if err != nil {
		return err
	}
	var r removal
	err = c.st.Update(ctx, func(tx store.Tx) error {
		r = removal{}
		for _, u := range unsynced {
			tx.SetUnsynced(sid, u, false)
		}
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

// restoreUnsynced restores the blocks of every slice session sid committed
// unsynced that a file still holds, and returns the records to forget.
func (c *Client) restoreUnsynced(ctx context.Context, sid uint64) ([]UnsyncedSlice, error) {
	var unsynced []UnsyncedSlice
	err := c.st.View(ctx, func(tx store.Tx) error {
		var err error
		unsynced, err = tx.Unsynced(sid)
		return err
	})
	if err != nil || len(unsynced) == 0 {
		return nil, err
	}
	if sid == c.sid {
		return nil, fmt.Errorf("session %d: %d slices committed before their blocks were synced: the session stays, and the client that cleans it up restores what a crash lost", sid, len(unsynced))
	}
	if c.conf.RestoreSlice == nil {
		return nil, errCannotRestore
	}
	held := make([]bool, len(unsynced))
	err = c.st.View(ctx, func(tx store.Tx) error {
		keys := make([]store.ChunkKey, len(unsynced))
		for i, u := range unsynced {
			keys[i] = store.ChunkKey{Ino: u.Ino, Idx: u.Idx}
		}
		lists, err := store.ReadChunks(tx, keys)
		if err != nil {
			return err
		}
		for i, u := range unsynced {
			held[i] = slices.ContainsFunc(lists[i], func(s Slice) bool { return s.Id == u.Id && s.Size == u.Size })
			if !held[i] {
				extra, err := tx.SliceRef(u.Id, u.Size)
				if err != nil {
					return err
				}
				held[i] = extra > 0 // a copy of the file holds it still
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("session %d: unsynced slices: %w", sid, err)
	}
	for i, u := range unsynced {
		if !held[i] {
			continue // overwritten, compacted or deleted since
		}
		lost, err := c.conf.RestoreSlice(ctx, u.Id, u.Size)
		if err != nil {
			return nil, fmt.Errorf("session %d: restore unsynced slice %d of inode %d: %w", sid, u.Id, u.Ino, err)
		}
		if lost > 0 {
			c.log.Warn("blocks written before a crash were lost; they read as zeros",
				"sid", sid, "inode", u.Ino, "chunk", u.Idx, "slice", u.Id, "blocks", lost)
		}
	}
	return unsynced, nil
}

// Session is one mount's session on a volume, as NewSession opens it (or
// Attach, on the metadata server): its Client, which runs the POSIX
// operations (Ops) and is embedded, so that a session is used as its
// client, and the services that keep the session and the volume, which
// are the Session's own methods: the settings (Format, ReloadFormat), the
// session's identity and engine (Sid, Store), the deletion of data
// (FlushDeletions, DeletionStats, DeleteReleased), orphans, stale
// sessions and the trash, slices stored unsynced (Synced), compaction
// (FileChunks, CompactChunk), the backup lease, the bound of calls made
// outside the client's transactions (Guard, GuardWait), and the caches a
// client of the metadata server keeps in step with it (Caches). Close
// ends it.
type Session struct {
	*Client
}

// Sid returns the session's id (0 for a read-only session).
func (s *Session) Sid() uint64 { return s.sid }

// Store returns the engine the session works on.
func (s *Session) Store() store.Store { return s.st }

// Format returns the volume settings as the session last reloaded them
// (on every heartbeat); callers must not change them.
func (s *Session) Format() *Format { return s.current() }

// ReloadFormat reads the volume's settings and, when they changed, makes
// them the session's (Format): capacity, inode limit and trash days
// apply at once, and Config.OnFormatChange is called for the rest.
// Settings of another volume (another UUID: the volume was destroyed and
// a new one formatted in its place) are refused, and the session keeps
// its own. Every heartbeat calls it.
func (s *Session) ReloadFormat(ctx context.Context) error { return s.reloadFormat(ctx) }

// CollectOrphans does this session's part of the orphan rounds
// (orphan.go): it answers a new round, starts one when orphans wait and
// it has none pending, and finishes its pending round once every live
// session has answered. The background calls it every second; calling it
// more often is harmless.
func (s *Session) CollectOrphans(ctx context.Context) error { return s.collectOrphans(ctx) }

// CleanStaleSessions cleans up after sessions whose heartbeat is older
// than the session timeout: mounts that died without unmounting. Their
// locks are released and the files they kept open after unlink deleted
// (unless another session may still hold them); then the session record
// goes. Every live session runs it periodically; running it twice at
// once is harmless.
func (s *Session) CleanStaleSessions(ctx context.Context) error { return s.cleanStaleSessions(ctx) }

// CleanTrash deletes the trash hour directories older than the volume's
// TrashDays and the files in them, now. Mounts run it about once an hour
// through a lease (ExpireTrash), so that one session of the volume does
// it at a time.
func (s *Session) CleanTrash(ctx context.Context) error { return s.cleanTrash(ctx) }

// ExpireTrash reloads the volume's settings, then runs CleanTrash when it
// is due and this session wins the volume's lease for it, and reports
// whether it ran. Every mount calls it about once a minute.
func (s *Session) ExpireTrash(ctx context.Context) (bool, error) { return s.expireTrash(ctx) }
