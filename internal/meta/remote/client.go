// Package remote runs a mount's metadata operations on the in-memory
// metadata server: Client is the mount's side, an implementation of
// vfs.Meta that sends each operation (lookup, create, rename, a slice's
// commit, a lock, …) to the server in one request, and Decode is the
// server's side, which runs it on a meta.Client attached to the mount's
// session (meta.Attach). The POSIX core is the same code either way;
// only where it runs changes: next to the records, so that an operation
// costs one round trip instead of one per read and commit of its
// transactions.
//
// The mount's own meta.Client still owns the session (heartbeats,
// deletion of data, cleaning up after dead sessions), answers what
// needs no engine (PreviewAttr, XattrSupported, NoXattrs) and hands out
// slice ids from the batches it reserves.
//
// Retries. A call carries the client's id and a number; the server
// remembers the replies of the last calls of each session, so a call
// sent again after its connection broke is answered, not run twice.
// When the server no longer has the session attached (it restarted, or
// dropped a session idle for long), the client attaches it again with
// the handles it holds open, and the server takes the rest of the
// session's state (files kept open after unlink, inodes with locks) from
// the records. A call that the server ran before a restart and whose
// reply was lost then runs again: a create finds its file there
// (EEXIST, which the mount's create without O_EXCL takes as the file to
// open), an unlink finds its name gone (ENOENT).
package remote

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/sluice"
	"github.com/sluicefs/sluice/internal/metaserver/wire"
)

// Client is a mount's metadata service on the metadata server.
type Client struct {
	db    *sluice.DB
	local *meta.Client
	sid   uint64
	atime string
	reuse time.Duration
	seq   atomic.Uint64

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
func New(ctx context.Context, db *sluice.DB, local *meta.Client, o Options) (*Client, error) {
	c := &Client{db: db, local: local, sid: local.Sid(), atime: o.AtimeMode, reuse: o.DirAttrReuse, open: map[meta.Ino]int{}, posix: map[meta.Ino]bool{}, observe: o.Observe}
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
		return fmt.Errorf("attach session %d: %w", c.sid, sluice.ReplyError(f))
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
		return fmt.Errorf("detach session %d: %w", c.sid, sluice.ReplyError(f))
	}
	return nil
}

// call runs method on the server with the arguments fill appends, and
// hands its results to read. after, when set, runs once the server has
// answered (whether the method failed or not), before the session could
// be attached again: it counts handles.
func (c *Client) call(ctx context.Context, method uint64, fill func(*wire.Buf), read func(*wire.Reader), after func(err error)) error {
	return c.callAs(ctx, c.seq.Add(1), false, method, fill, read, after)
}

// callAs is call with the call's number; sentBefore flags the call as
// sent again from its first send on.
func (c *Client) callAs(ctx context.Context, seq uint64, sentBefore bool, method uint64, fill func(*wire.Buf), read func(*wire.Reader), after func(err error)) error {
	if c.observe != nil {
		defer func(start time.Time) { c.observe(MethodName(method), time.Since(start)) }(time.Now())
	}
	guard := c.local.Guard
	if ctx.Value(waitingCall{}) != nil {
		guard = c.local.GuardWait
	}
	sent := false
	err := guard(ctx, func(ctx context.Context) error {
		sent = true
		return c.send(ctx, seq, sentBefore, method, fill, read, after)
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

// send makes the call once the session's client let it (meta.Client.Guard):
// ctx then ends within the mount's --meta-timeout.
func (c *Client) send(ctx context.Context, seq uint64, sentBefore bool, method uint64, fill func(*wire.Buf), read func(*wire.Reader), after func(err error)) error {
	cred := meta.CredOf(ctx)
	sends := 0 // the engine sends the call again on a new connection
	for attempt := 0; ; attempt++ {
		c.attach.RLock()
		f, err := c.db.Call(ctx, wire.OpCall, func(b *wire.Buf) {
			b.U64(c.sid)
			b.U64(c.db.Client())
			b.U64(seq)
			var flags byte
			if sends++; sends > 1 || sentBefore {
				flags |= wire.CallSentAgain
			}
			b.Byte(flags)
			b.Uvarint(method)
			putCred(b, cred)
			if fill != nil {
				fill(b)
			}
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
		if read == nil {
			return nil
		}
		r := wire.NewReader(f.Body)
		read(r)
		if err := r.Done(); err != nil {
			return fmt.Errorf("metadata server reply: %w", err)
		}
		return nil
	case wire.StatusErrno:
		r := wire.NewReader(f.Body)
		kind, errno, msg := r.Uvarint(), syscall.Errno(r.Uvarint()), r.Bytes()
		if err := r.Done(); err != nil {
			return fmt.Errorf("metadata server reply: %w", err)
		}
		switch kind {
		case wire.ErrnoPOSIX:
			return errno
		case wire.ErrnoNoInode:
			return meta.ErrNoInode
		}
		return fmt.Errorf("metadata server: %s", msg)
	}
	return sluice.ReplyError(f)
}

// EncodeError appends err to a StatusErrno reply.
func EncodeError(b *wire.Buf, err error) {
	kind := uint64(wire.ErrnoIO)
	errno := meta.Errno(err)
	var e syscall.Errno
	switch {
	case errors.Is(err, meta.ErrNoInode):
		kind = wire.ErrnoNoInode
	case errors.As(err, &e) || errno == syscall.EINTR:
		kind = wire.ErrnoPOSIX
	}
	b.Uvarint(kind)
	b.Uvarint(uint64(errno))
	b.Bytes([]byte(err.Error()))
}
