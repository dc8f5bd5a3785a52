// Package remote runs a mount's metadata operations on the in-memory
// metadata server: Client is the mount's side, an implementation of
// meta.Ops that sends each operation (lookup, create, rename, a slice's
// commit, a lock, …) to the server in one request. What each operation
// sends and gets back, and what the server runs, is its entry in the
// operation table of package wire; this package adds what the mount's
// side keeps: the handles counted open, the inodes locked, and the
// session's caches kept in step (meta.Caches). The POSIX core is the
// same code either way; only where it runs changes: next to the
// records, so that an operation costs one round trip instead of one per
// read and commit of its transactions.
//
// The mount's own meta.Session still owns the session (heartbeats,
// deletion of data, cleaning up after dead sessions), answers what
// needs no engine (PreviewAttr, XattrSupported, NoXattrs) and hands out
// slice ids from the batches it reserves (wire.Local).
//
// Retries. A call carries the client's id and a number; the server
// remembers the replies of the last calls of each session, so a call
// sent again after its connection broke is answered, not run twice.
// When the server no longer has the session attached (it restarted, or
// dropped a session idle for long), the client attaches it again with
// the handles it holds open, and the server takes the rest of the
// session's state (files kept open after unlink, inodes with locks) from
// the records. A call that the server ran before a restart and whose
// reply was lost is answered from the records when its operation is
// wire.ClassRecorded, and runs again otherwise.
package remote

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/wire"
)

// Transport carries requests to the metadata server: the connection of
// the volume's engine (meta/engine/sluice), which offers it when the
// server is to run the mount's operations (Server).
type Transport interface {
	// Call sends a request of kind op whose body fill appends, and
	// returns the reply.
	Call(ctx context.Context, op byte, fill func(*wire.Buf)) (wire.Frame, error)
	// Client returns the id the server knows this process by.
	Client() uint64
}

// Server is the optional capability of an engine's database that can
// run a mount's operations on the metadata server: ServerOps reports
// whether the volume's URL asks for it.
type Server interface {
	Transport
	ServerOps() bool
}

// AnyMember is the optional capability of a Transport that may send a
// call of an operation any member answers (wire.Op.AnyMember) to a
// member of a replicated group other than the leader: the engine's URL
// says read=follower.
type AnyMember interface {
	// ReadCall sends an OpCall's body as Call does, to whichever member
	// answers it.
	ReadCall(ctx context.Context, fill func(*wire.Buf)) (wire.Frame, error)
}

// Local is what the Client needs of the mount's own session: its id,
// the bound of its calls, its caches, and the operations it answers
// without the server (wire.Local).
type Local interface {
	Sid() uint64
	Guard(ctx context.Context, call func(context.Context) error) error
	GuardWait(ctx context.Context, call func(context.Context) error) error
	Caches() meta.Caches
	PreviewAttr(ctx context.Context, a *meta.Attr, mask uint32, in *meta.Attr) (*meta.Attr, bool)
	XattrSupported(name string) bool
	NoXattrs(a *meta.Attr) bool
	NewSliceID(ctx context.Context) (uint64, error)
	meta.LookerAhead
}

var _ Local = (*meta.Session)(nil)

// Client is a mount's metadata service on the metadata server.
type Client struct {
	db     Transport
	local  Local
	caches meta.Caches
	sid    uint64
	atime  string
	reuse  time.Duration
	seq    atomic.Uint64

	// attach is held for reading by each call from its request to the
	// handles it counts, and for writing while the session is attached
	// again, so that the handles sent then are exactly those the server
	// counted.
	attach sync.RWMutex
	mu     sync.Mutex // guards open and posix
	open   map[meta.Ino]int
	// posix lists the inodes on which this session asked for a POSIX
	// lock: only there can ReleaseLocks find records to drop.
	posix map[meta.Ino]bool

	observe func(method string, d time.Duration)
}

// Options tune a Client.
type Options struct {
	// AtimeMode and DirAttrReuse are the session's client's
	// (meta.Config).
	AtimeMode    string
	DirAttrReuse time.Duration
	// Observe, when set, is told of each call: its method and how long
	// it took.
	Observe func(method string, d time.Duration)
}

