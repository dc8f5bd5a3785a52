package redis

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store/kvstore/kvcache"
)

// watcher holds the connection that keeps a cache current: the stream
// of package kvcache (see its doc for the protocol). It
// switches on CLIENT TRACKING in broadcast mode for the volume's data
// keys, reads the keys the cache asks for, pings, and hands every
// invalidation to the cache. When the connection breaks it empties the
// cache and connects again. A server that cannot track (before Redis 6)
// leaves the cache unused.
//
// On a Redis Cluster every key of the volume lives in one slot, so on one
// master, and the watcher connects to that master (locate). Its pings are
// EXISTS of a key of the slot rather than PING: a node that no longer
// serves the slot (a migration or failover moved it) answers them with a
// redirection, which ends the session, so the cache stops within its lease
// of the move, as it does when the connection stalls, and the watcher
// connects to the new master.
type watcher struct {
	o      *options
	ns     string // the volume's hash tag: DB.ns
	prefix string // of the volume's data keys: DB.dataKey("")
	probe  string // the key the pings ask for: DB.ns + "w", never written
	c      *kvcache.Cache
	log    *slog.Logger
	stop   chan struct{}
	done   chan struct{}
	// locate returns the address of the server that holds the volume's
	// keys: the only server, or the cluster master of their slot.
	locate func(ctx context.Context) (string, error)
	// moved is the address a redirection named, tried next (run only).
	moved string

	// mu orders the commands written to conn with their entries in fifo.
	mu   sync.Mutex
	conn net.Conn // nil between sessions
	fifo []pending
}

// errNoSession reports that the cache's connection is down; a call then
// goes through the connection pool instead.
var errNoSession = errors.New("redis cache connection is down")

// readBatch is the most keys one cache read asks for.
const readBatch = 256

