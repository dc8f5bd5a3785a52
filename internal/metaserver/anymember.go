package metaserver

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/sluice"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/wire"
)

// Reads from any member. A mount whose URL says read=follower sends the
// calls that depend on the records alone (wire.Op.AnyMember: lookup,
// getattr, readdir, a chunk's slices, …) to a member that need not lead,
// as wire.OpReadCall with the least index the answer must reflect: the
// highest the mount has seen in any reply, so that it reads its own
// changes and never goes back in time. The member answers from its own
// published records once they reach that index, through one POSIX core
// of its own (the reader), attached as a session no mount has; one that
// does not get there within readWait sends the client to the leader.
// How stale an answer may be is the client's to bound: it asks the
// leader for its index (wire.OpIndex) often enough (see package sluice).

// readerSession is the session the reader attaches as: session ids are
// handed out counting up from 1, so no mount has it, and it holds no
// handles or locks.
const readerSession = math.MaxUint64

// readWait bounds how long a member waits to apply the index a read
// asks for before it sends the client to the leader. A follower learns
// that an entry is committed with the leader's next message, at most
// twice Raft's CommitTimeout later when the group is idle.
const readWait = 20 * time.Millisecond

// commitTimeout is Raft's CommitTimeout: how long an idle leader waits
// before it tells the followers its commit index. Raft's default, 50 ms,
// would keep a mount's reads of what it just wrote from followers for up
// to 100 ms; an empty message every 5-10 ms to each follower costs
// nothing measurable.
const commitTimeout = 5 * time.Millisecond

// reader is a member's POSIX core for reads from any member.
type reader struct {
	mu sync.Mutex
	st store.Store
	mc *meta.Session
}

// readerTarget returns the reader, attaching it on first use: the
// volume's settings must be in the records by then.
func (s *Server) readerTarget(ctx context.Context) (wire.Target, error) {
	r := &s.reader
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.closed.Load() {
		return nil, errClosed
	}
	if r.mc != nil {
		return r.mc, nil
	}
	if r.st == nil {
		// A connection of its own whose snapshots are this member's
		// published records, leader or not (conn.anyMember).
		var id [8]byte
		rand.Read(id[:])
		l := &localConn{waiting: map[uint64]chan []byte{}}
		l.c = &conn{s: s, sink: l.deliver, done: make(chan struct{}), anyMember: true}
		db := sluice.NewLocal("sluice meta-server reader "+s.opts.Dir, binary.BigEndian.Uint64(id[:]), l.call)
		r.st = kvstore.New(db)
	}
	mc, err := meta.Attach(ctx, r.st, readerSession, nil, meta.Config{Logger: s.log})
	if err != nil {
		return nil, fmt.Errorf("reader: %w", err)
	}
	r.mc = mc
	return mc, nil
}

// closeReader stops the reader.
func (s *Server) closeReader(ctx context.Context) {
	r := &s.reader
	r.mu.Lock()
	mc := r.mc
	r.mc = nil
	r.mu.Unlock()
	if mc != nil {
		if err := mc.Close(ctx); err != nil {
			s.log.Warn("close reader", "err", err)
		}
	}
}

// waitPublished waits until the published records reach index, for at
// most d, and reports whether they did.
func (s *Server) waitPublished(index uint64, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		if s.pub.Load().index >= index {
			return true
		}
		ch := s.pubWake.Load()
		if ch == nil {
			nc := make(chan struct{})
			if !s.pubWake.CompareAndSwap(nil, &nc) {
				continue
			}
			ch = &nc
		}
		// publish stores the state before it takes the channel: either
		// this sees the new state, or publish closes ch.
		if s.pub.Load().index >= index {
			return true
		}
		select {
		case <-*ch:
		case <-timer.C:
			return s.pub.Load().index >= index
		}
	}
}

// wakePublished wakes those waiting in waitPublished; publish calls it
// after it stored a new state.
func (s *Server) wakePublished() {
	if ch := s.pubWake.Swap(nil); ch != nil {
		close(*ch)
	}
}

// serveReadCall serves an OpReadCall on c: on the goroutine reading c's
// requests when the records are there already, else on one of its own
// that waits for them.
func (c *conn) serveReadCall(f wire.Frame, start time.Time) {
	s := c.s
	r := wire.NewReader(f.Body)
	least := r.U64()
	// The session, client, call number and flags of the OpCall: the
	// answer depends on none of them.
	r.U64()
	r.U64()
	r.U64()
	r.Byte()
	if r.Err() != nil {
		c.fail(f.ID, r.Err())
		return
	}
	call, err := wire.Decode(r)
	if err != nil {
		c.fail(f.ID, err)
		return
	}
	if !call.AnyMember {
		c.fail(f.ID, fmt.Errorf("%s is answered by the leader only: %w", call.Name, wire.ErrFrame))
		return
	}
	id := f.ID
	serve := func(wake bool) {
		t, err := s.readerTarget(context.Background())
		if err != nil {
			s.log.Warn("read from any member", "err", err)
			c.reply(id, wire.StatusNotLeader, func(b *wire.Buf) { b.Bytes(nil) })
			return
		}
		status, body := runCall(context.Background(), t, call.Run)
		s.anyReads.Add(1)
		s.m.observe("any_"+call.Name, start)
		c.replyCall(id, status, body, wake)
	}
	if s.pub.Load().index >= least {
		serve(false)
		return
	}
	go func() {
		if s.waitPublished(least, readWait) {
			serve(false)
		} else {
			s.m.readsBehind.Inc()
			c.reply(id, wire.StatusNotLeader, func(b *wire.Buf) { b.Bytes(nil) })
		}
		c.flush()
	}()
}

// serveIndex answers an OpIndex: the published index, once the member
// has confirmed it leads (readIndex).
func (c *conn) serveIndex(id uint64) {
	s := c.s
	answer := func() {
		idx := s.pub.Load().index
		c.reply(id, wire.StatusOK, func(b *wire.Buf) { b.U64(idx) })
	}
	if s.rep == nil {
		answer()
		return
	}
	go func() {
		if err := s.readIndex(); err != nil {
			c.reply(id, wire.StatusNotLeader, func(b *wire.Buf) { b.Bytes(nil) })
		} else {
			answer()
		}
		c.flush()
	}()
}
