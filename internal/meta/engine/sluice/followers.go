package sluice

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicefs/sluice/internal/wire"
)

// Reads from followers. With the URL's read=follower, the calls of a
// mount that depend on the records alone (wire.Op.AnyMember: lookup,
// getattr, readdir, a chunk's slices, …) go to one member of the group
// other than the leader, as wire.OpReadCall; everything else, writes and
// locks above all, still goes to the leader. The member answers from
// its own copy of the records, once it has applied the index the call
// names: the highest this client saw in any reply (known). So a mount
// reads what it changed itself, and never sees the records go back in
// time, whichever member answers.
//
// How stale an answer may be is bounded here: the client asks the leader
// for its index (wire.OpIndex, a read index) whenever the last answer is
// older than half the bound, and while it is older than the bound, reads
// go to the leader. An answer therefore holds every change acknowledged
// to anyone up to staleness before the read was sent.
//
// A member that does not answer within stallAfter, answers badly, or
// has not applied the index within its wait (metaserver's readWait) is
// left alone for followerPause; its reads go to the leader meanwhile.

// defaultStaleness is the bound of read=follower when the URL gives none.
const defaultStaleness = time.Second

// readAfterChange is how long after a reply of the leader raised the
// index this client knows, its reads stay with the leader, unless a
// follower has answered with that index already: a follower learns that
// an entry is committed with the leader's next message, 5-10 ms later
// when the group is idle, and a read sent before that would only wait.
const readAfterChange = 20 * time.Millisecond

// followerPause is how long reads stay with the leader after a follower
// failed to answer one.
const followerPause = time.Second

// followers sends the reads of any member to a follower.
type followers struct {
	d     *DB
	bound time.Duration

	known   atomic.Uint64 // the highest index any reply carried
	ahead   atomic.Uint64 // the highest index a follower's reply carried
	raised  atomic.Int64  // unix ns: a leader's reply last raised known
	fresh   atomic.Int64  // unix ns: the last OpIndex answered was sent
	probing atomic.Bool

	mu     sync.Mutex // guards the rest
	member int        // index in d.addrs of the member read from; -1: none chosen
	c      *conn
	paused time.Time // reads go to the leader until then
	closed bool
}

// readsFrom reads the URL's read and staleness.
func (d *DB) readsFrom(q url.Values) error {
	switch v := q.Get("read"); v {
	case "", "leader":
		if q.Get("staleness") != "" {
			return fmt.Errorf("staleness bounds read=follower only")
		}
		return nil
	case "follower":
	default:
		return fmt.Errorf("read %q: want leader (every read is linearizable) or follower (reads from any member, at most staleness old)", v)
	}
	if !d.serverOps {
		return fmt.Errorf("read=follower needs ops=server: a mount's transactions read from the leader")
	}
	bound := defaultStaleness
	if v := q.Get("staleness"); v != "" {
		var err error
		if bound, err = time.ParseDuration(v); err != nil || bound < 10*time.Millisecond {
			return fmt.Errorf("staleness %q: want a duration of at least 10ms, such as 1s", v)
		}
	}
	d.reads = &followers{d: d, bound: bound, member: -1}
	return nil
}

// ReadCall sends an OpCall of an operation any member may answer
// (wire.Op.AnyMember): with read=follower, to a follower when one can
// answer it now, else to the leader, as Call does.
func (d *DB) ReadCall(ctx context.Context, fill func(*wire.Buf)) (wire.Frame, error) {
	if d.reads != nil {
		if f, ok := d.reads.call(ctx, fill); ok {
			return f, nil
		}
	}
	return d.Call(ctx, wire.OpCall, fill)
}

// seen notes the index a reply carried; fromAny: a follower's.
func (r *followers) seen(index uint64, fromAny bool) {
	if fromAny {
		raise(&r.ahead, index)
	}
	if raise(&r.known, index) && !fromAny {
		r.raised.Store(time.Now().UnixNano())
	}
}

// raise makes v at least x and reports whether it grew.
func raise(v *atomic.Uint64, x uint64) bool {
	for {
		cur := v.Load()
		if x <= cur {
			return false
		}
		if v.CompareAndSwap(cur, x) {
			return true
		}
	}
}

// call sends a read to the follower and reports whether it answered.
func (r *followers) call(ctx context.Context, fill func(*wire.Buf)) (wire.Frame, bool) {
	now := time.Now()
	age := now.Sub(time.Unix(0, r.fresh.Load()))
	if age > r.bound/2 {
		r.probe()
	}
	if age > r.bound {
		return wire.Frame{}, false
	}
	least := r.known.Load()
	if least > r.ahead.Load() && now.UnixNano()-r.raised.Load() < int64(readAfterChange) {
		return wire.Frame{}, false
	}
	c := r.conn(ctx)
	if c == nil {
		return wire.Frame{}, false
	}
	cctx, cancel := context.WithTimeout(ctx, stallAfter)
	f, err := c.call(cctx, wire.OpReadCall, nil, func(b *wire.Buf) {
		b.U64(least)
		fill(b)
	})
	cancel()
	if err == nil && (f.Kind == wire.StatusOK || f.Kind == wire.StatusErrno) {
		if f, err = r.d.indexed(f, true); err == nil {
			return f, true
		}
	}
	if ctx.Err() == nil {
		// Down, stalled, behind, or answering badly: the leader answers
		// for a while.
		r.pause(c, err != nil || f.Kind != wire.StatusNotLeader)
	}
	return wire.Frame{}, false
}

// probe asks the leader for its index, unless a probe runs already.
func (r *followers) probe() {
	if !r.probing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer r.probing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), r.d.timeout)
		defer cancel()
		sent := time.Now()
		f, err := r.d.do(ctx, wire.OpIndex, nil)
		if err != nil || f.Kind != wire.StatusOK {
			return
		}
		rd := wire.NewReader(f.Body)
		index := rd.U64()
		if rd.Done() != nil {
			return
		}
		r.seen(index, false)
		r.fresh.Store(sent.UnixNano())
	}()
}

// conn returns the connection to the follower, dialling it when needed;
// nil while reads are paused or when it cannot be dialled.
func (r *followers) conn(ctx context.Context) *conn {
	r.mu.Lock()
	if r.closed || time.Now().Before(r.paused) {
		r.mu.Unlock()
		return nil
	}
	if r.c != nil && !r.c.isBroken() {
		c := r.c
		r.mu.Unlock()
		return c
	}
	if r.member < 0 {
		r.member = r.pick()
	}
	ep := r.d.endpoint
	ep.addr, ep.anyMember = r.d.addrs[r.member], true
	r.mu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, stallAfter)
	c, err := dial(dctx, ep)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			r.pause(nil, true)
		}
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		c.close()
		return nil
	}
	if r.c != nil && !r.c.isBroken() {
		c.close() // another caller dialled first
		return r.c
	}
	r.c = c
	return c
}

// pick chooses a member to read from: one at random other than the one
// that led last, so that the mounts of a volume spread their reads.
func (r *followers) pick() int {
	n := len(r.d.addrs)
	if n == 1 {
		return 0
	}
	leader := int(r.d.leader.Load())
	return (leader + 1 + rand.IntN(n-1)) % n
}

// pause sends reads to the leader for followerPause; another, when set,
// has the next read go to another member (c failed, rather than being
// behind).
func (r *followers) pause(c *conn, another bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paused = time.Now().Add(followerPause)
	if another {
		if c != nil {
			c.close()
			if r.c == c {
				r.c = nil
			}
		}
		r.member = -1
	}
}

func (r *followers) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.c != nil {
		r.c.close()
		r.c = nil
	}
}
