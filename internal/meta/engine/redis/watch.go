package redis

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store/kvstore/kvcache"
)

// trackStream is the stream that keeps a handle's cache current
// (kvcache.Stream; see that package for the protocol): a RESP3
// connection with CLIENT TRACKING in broadcast mode for the volume's data
// keys, on which the server sends the name of every key of the volume
// that anybody modifies, interleaved in stream order with the replies to
// the cache's reads (MGET), listings (ZRANGEBYLEX of an entry group's
// sorted set), barriers (EXISTS of a key never written) and the commits
// run on it (EVALSHA). A server that cannot track (before Redis 6) leaves
// the cache off.
//
// On a Redis Cluster every key of the volume lives in one slot, so on one
// master, and the stream connects to that master (locate). Its barriers
// are EXISTS of a key of the slot rather than PING: a node that no longer
// serves the slot (a migration or failover moved it) answers them with a
// redirection, which ends the session, so the cache stops within its
// lease of the move, as it does when the connection stalls, and the next
// session connects to the new master.
type trackStream struct {
	o      *options
	ns     string // the volume's hash tag: DB.ns
	prefix string // of the volume's data keys: DB.dataKey("")
	probe  string // the key barriers ask for: DB.ns + "w", never written
	// locate returns the address of the server that holds the volume's
	// keys: the only server, or the cluster master of their slot.
	locate func(ctx context.Context) (string, error)
	// moved is the address a redirection named, tried next (sessions
	// run one at a time).
	moved string

	mu   sync.Mutex
	conn net.Conn // of the current session, for tests
}

var (
	_ kvcache.Stream  = (*trackStream)(nil)
	_ kvcache.Session = (*trackSession)(nil)
)

// trackSession is one connection of a trackStream.
type trackSession struct {
	s    *trackStream
	conn net.Conn
	r    *bufio.Reader

	mu    sync.Mutex
	kinds []kvcache.RequestKind // of the requests sent and not answered
}

func newTrackStream(o *options, ns string, locate func(context.Context) (string, error)) *trackStream {
	return &trackStream{o: o, ns: ns, prefix: ns + "k", probe: ns + "w", locate: locate}
}

// redirection returns the address a cluster redirection error names
// ("MOVED 3999 10.0.0.1:6381", "ASK ..."), and whether e is one. Other
// cluster errors that say the slot is not served here now (TRYAGAIN,
// CLUSTERDOWN) are redirections without an address.
func redirection(e respError) (addr string, ok bool) {
	f := strings.Fields(string(e))
	if len(f) == 0 {
		return "", false
	}
	switch f[0] {
	case "MOVED", "ASK":
		if len(f) == 3 {
			return f[2], true
		}
		return "", true
	case "TRYAGAIN", "CLUSTERDOWN":
		return "", true
	}
	return "", false
}

// errNoTracking reports a server that cannot track keys for the cache.
var errNoTracking = fmt.Errorf("%w: it does not support CLIENT TRACKING (Redis 6 or later)", kvcache.ErrUnsupported)

// Open connects to the volume's server (or the one the last redirection
// named) and starts tracking.
func (s *trackStream) Open(ctx context.Context) (kvcache.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	addr := s.moved
	s.moved = ""
	if addr == "" {
		var err error
		if addr, err = s.locate(ctx); err != nil {
			return nil, fmt.Errorf("redis cache connection: find the volume's server: %w", err)
		}
	}
	conn, err := s.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	if err := s.handshake(conn, r); err != nil {
		conn.Close()
		return nil, err
	}
	s.mu.Lock()
	s.conn = conn
	s.mu.Unlock()
	return &trackSession{s: s, conn: conn, r: r}, nil
}

// localAddr returns the local address of the current connection, or "".
func (s *trackStream) localAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return ""
	}
	return s.conn.LocalAddr().String()
}

// Send writes the requests as one batch of commands.
func (ss *trackSession) Send(reqs []kvcache.Request) error {
	var buf []byte
	for _, q := range reqs {
		switch q.Kind {
		case kvcache.Read:
			args := make([]string, 1, 1+len(q.Keys))
			args[0] = "MGET"
			for _, k := range q.Keys {
				args = append(args, ss.s.prefix+k)
			}
			buf = appendCommand(buf, args...)
		case kvcache.List:
			buf = appendCommand(buf, "ZRANGEBYLEX", ss.s.ns+"i"+q.Dir, "-", "+", "LIMIT", "0", strconv.Itoa(kvcache.DirMax+1))
		case kvcache.Barrier:
			buf = appendCommand(buf, "EXISTS", ss.s.probe)
		case kvcache.Call:
			args, ok := q.Cmd.([]string)
			if !ok {
				return fmt.Errorf("redis cache connection: a call of %T", q.Cmd)
			}
			buf = appendCommand(buf, args...)
		}
	}
	ss.mu.Lock()
	for _, q := range reqs {
		ss.kinds = append(ss.kinds, q.Kind)
	}
	ss.mu.Unlock()
	ss.conn.SetWriteDeadline(time.Now().Add(dialTimeout))
	if _, err := ss.conn.Write(buf); err != nil {
		ss.conn.Close()
		return err
	}
	return nil
}

