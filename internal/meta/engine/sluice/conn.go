package sluice

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/sluicefs/sluice/internal/wire"
)

// errConnLost reports a request whose connection broke before its
// reply came: it may or may not have been served.
var errConnLost = errors.New("connection to the metadata server lost")

// conn is one connection to the server, shared by many requests in
// flight; one goroutine reads the replies and hands each to its caller.
type conn struct {
	mu      sync.Mutex // guards everything below
	nc      net.Conn
	w       *bufio.Writer
	pending map[uint64]chan wire.Frame
	sent    map[uint64]time.Time // when each pending request went out
	addr    string
	nextID  uint64
	broken  bool
}

// endpoint is what a connection needs: where, which volume, and the
// credentials.
type endpoint struct {
	addr, name string
	secret     []byte      // proven in wire's handshake; empty: none
	tls        *tls.Config // nil: plain TCP
	// anyMember opens the connection for reads from any member
	// (wire.HelloAnyMember): a member that does not lead accepts it.
	anyMember bool
}

// permanentError marks a failure that dialling again cannot mend: a
// secret or certificate refused. A request that meets one fails at once
// instead of retrying until the timeout.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// refusal marks err permanent when the server refused the credentials
// or this end refused the server's: a secret refused either way, a
// certificate not trusted, or a TLS alert (the server refused this
// client's certificate; with TLS 1.3 that alert arrives in wire's
// handshake, after TLS's own).
func refusal(err error) error {
	var certErr *tls.CertificateVerificationError
	var alert tls.AlertError
	if errors.Is(err, wire.ErrAuth) || errors.As(err, &certErr) || errors.As(err, &alert) {
		return &permanentError{err}
	}
	return err
}

func isPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// connect makes a connection to the endpoint, runs TLS and the secret's
// handshake: it is ready for requests.
func connect(ctx context.Context, ep endpoint) (*conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", ep.addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if ep.tls != nil {
		tc := tls.Client(nc, ep.tls)
		// Bounded as wire bounds its handshake, so that a server that
		// accepts and says nothing does not hold the dial for ever.
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			nc.Close()
			return nil, refusal(fmt.Errorf("TLS: %w", err))
		}
		nc = tc
	}
	if err := wire.AuthClient(nc, ep.secret, "client"); err != nil {
		nc.Close()
		return nil, refusal(err)
	}
	c := &conn{nc: nc, w: bufio.NewWriterSize(nc, 64<<10), pending: map[uint64]chan wire.Frame{},
		sent: map[uint64]time.Time{}, addr: ep.addr}
	go c.readLoop()
	return c, nil
}

// dial connects to the endpoint and says hello.
func dial(ctx context.Context, ep endpoint) (*conn, error) {
	c, err := connect(ctx, ep)
	if err != nil {
		return nil, err
	}
	f, err := c.call(ctx, wire.OpHello, nil, func(b *wire.Buf) {
		b.Uvarint(wire.Version)
		b.Bytes([]byte(ep.name))
		if ep.anyMember {
			b.Byte(wire.HelloAnyMember)
		}
	})
	if err != nil {
		c.close()
		return nil, err
	}
	if f.Kind == wire.StatusNotLeader {
		c.close()
		return nil, errNotLeader
	}
	if f.Kind != wire.StatusOK {
		c.close()
		return nil, replyError(f)
	}
	return c, nil
}

// errNotLeader reports a member of a replicated group that does not lead
// it (wire.StatusNotLeader): the request goes to another member.
var errNotLeader = errors.New("metadata server is not the leader of its group")

func (c *conn) readLoop() {
	r := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		f, err := wire.ReadFrame(r)
		if err != nil {
			c.close()
			return
		}
		c.mu.Lock()
		ch := c.pending[f.ID]
		delete(c.pending, f.ID)
		delete(c.sent, f.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- f
		}
	}
}

// close breaks the connection: requests waiting for a reply get
// errConnLost.
func (c *conn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken {
		return
	}
	c.broken = true
	c.nc.Close()
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
		delete(c.sent, id)
	}
}

func (c *conn) isBroken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken
}

// call sends one request and waits for its reply. extra frames (snapshot
// releases, which get no reply) go out in the same write.
func (c *conn) call(ctx context.Context, op byte, extra []byte, fill func(*wire.Buf)) (wire.Frame, error) {
	// A request of a cancelled caller is not sent: once sent, a commit
	// may be applied whether or not its caller still waits.
	if err := ctx.Err(); err != nil {
		return wire.Frame{}, err
	}
	ch := make(chan wire.Frame, 1)
	c.mu.Lock()
	if c.broken {
		c.mu.Unlock()
		return wire.Frame{}, errConnLost
	}
	c.nextID++
	id := c.nextID
	b := wire.NewFrame(id, op)
	if fill != nil {
		fill(b)
	}
	if b.Len() > wire.MaxFrame {
		c.mu.Unlock()
		return wire.Frame{}, fmt.Errorf("request of %d bytes exceeds the protocol's %d", b.Len(), wire.MaxFrame)
	}
	c.pending[id] = ch
	c.sent[id] = time.Now()
	if extra != nil {
		c.w.Write(extra)
	}
	c.w.Write(b.Finish())
	err := c.w.Flush()
	c.mu.Unlock()
	if err != nil {
		c.close()
		return wire.Frame{}, errConnLost
	}
	select {
	case f, ok := <-ch:
		if !ok {
			return wire.Frame{}, errConnLost
		}
		return f, nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		delete(c.sent, id)
		if op == wire.OpCall && !c.broken {
			// The server stops what it runs for the call (a lock wait).
			cb := wire.NewFrame(0, wire.OpCancel)
			cb.U64(id)
			c.w.Write(cb.Finish())
			c.w.Flush()
		}
		c.mu.Unlock()
		select {
		case f, ok := <-ch: // the reply came as the caller gave up
			if ok {
				return f, nil
			}
		default:
		}
		return wire.Frame{}, ctx.Err()
	}
}

// ReplyError turns a reply that is not the one expected (an error, an
// unknown status) into an error.
func ReplyError(f wire.Frame) error { return replyError(f) }

// replyError turns an error reply into an error.
func replyError(f wire.Frame) error {
	if f.Kind == wire.StatusError {
		r := wire.NewReader(f.Body)
		return fmt.Errorf("metadata server: %s", r.Bytes())
	}
	return fmt.Errorf("metadata server: unexpected status %d", f.Kind)
}

// backoff returns the wait before attempt i of a reconnection.
func backoff(i int) time.Duration {
	d := 20 * time.Millisecond << min(i, 5)
	return min(d, time.Second)
}

// waiting returns how long the oldest request still waiting for its reply
// has waited (0: none waits).
func (c *conn) waiting() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var oldest time.Time
	for _, at := range c.sent {
		if oldest.IsZero() || at.Before(oldest) {
			oldest = at
		}
	}
	if oldest.IsZero() {
		return 0
	}
	return time.Since(oldest)
}