// New attaches the session of local, a client of the volume on db's
// server, and returns the Client that sends the session's operations to
// the server.
func New(ctx context.Context, db Transport, local Local, o Options) (*Client, error) {
	c := &Client{db: db, local: local, caches: local.Caches(), sid: local.Sid(), atime: o.AtimeMode, reuse: o.DirAttrReuse, open: map[meta.Ino]int{}, posix: map[meta.Ino]bool{}, observe: o.Observe}
	if c.sid == 0 {
		return nil, fmt.Errorf("remote operations need a session (a read-only mount has none)")
	}
	if err := c.reattach(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// reattach attaches the session with the handles counted open. The
// caller holds c.attach for writing, or is New.
func (c *Client) reattach(ctx context.Context) error {
	c.mu.Lock()
	open := make(map[meta.Ino]int, len(c.open))
	for ino, n := range c.open {
		open[ino] = n
	}
	c.mu.Unlock()
	f, err := c.db.Call(ctx, wire.OpAttach, func(b *wire.Buf) {
		b.U64(c.sid)
		b.U64(c.db.Client())
		b.Bytes([]byte(c.atime))
		b.Uvarint(uint64(max(c.reuse, 0)))
		b.Uvarint(uint64(len(open)))
		for ino, n := range open {
			b.U64(uint64(ino))
			b.Uvarint(uint64(n))
		}
	})
	if err != nil {
		return fmt.Errorf("attach session %d: %w", c.sid, err)
	}
	if f.Kind != wire.StatusOK {
		return fmt.Errorf("attach session %d: %w", c.sid, wire.ReplyError(f))
	}
	return nil
}

// Close tells the server the session's operations are over. Call it
// before closing the session's own client.
func (c *Client) Close(ctx context.Context) error {
	f, err := c.db.Call(ctx, wire.OpDetach, func(b *wire.Buf) { b.U64(c.sid) })
	if err != nil {
		return fmt.Errorf("detach session %d: %w", c.sid, err)
	}
	if f.Kind != wire.StatusOK {
		return fmt.Errorf("detach session %d: %w", c.sid, wire.ReplyError(f))
	}
	return nil
}

// call runs op with arguments a on the server and returns its results;
// an operation with Dirs records the directories' attributes the reply
// carries in the session's caches.
func call[A, R any](ctx context.Context, c *Client, op *wire.Op[A, R], a A) (R, error) {
	return callAs(ctx, c, c.seq.Add(1), false, op, a, nil)
}

// callAs is call with the call's number; sentBefore flags the call as
// sent again from its first send on. after, when set, runs once the
// server has answered (whether the operation failed or not), before the
// session could be attached again: it counts handles.
func callAs[A, R any](ctx context.Context, c *Client, seq uint64, sentBefore bool, op *wire.Op[A, R], a A, after func(R, error)) (R, error) {
	if c.observe != nil {
		defer func(start time.Time) { c.observe(op.Name, time.Since(start)) }(time.Now())
	}
	var gen uint64
	if op.Dirs != nil {
		gen = c.caches.DirsBegin()
	}
	var res R
	var dirs []*meta.Attr
	var done func(error)
	if after != nil {
		done = func(err error) { after(res, err) }
	}
	cred := meta.CredOf(ctx)
	err := c.guarded(ctx, seq, sentBefore, op.AnyMember, func(b *wire.Buf) { op.Request(b, cred, a) },
		func(r *wire.Reader) { res, dirs = op.Reply(r) }, done)
	if err != nil {
		var zero R
		return zero, err
	}
	if op.Dirs != nil {
		c.caches.RecordDirs(gen, dirs...)
	}
	return res, nil
}

// guarded sends a call under the session's bound (meta.Session.Guard),
// or for a lock request that may wait, its outage watch alone. anyMember:
// any member may answer it (wire.Op.AnyMember).
func (c *Client) guarded(ctx context.Context, seq uint64, sentBefore, anyMember bool, fill func(*wire.Buf), read func(*wire.Reader), after func(err error)) error {
	guard := c.local.Guard
	if ctx.Value(waitingCall{}) != nil {
		guard = c.local.GuardWait
	}
	sent := false
	err := guard(ctx, func(ctx context.Context) error {
		sent = true
		return c.send(ctx, seq, sentBefore, anyMember, fill, read, after)
	})
	if !sent && after != nil {
		// Failed at once, the metadata server known not to answer: the
		// call was not made, as when its connection could not be.
		c.attach.RLock()
		after(err)
		c.attach.RUnlock()
	}
	return err
}

// waitingCall marks the context of a call that may wait longer than the
// mount's --meta-timeout: a lock request that waits for another holder.
type waitingCall struct{}

// waiting returns ctx marked as the context of a waiting call when block.
func waiting(ctx context.Context, block bool) context.Context {
	if !block {
		return ctx
	}
	return context.WithValue(ctx, waitingCall{}, true)
}

// send makes the call once the session let it (meta.Session.Guard): ctx
// then ends within the mount's --meta-timeout.
func (c *Client) send(ctx context.Context, seq uint64, sentBefore, anyMember bool, fill func(*wire.Buf), read func(*wire.Reader), after func(err error)) error {
	sends := 0 // the engine sends the call again on a new connection
	call := func(ctx context.Context, fill func(*wire.Buf)) (wire.Frame, error) {
		return c.db.Call(ctx, wire.OpCall, fill)
	}
	if am, ok := c.db.(AnyMember); ok && anyMember {
		call = am.ReadCall
	}
	for attempt := 0; ; attempt++ {
		c.attach.RLock()
		f, err := call(ctx, func(b *wire.Buf) {
			b.U64(c.sid)
			b.U64(c.db.Client())
			b.U64(seq)
			var flags byte
			if sends++; sends > 1 || sentBefore {
				flags |= wire.CallSentAgain
			}
			b.Byte(flags)
			fill(b)
		})
		if err == nil && f.Kind == wire.StatusNoSession {
			c.attach.RUnlock()
			if attempt >= 3 {
				return fmt.Errorf("metadata server keeps losing session %d", c.sid)
			}
			c.attach.Lock()
			err = c.reattach(ctx)
			c.attach.Unlock()
			if err != nil {
				return err
			}
			continue
		}
		if err == nil {
			err = result(f, read)
		}
		if after != nil {
			after(err)
		}
		c.attach.RUnlock()
		return err
	}
}

// result decodes a reply: the results for read, or the failure.
func result(f wire.Frame, read func(*wire.Reader)) error {
	switch f.Kind {
	case wire.StatusOK:
		r := wire.NewReader(f.Body)
		read(r)
		if err := r.Done(); err != nil {
			return fmt.Errorf("metadata server reply: %w", err)
		}
		return nil
	case wire.StatusErrno:
		return wire.DecodeError(f.Body)
	}
	return wire.ReplyError(f)
}