// Receive reads the next push message or reply.
func (ss *trackSession) Receive() (kvcache.Message, error) {
	for {
		ss.conn.SetReadDeadline(time.Now().Add(kvcache.Lease + kvcache.PingEvery))
		v, err := readResp(ss.r)
		if err != nil {
			return kvcache.Message{}, err
		}
		if p, ok := v.(respPush); ok {
			if m, ok := ss.s.push(p); ok {
				return m, nil
			}
			continue
		}
		ss.mu.Lock()
		if len(ss.kinds) == 0 {
			ss.mu.Unlock()
			return kvcache.Message{}, errors.New("a reply to no command")
		}
		kind := ss.kinds[0]
		ss.kinds = ss.kinds[1:]
		ss.mu.Unlock()
		return ss.s.reply(kind, v)
	}
}

// Close closes the connection.
func (ss *trackSession) Close() error {
	ss.s.mu.Lock()
	if ss.s.conn == ss.conn {
		ss.s.conn = nil
	}
	ss.s.mu.Unlock()
	return ss.conn.Close()
}

// reply decodes the reply v to a request of kind. An error reply that is
// a redirection names the server the next session connects to.
func (s *trackStream) reply(kind kvcache.RequestKind, v any) (kvcache.Message, error) {
	if e, ok := v.(respError); ok {
		if kind != kvcache.Call {
			if a, ok := redirection(e); ok {
				s.moved = a
			}
		}
		return kvcache.Message{Err: e}, nil
	}
	switch kind {
	case kvcache.Read:
		arr, ok := v.([]any)
		if !ok {
			return kvcache.Message{}, fmt.Errorf("MGET: %w", errRespType)
		}
		vals, err := values(arr)
		return kvcache.Message{Reply: vals}, err
	case kvcache.List:
		arr, ok := v.([]any)
		if !ok {
			return kvcache.Message{}, fmt.Errorf("listing: %w", errRespType)
		}
		members, err := values(arr)
		if err != nil {
			return kvcache.Message{}, fmt.Errorf("listing: %w", err)
		}
		keys := make([]string, len(members))
		for i, m := range members {
			keys[i] = string(m)
		}
		return kvcache.Message{Reply: keys}, nil
	case kvcache.Barrier:
		return kvcache.Message{}, nil
	}
	return kvcache.Message{Reply: v}, nil
}

// push decodes a push message: an invalidation names changed keys, or,
// with a null, says that the server dropped all of them. Other pushes
// are not for the cache (ok false).
func (s *trackStream) push(p respPush) (m kvcache.Message, ok bool) {
	if len(p) < 2 {
		return m, false
	}
	if kind, _ := p[0].([]byte); string(kind) != "invalidate" {
		return m, false
	}
	names, isArr := p[1].([]any)
	if !isArr {
		return kvcache.Message{Report: true, All: true}, true
	}
	keys := make([]string, 0, len(names))
	for _, n := range names {
		if b, ok := n.([]byte); ok && strings.HasPrefix(string(b), s.prefix) {
			keys = append(keys, string(b[len(s.prefix):]))
		}
	}
	return kvcache.Message{Report: true, Keys: keys}, true
}

// dial connects to addr as go-redis does: TCP, then TLS for rediss.
func (s *trackStream) dial(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if !s.o.tls {
		return conn, nil
	}
	host, _, _ := net.SplitHostPort(addr)
	tc := tls.Client(conn, &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host})
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

// handshake switches the connection to RESP3, logs in, selects the
// database, starts tracking the volume's data keys and checks that the
// server serves them (on a cluster, that it is their slot's master).
func (s *trackStream) handshake(conn net.Conn, r *bufio.Reader) error {
	hello := []string{"HELLO", "3"}
	if s.o.password != "" {
		user := s.o.user
		if user == "" {
			user = "default"
		}
		hello = append(hello, "AUTH", user, s.o.password)
	}
	buf := appendCommand(nil, hello...)
	n := 2
	if s.o.db != 0 {
		buf = appendCommand(buf, "SELECT", strconv.Itoa(s.o.db))
		n++
	}
	buf = appendCommand(buf, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", s.prefix, "NOLOOP")
	// The server must serve the volume's slot (on a cluster).
	buf = appendCommand(buf, "EXISTS", s.probe)
	n++
	conn.SetDeadline(time.Now().Add(dialTimeout))
	if _, err := conn.Write(buf); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		v, err := readResp(r)
		if err != nil {
			return err
		}
		if e, ok := v.(respError); ok {
			if i == 0 && strings.Contains(strings.ToLower(string(e)), "unknown command") {
				return errNoTracking
			}
			if i == n-2 {
				return fmt.Errorf("%w: %v", errNoTracking, e) //lint:nowrap errNoTracking is what callers test for
			}
			if a, ok := redirection(e); ok {
				s.moved = a
			}
			return fmt.Errorf("redis cache connection: %w", e)
		}
	}
	conn.SetDeadline(time.Time{})
	return nil
}