func newWatcher(o *options, ns string, c *kvcache.Cache, locate func(context.Context) (string, error)) *watcher {
	w := &watcher{o: o, ns: ns, prefix: ns + "k", probe: ns + "w", c: c, locate: locate,
		log: slog.Default(), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
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

// close stops the watcher and waits for it.
func (w *watcher) close() {
	close(w.stop)
	<-w.done
}

// errNoTracking reports a server that cannot track keys for the cache.
var errNoTracking = errors.New("the server does not support CLIENT TRACKING (Redis 6 or later)")

func (w *watcher) run() {
	defer close(w.done)
	wait := 100 * time.Millisecond
	for {
		start := time.Now()
		err := w.session()
		w.c.Reset(true)
		if errors.Is(err, errNoTracking) {
			w.log.Warn("redis: metadata cache off", "err", err)
			return
		}
		if time.Since(start) > 10*time.Second {
			wait = 100 * time.Millisecond
		}
		select {
		case <-w.stop:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// pending is a command sent on the connection and not answered yet.
type pending struct {
	sent  time.Time
	keys  []string // kvstore keys of an MGET; nil for a ping (EXISTS probe)
	seq   uint64   // the cache's number of an MGET or a call
	dir   string   // the scan group of a directory listing
	fence string   // the scan group of a fence (an EXISTS probe)
	reply chan any // a call's: gets the reply, or an error
	// then, for a call, runs on the reply before the caller gets it, in
	// the order of the stream: before any later invalidation or reply is
	// handled.
	then func(seq uint64, v any)
}

// session runs one connection until it breaks or the watcher stops.
func (w *watcher) session() error {
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	addr := w.moved
	w.moved = ""
	if addr == "" {
		var err error
		if addr, err = w.locate(ctx); err != nil {
			return fmt.Errorf("redis cache connection: find the volume's server: %w", err)
		}
	}
	conn, err := w.dial(ctx, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	r := bufio.NewReaderSize(conn, 64<<10)
	sent := time.Now()
	if err := w.handshake(conn, r); err != nil {
		return err
	}
	w.mu.Lock()
	w.conn, w.fifo = conn, nil
	w.mu.Unlock()
	w.c.Up(sent)

	quit := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() { writerDone <- w.write(conn, quit) }()
	defer func() {
		close(quit)
		conn.Close()
		<-writerDone
		w.mu.Lock()
		fifo := w.fifo
		w.conn, w.fifo = nil, nil
		w.mu.Unlock()
		for _, p := range fifo {
			if p.reply != nil {
				p.reply <- errors.New("redis cache connection lost")
			}
		}
	}()
	for {
		conn.SetReadDeadline(time.Now().Add(kvcache.Lease + kvcache.PingEvery))
		v, err := readResp(r)
		if err != nil {
			select {
			case <-w.stop:
				return nil
			default:
			}
			return fmt.Errorf("redis cache connection: %w", err)
		}
		if p, ok := v.(respPush); ok {
			w.push(p)
			continue
		}
		w.mu.Lock()
		if len(w.fifo) == 0 {
			w.mu.Unlock()
			return errors.New("redis cache connection: reply to no command")
		}
		cmd := w.fifo[0]
		w.fifo = w.fifo[1:]
		w.mu.Unlock()
		if err := w.answered(cmd, v); err != nil {
			return fmt.Errorf("redis cache connection: %w", err)
		}
	}
}

// answered hands the reply v to the command cmd it answers: a call's
// caller, the cache (a read, a listing or a fence), or the lease (a
// ping). An
// error reply to any but a call ends the session; a redirection also
// names the server to connect to next.
func (w *watcher) answered(cmd pending, v any) error {
	if cmd.reply != nil {
		if cmd.then != nil {
			cmd.then(cmd.seq, v)
		}
		cmd.reply <- v
		return nil
	}
	if e, ok := v.(respError); ok {
		if a, ok := redirection(e); ok {
			w.moved = a
		}
		return e
	}
	switch {
	case cmd.fence != "":
		w.c.Unfence(cmd.fence)
	case cmd.dir != "":
		arr, ok := v.([]any)
		if !ok {
			return fmt.Errorf("listing: %w", errRespType)
		}
		members, err := values(arr)
		if err != nil {
			return fmt.Errorf("listing: %w", err)
		}
		keys := make([]string, len(members))
		for i, m := range members {
			keys[i] = string(m)
		}
		w.c.Listed(cmd.dir, keys)
	case cmd.keys == nil:
		w.c.Ack(cmd.sent)
	default:
		arr, ok := v.([]any)
		if !ok || len(arr) != len(cmd.keys) {
			return fmt.Errorf("MGET of %d keys: %w", len(cmd.keys), errRespType)
		}
		vals, err := values(arr)
		if err != nil {
			return err
		}
		w.c.Filled(cmd.seq, cmd.keys, vals)
	}
	return nil
}

// write sends the cache's reads and the pings until quit or an error,
// recording each command in fifo before it is sent.
func (w *watcher) write(conn net.Conn, quit chan struct{}) error {
	tick := time.NewTicker(kvcache.PingEvery)
	defer tick.Stop()
	late := time.NewTimer(kvcache.RefetchDelay)
	late.Stop()
	armed := false
	var buf []byte
	for {
		ping := false
		select {
		case <-w.stop:
			conn.Close()
			return nil
		case <-quit:
			return nil
		case <-tick.C:
			ping = true
		case <-w.c.Kick():
		case <-w.c.LateKick():
			if !armed {
				late.Reset(kvcache.RefetchDelay)
				armed = true
			}
			continue
		case <-late.C:
			armed = false
		}
		w.c.Due()
		buf = buf[:0]
		w.mu.Lock()
		now := time.Now()
		if ping {
			buf = appendCommand(buf, "EXISTS", w.probe)
			w.fifo = append(w.fifo, pending{sent: now})
		}
		for _, g := range w.c.TakeFences() {
			buf = appendCommand(buf, "EXISTS", w.probe)
			w.fifo = append(w.fifo, pending{sent: now, fence: g})
		}
		for _, g := range w.c.TakeLists() {
			buf = appendCommand(buf, "ZRANGEBYLEX", w.ns+"i"+g, "-", "+", "LIMIT", "0", strconv.Itoa(kvcache.DirMax+1))
			w.fifo = append(w.fifo, pending{sent: now, dir: g})
		}
		for {
			keys, seq := w.c.Take(readBatch)
			if len(keys) == 0 {
				break
			}
			args := make([]string, 1, 1+len(keys))
			args[0] = "MGET"
			for _, k := range keys {
				args = append(args, w.prefix+k)
			}
			buf = appendCommand(buf, args...)
			w.fifo = append(w.fifo, pending{sent: now, keys: keys, seq: seq})
		}
		var err error
		if len(buf) > 0 {
			err = w.send(conn, buf)
		}
		w.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// send writes buf to conn; the caller holds mu.
func (w *watcher) send(conn net.Conn, buf []byte) error {
	conn.SetWriteDeadline(time.Now().Add(dialTimeout))
	if _, err := conn.Write(buf); err != nil {
		conn.Close()
		return err
	}
	return nil
}

// call sends a command on the cache's connection and waits for its reply,
// which comes in order with the invalidations. then, if not nil, is
// called with the cache's number of the command (kvcache.Cache.Seq) and
// the reply (not with an error of the connection) where it
// arrives in the stream, before any later invalidation is handled, so
// that what it tells the cache is known to be current until one is:
// the caller itself may run long after, when later changes have been
// reported. It fails with errNoSession, having sent nothing, when the
// connection is down.
func (w *watcher) call(ctx context.Context, then func(seq uint64, v any), args ...string) (any, error) {
	reply := make(chan any, 1)
	w.mu.Lock()
	conn := w.conn
	if conn == nil {
		w.mu.Unlock()
		return nil, errNoSession
	}
	w.fifo = append(w.fifo, pending{sent: time.Now(), reply: reply, then: then, seq: w.c.Seq()})
	err := w.send(conn, appendCommand(nil, args...))
	w.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	select {
	case v := <-reply:
		switch v := v.(type) {
		case error:
			return nil, v
		case respError:
			return nil, v
		}
		return v, nil
	case <-ctx.Done():
		// The reply, when it comes, goes to the buffered channel.
		return nil, ctx.Err()
	}
}

// drop closes the connection, if any, so that the session ends and the
// watcher connects again, locating the volume's server anew.
func (w *watcher) drop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn != nil {
		w.conn.Close()
	}
}

// push handles a push message: an invalidation names changed keys, or,
// with a null, says that the server dropped all of them.
func (w *watcher) push(p respPush) {
	if len(p) < 2 {
		return
	}
	if kind, _ := p[0].([]byte); string(kind) != "invalidate" {
		return
	}
	names, ok := p[1].([]any)
	if !ok {
		w.c.Reset(false)
		return
	}
	keys := make([]string, 0, len(names))
	for _, n := range names {
		if b, ok := n.([]byte); ok && strings.HasPrefix(string(b), w.prefix) {
			keys = append(keys, string(b[len(w.prefix):]))
		}
	}
	w.c.Invalidated(keys)
}

// dial connects to addr as go-redis does: TCP, then TLS for rediss.
func (w *watcher) dial(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if !w.o.tls {
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
func (w *watcher) handshake(conn net.Conn, r *bufio.Reader) error {
	hello := []string{"HELLO", "3"}
	if w.o.password != "" {
		user := w.o.user
		if user == "" {
			user = "default"
		}
		hello = append(hello, "AUTH", user, w.o.password)
	}
	buf := appendCommand(nil, hello...)
	n := 2
	if w.o.db != 0 {
		buf = appendCommand(buf, "SELECT", strconv.Itoa(w.o.db))
		n++
	}
	buf = appendCommand(buf, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", w.prefix, "NOLOOP")
	// The server must serve the volume's slot (on a cluster).
	buf = appendCommand(buf, "EXISTS", w.probe)
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
				return fmt.Errorf("%w: %v", errNoTracking, e)
			}
			if a, ok := redirection(e); ok {
				w.moved = a
			}
			return fmt.Errorf("redis cache connection: %w", e)
		}
	}
	conn.SetDeadline(time.Time{})
	return nil
}
