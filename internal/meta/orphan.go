package meta

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Files whose last name goes while another mount may hold them open.
//
// Mounts do not record their opens in the engine: that would cost a write
// at every open and close. A mount knows only its own open files, so when
// the last name of a file goes (unlink, rename over it, trash expiry) and
// other live sessions exist, the file is not deleted but becomes an
// orphan: its node stays with no link, listed among the sustained inodes
// of the reserved session id 0, and it lives until every live session has
// said whether it holds it open:
//
//  1. A client that finds orphans starts a round: in one transaction it
//     increments the orphanRound counter and notes the orphans listed.
//  2. Every session that sees a round newer than the one it last answered
//     answers it, in one transaction: a sustained record of its own for
//     each listed orphan it holds open, and the round in its session
//     record.
//  3. When every live session has answered that round, the client that
//     started it takes the orphans it noted off the list and deletes
//     those no session sustains. A sustained one is deleted by the last
//     session that closes it, ends, or expires (CleanStaleSessions).
//
// Every client runs CollectOrphans each second, so an orphan goes a few
// seconds after its name, once every live mount has answered. A mount that
// dies holding one stops answering; once its session expires it no longer
// counts, its records are dropped, and the next round deletes the file. A
// new session starts as having answered the current round: it cannot hold
// a file that had no name when it began. Read-only mounts have no session,
// so a file open only there is not kept.

// orphanSid is the session id under which orphans are listed; sessions
// are numbered from 1.
const orphanSid = 0

const counterOrphanRound = "orphanRound"

// orphanBatch bounds the orphans one transaction deletes (engines such as
// etcd bound the operations of a transaction).
const orphanBatch = 32

// sessionRecord is what the Info of a session record holds.
type sessionRecord struct {
	SessionInfo
	// OrphanAck is the last orphan round the session answered.
	OrphanAck int64 `json:",omitempty"`
}

// orphanRound is a round this client started and still has to finish.
type orphanRound struct {
	round int64
	inos  []Ino
}

// sessionsSeen is what this client last saw of the session list: the
// nextSession counter when it looked, and whether sessions other than its
// own were registered. A new session increments the counter, so while
// the counter is unchanged the answer can only have gone from true to
// false (a session ended), which errs on the safe side.
type sessionsSeen struct {
	next   int64
	others bool
}

// othersMayHold reports whether sessions other than this client's are
// registered (expired ones included, until they are cleaned up). It reads
// the nextSession counter, which Redis serves from its client-side cache,
// and reads the session list only when the counter moved since the client
// last looked; r caches the answer for the transaction.
func (c *Client) othersMayHold(tx store.Tx, r *removal) (bool, error) {
	if r.others != 0 {
		return r.others > 0, nil
	}
	next, err := tx.Counter(CounterNextSession)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	seen := c.mu.sessions
	c.mu.Unlock()
	if seen == nil || seen.next != next {
		if seen, err = c.readSessions(tx, next); err != nil {
			return false, err
		}
		r.sessions = seen
	}
	r.others = -1
	if seen.others {
		r.others = 1
	}
	return seen.others, nil
}

// readSessions reads the session list of a transaction that read next
// from the nextSession counter first.
func (c *Client) readSessions(tx store.Tx, next int64) (*sessionsSeen, error) {
	ss, err := tx.Sessions()
	if err != nil {
		return nil, err
	}
	seen := &sessionsSeen{next: next}
	for _, s := range ss {
		if s.Sid != c.sid {
			seen.others = true
		}
	}
	return seen, nil
}

// refreshSessions updates what the client saw of the session list when
// it saw other sessions, so that once they have ended, the last name of
// a file goes with its file at once again. (A new session moves the
// counter, which othersMayHold checks: seeing none needs no refresh.)
func (c *Client) refreshSessions(ctx context.Context) error {
	c.mu.Lock()
	seen := c.mu.sessions
	c.mu.Unlock()
	if seen != nil && !seen.others {
		return nil
	}
	// An Update, though it writes nothing: its reads are checked at
	// commit, so the counter and the list belong together.
	err := c.st.Update(ctx, func(tx store.Tx) error {
		next, err := tx.Counter(CounterNextSession)
		if err != nil {
			return err
		}
		seen, err = c.readSessions(tx, next)
		return err
	})
	if err == nil {
		c.setSessionsSeen(seen)
	}
	return err
}

func (c *Client) setSessionsSeen(seen *sessionsSeen) {
	if seen == nil {
		return
	}
	c.mu.Lock()
	if c.mu.sessions == nil || seen.next >= c.mu.sessions.next {
		c.mu.sessions = seen
	}
	c.mu.Unlock()
}

// keptByOthers returns the inodes sustained by a session other than sid,
// and (unless sid is orphanSid) those listed as orphans.
func keptByOthers(tx store.Tx, sid uint64) (map[Ino]bool, error) {
	ss, err := tx.Sessions()
	if err != nil {
		return nil, err
	}
	var ids []uint64
	if sid != orphanSid {
		ids = append(ids, orphanSid)
	}
	for _, s := range ss {
		if s.Sid != sid {
			ids = append(ids, s.Sid)
		}
	}
	kept := map[Ino]bool{}
	for _, id := range ids {
		inos, err := tx.Sustained(id)
		if err != nil {
			return nil, err
		}
		for _, ino := range inos {
			kept[ino] = true
		}
	}
	return kept, nil
}

// collectOrphans does this client's part of the orphan rounds described
// above: it answers a new round, starts one when orphans wait and it has
// none pending, and finishes its pending round once every live session has
// answered. The background calls it every second; calling it more often is
// harmless.
func (c *Client) collectOrphans(ctx context.Context) error {
	if c.conf.ReadOnly {
		return nil
	}
	if err := c.refreshSessions(ctx); err != nil {
		return err
	}
	c.orphanMu.Lock()
	defer c.orphanMu.Unlock()
	var round int64
	var waiting bool
	err := c.st.View(ctx, func(tx store.Tx) error {
		var err error
		if round, err = tx.Counter(counterOrphanRound); err != nil {
			return err
		}
		inos, err := tx.Sustained(orphanSid)
		waiting = len(inos) > 0
		return err
	})
	if err != nil {
		return err
	}
	switch {
	case c.orphanPending == nil && waiting:
		if err := c.answerOrphans(ctx, true); err != nil {
			return err
		}
	case round > c.orphanAcked:
		if err := c.answerOrphans(ctx, false); err != nil {
			return err
		}
	}
	if c.orphanPending == nil {
		return nil
	}
	return c.finishOrphanRound(ctx)
}

// answerOrphans answers the current round (with start, a new one it then
// owns): it sustains the listed orphans this client holds open and records
// the round in its session. Called with orphanMu held.
func (c *Client) answerOrphans(ctx context.Context, start bool) error {
	var round int64
	var listed, held []Ino
	err := c.st.Update(ctx, func(tx store.Tx) error {
		held = held[:0]
		var err error
		if round, err = tx.Counter(counterOrphanRound); err != nil {
			return err
		}
		if start {
			round++
			tx.SetCounter(counterOrphanRound, round)
		}
		if listed, err = tx.Sustained(orphanSid); err != nil {
			return err
		}
		for _, ino := range listed {
			if c.isOpen(ino) {
				tx.SetSustained(c.sid, ino, true)
				held = append(held, ino)
			}
		}
		return c.setOrphanAck(tx, round)
	})
	if err != nil {
		return err
	}
	c.orphanAcked = round
	if start {
		c.orphanPending = &orphanRound{round: round, inos: listed}
	}
	// A handle closed while the transaction ran found no sustained mark;
	// the file then goes now.
	var closed []Ino
	c.mu.Lock()
	for _, ino := range held {
		if c.mu.open[ino] > 0 {
			c.mu.sustained[ino] = true
		} else {
			closed = append(closed, ino)
		}
	}
	c.mu.Unlock()
	for _, ino := range closed {
		if err := c.deleteSustained(ctx, ino); err != nil {
			return err
		}
	}
	return nil
}

// setOrphanAck records in this client's session record that it answered
// round. A session already cleaned up as stale has no record to update.
func (c *Client) setOrphanAck(tx store.Tx, round int64) error {
	ss, err := tx.Sessions()
	if err != nil {
		return err
	}
	for _, s := range ss {
		if s.Sid != c.sid {
			continue
		}
		var rec sessionRecord
		_ = json.Unmarshal(s.Info, &rec) // an unreadable Info is rewritten
		rec.OrphanAck = round
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		s.Info = b
		tx.SetSession(s)
	}
	return nil
}

// finishOrphanRound deletes the orphans of the pending round, in batches,
// once every live session has answered it. Called with orphanMu held.
func (c *Client) finishOrphanRound(ctx context.Context) error {
	p := c.orphanPending
	for len(p.inos) > 0 {
		batch := p.inos[:min(len(p.inos), orphanBatch)]
		var answered bool
		var r removal
		err := c.st.Update(ctx, func(tx store.Tx) error {
			r = removal{}
			var err error
			if answered, err = c.allAnswered(tx, p.round); err != nil || !answered {
				return err
			}
			kept, err := keptByOthers(tx, orphanSid)
			if err != nil {
				return err
			}
			// Another client's round may have handled some already:
			// then a session sustains them, or they are gone.
			for _, ino := range batch {
				tx.SetSustained(orphanSid, ino, false)
				if kept[ino] {
					continue // the sessions holding it delete it
				}
				n, err := tx.Node(ino)
				if errors.Is(err, store.ErrNotFound) {
					continue
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
			return nil
		})
		if err != nil || !answered {
			return err
		}
		c.applyRemoval(&r)
		p.inos = p.inos[len(batch):]
	}
	c.orphanPending = nil
	return nil
}

// allAnswered reports whether every live session has answered round.
func (c *Client) allAnswered(tx store.Tx, round int64) (bool, error) {
	ss, err := tx.Sessions()
	if err != nil {
		return false, err
	}
	limit := c.conf.Now().Add(-c.conf.SessionTimeout).Unix()
	for _, s := range ss {
		if s.Heartbeat < limit {
			continue // expired: it no longer counts
		}
		var rec sessionRecord
		if err := json.Unmarshal(s.Info, &rec); err != nil || rec.OrphanAck < round {
			return false, nil
		}
	}
	return true, nil
}
