package metaserver

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicefs/sluice/internal/wire"
)

// snapshots are the trees clients' transactions read, by id. A snapshot
// is a published tree, which nobody writes, so holding one costs only
// the nodes later commits copied away from it.
type snapshots struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]*snapshot
	ttl  time.Duration
}

type snapshot struct {
	t    *tree
	used time.Time
}

func (s *snapshots) init(ttl time.Duration) {
	s.m = map[uint64]*snapshot{}
	s.ttl = ttl
}

// take registers t and returns its id.
func (s *snapshots) take(t *tree) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	s.m[s.next] = &snapshot{t: t, used: time.Now()}
	return s.next
}

func (s *snapshots) get(id uint64) *tree {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := s.m[id]
	if sn == nil {
		return nil
	}
	sn.used = time.Now()
	return sn.t
}

func (s *snapshots) release(id uint64) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

func (s *snapshots) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// reap drops snapshots unused for the TTL until end is closed.
func (s *snapshots) reap(end <-chan struct{}) {
	tick := time.NewTicker(s.ttl / 4)
	defer tick.Stop()
	for {
		select {
		case <-end:
			return
		case now := <-tick.C:
			s.mu.Lock()
			for id, sn := range s.m {
				if now.Sub(sn.used) > s.ttl {
					delete(s.m, id)
				}
			}
			s.mu.Unlock()
		}
	}
}

// Serve accepts connections on l until the server is closed.
func (s *Server) Serve(l net.Listener) error {
	s.lnMu.Lock()
	if s.closed.Load() {
		s.lnMu.Unlock()
		l.Close()
		return errClosed
	}
	s.lns = append(s.lns, l)
	s.lnMu.Unlock()
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.closed.Load() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		// The handshake waits for the client: one goroutine each, so that
		// a slow or silent client holds up nobody else.
		go s.admit(nc)
	}
}

// serve registers a connection that passed the handshake and starts
// serving its requests.
func (s *Server) serve(nc net.Conn) {
	c := &conn{s: s, nc: nc, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if tc, ok := nc.(*net.TCPConn); ok {
		c.raw, _ = tc.SyscallConn()
	}
	s.connMu.Lock()
	if s.closed.Load() {
		s.connMu.Unlock()
		nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.connMu.Unlock()
	s.m.conns.Inc()
	go c.writeLoop()
	go c.readLoop()
}

// conn is one client connection. Requests are read and answered in
// order of arrival, except commits, which are answered when the apply
// loop has made them durable. Replies are queued: the reading goroutine
// writes the replies of reads itself once it has no more requests
// buffered (no hand-off on the hot path). A reply another goroutine
// queues (the syncer's acknowledgements, a call's worker) is written by
// that goroutine at once when nobody else is writing and the socket
// takes it without waiting, and otherwise by the connection's writer
// goroutine: so an acknowledgement costs no hand-off, and the syncer
// never waits for a slow client.
type conn struct {
	s    *Server
	nc   net.Conn
	mu   sync.Mutex // guards out
	out  [][]byte
	wmu  sync.Mutex // guards w, and writing to nc
	w    *bufio.Writer
	wake chan struct{}
	done chan struct{}
	once sync.Once

	// raw is nc's descriptor when nc is plain TCP (not TLS), for writes
	// that never wait (writeNowLocked).
	raw syscall.RawConn
	// sink, when set, takes every reply instead of the network (the
	// in-process connection of the sessions' POSIX core).
	sink func(frame []byte)
	// cancels stops the OpCalls running for this connection, by request.
	cmu     sync.Mutex
	cancels map[uint64]context.CancelFunc
	// inline is a call handle left to the goroutine reading requests
	// (readFrom); only that goroutine touches it.
	inline func()
	// anyMember marks the in-process connection of the reader
	// (anymember.go): its snapshots are the member's published records,
	// whether it leads or not.
	anyMember bool
}

// anyMemberServes reports whether a member that does not lead serves
// request f on c: figures, releases and cancels; the reads of any member
// (OpReadCall, and the OpHello that opens a connection for them); and
// the snapshot reads of the reader's own connection.
func (c *conn) anyMemberServes(f wire.Frame) bool {
	switch f.Kind {
	case wire.OpStats, wire.OpRelease, wire.OpCancel, wire.OpReadCall:
		return true
	case wire.OpGet, wire.OpGetFollow, wire.OpScan:
		return c.anyMember
	case wire.OpHello:
		r := wire.NewReader(f.Body)
		r.Uvarint()
		r.Bytes()
		return r.Len() > 0 && r.Byte()&wire.HelloAnyMember != 0
	}
	return false
}

func (c *conn) close() {
	c.once.Do(func() {
		close(c.done)
		c.nc.Close()
	})
}

// queue adds a reply. wake, for a reply queued by a goroutine other
// than the reader's, has it written now: by this goroutine when nobody
// else is writing and the socket takes it at once (writeNow), else by
// the writer goroutine.
func (c *conn) queue(frame []byte, wake bool) {
	if c.sink != nil {
		c.sink(frame)
		return
	}
	c.mu.Lock()
	c.out = append(c.out, frame)
	c.mu.Unlock()
	if !wake {
		return
	}
	if c.raw != nil && c.wmu.TryLock() {
		written := c.writeNowLocked()
		c.wmu.Unlock()
		if written {
			return
		}
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// writeNowLocked writes the queued replies with one system call that
// does not wait (Go's sockets are non-blocking), and reports whether
// the socket took them all; what it did not take is queued again, first.
// The caller holds wmu, so w is empty (flush empties it before it lets
// go) and nobody else writes to the socket meanwhile.
func (c *conn) writeNowLocked() bool {
	c.mu.Lock()
	out := c.out
	c.out = nil
	c.mu.Unlock()
	if len(out) == 0 {
		return true
	}
	n, err := 0, error(nil)
	if rerr := c.raw.Write(func(fd uintptr) bool {
		if len(out) == 1 {
			n, err = unix.Write(int(fd), out[0])
		} else {
			n, err = unix.Writev(int(fd), out)
		}
		return true // never wait for the socket: the writer goroutine does
	}); rerr != nil {
		err = rerr
	}
	switch {
	case err == nil:
	case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
		n = 0
	default:
		c.close()
		return true
	}
	for len(out) > 0 && n >= len(out[0]) {
		n -= len(out[0])
		out = out[1:]
	}
	if len(out) == 0 {
		return true
	}
	out[0] = out[0][n:]
	c.mu.Lock()
	c.out = append(out, c.out...)
	c.mu.Unlock()
	return false
}

// flush writes the queued replies.
func (c *conn) flush() {
	c.mu.Lock()
	out := c.out
	c.out = nil
	c.mu.Unlock()
	if len(out) == 0 {
		return
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.w == nil {
		c.w = bufio.NewWriterSize(c.nc, 64<<10)
	}
	for _, f := range out {
		if _, err := c.w.Write(f); err != nil {
			c.close()
			return
		}
	}
	if err := c.w.Flush(); err != nil {
		c.close()
	}
}

func (c *conn) writeLoop() {
	for {
		select {
		case <-c.done:
			return
		case <-c.wake:
		}
		c.flush()
	}
}

func (c *conn) readLoop() { c.readFrom(bufio.NewReaderSize(c.nc, 64<<10)) }

// readFrom reads and serves c's requests until the connection ends, or
// until a request is to run on the goroutine that read it (c.inline, a
// call that may commit): then a worker goes on reading, and this
// goroutine runs the call.
func (c *conn) readFrom(r *bufio.Reader) {
	for {
		f, err := wire.ReadFrame(r)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.s.log.Debug("closing connection", "remote", c.nc.RemoteAddr(), "err", err)
			}
			c.close()
			c.s.connMu.Lock()
			delete(c.s.conns, c)
			c.s.connMu.Unlock()
			c.s.m.conns.Dec()
			return
		}
		c.handle(f)
		if job := c.inline; job != nil {
			c.inline = nil
			c.flush() // what this goroutine queued, before it stops reading
			c.s.sess.workers.run(func() { c.readFrom(r) })
			job()
			return
		}
		if r.Buffered() == 0 {
			c.flush()
		}
	}
}

func (c *conn) reply(id uint64, status byte, fill func(*wire.Buf)) {
	b := wire.NewFrame(id, status)
	if fill != nil {
		fill(b)
	}
	c.queue(b.Finish(), false)
}

func (c *conn) fail(id uint64, err error) {
	c.reply(id, wire.StatusError, func(b *wire.Buf) { b.Bytes([]byte(err.Error())) })
}

// handle serves one request.
func (c *conn) handle(f wire.Frame) {
	s := c.s
	start := time.Now()
	op := opName(f.Kind)
	defer func() {
		if f.Kind != wire.OpCommit && f.Kind != wire.OpCall && f.Kind != wire.OpReadCall && f.Kind != wire.OpRelease && f.Kind != wire.OpCancel {
			s.m.observe(op, start)
		}
	}()
	if s.rep != nil && !s.leading.Load() && !c.anyMemberServes(f) {
		// Only the leader serves; the client tries another member.
		c.reply(f.ID, wire.StatusNotLeader, func(b *wire.Buf) { b.Bytes(nil) })
		return
	}
	switch f.Kind {
	case wire.OpHello:
		r := wire.NewReader(f.Body)
		v := r.Uvarint()
		name := string(r.Bytes())
		if r.Len() > 0 {
			r.Byte() // flags: see anyMemberServes
		}
		if err := r.Done(); err != nil {
			c.fail(f.ID, err)
			return
		}
		if v != wire.Version {
			c.fail(f.ID, fmt.Errorf("protocol version %d not served (this server speaks %d)", v, wire.Version))
			return
		}
		if s.opts.Name != "" && name != "" && name != s.opts.Name {
			c.fail(f.ID, fmt.Errorf("this server holds volume %q, not %q", s.opts.Name, name))
			return
		}
		c.reply(f.ID, wire.StatusOK, func(b *wire.Buf) { b.Bytes([]byte("sluice meta-server " + s.opts.Dir)) })
	case wire.OpGet:
		var keys [][]byte
		c.read(f, func(r *wire.Reader) {
			keys = make([][]byte, r.Count(1))
			for i := range keys {
				keys[i] = r.Bytes()
			}
		}, func(t *tree, b *wire.Buf) {
			b.Uvarint(uint64(len(keys)))
			for _, k := range keys {
				putValue(b, t, k)
			}
		})
	case wire.OpGetFollow:
		var rule wire.Follow
		var keys [][]byte
		var follow []bool
		c.read(f, func(r *wire.Reader) {
			rule = r.Follow()
			keys = make([][]byte, r.Count(2))
			follow = make([]bool, len(keys))
			for i := range keys {
				keys[i] = r.Bytes()
				follow[i] = r.Byte() == 1
			}
		}, func(t *tree, b *wire.Buf) {
			b.Uvarint(uint64(len(keys)))
			for i, k := range keys {
				v := putValue(b, t, k)
				if follow[i] {
					putValue(b, t, rule.Next(v))
				}
			}
		})
	case wire.OpScan:
		var limit int64
		var ranges []wire.Range
		c.read(f, func(r *wire.Reader) {
			limit = r.Varint()
			ranges = make([]wire.Range, r.Count(2))
			for i := range ranges {
				ranges[i] = r.Range()
			}
		}, func(t *tree, b *wire.Buf) {
			b.Uvarint(uint64(len(ranges)))
			for _, rg := range ranges {
				items := scan(t, rg, int(limit))
				b.Uvarint(uint64(len(items)))
				for _, it := range items {
					b.Bytes(it.key())
					b.Bytes(it.val())
				}
			}
		})
	case wire.OpCommit:
		cm, err := wire.DecodeCommit(f.Body)
		if err != nil {
			c.fail(f.ID, err)
			return
		}
		req := &commitReq{c: cm}
		if cm.Snap != 0 {
			req.snap = s.snaps.get(cm.Snap)
			req.noSnap = req.snap == nil
			s.snaps.release(cm.Snap)
		}
		id := f.ID
		req.done = func(status byte, msg string) {
			s.m.observe(op, start)
			b := wire.NewFrame(id, status)
			if status == wire.StatusError {
				b.Bytes([]byte(msg))
			}
			c.queue(b.Finish(), true)
		}
		select {
		case s.commits <- req:
		case <-s.loopEnd:
			c.fail(f.ID, errClosed)
		}
	case wire.OpRelease:
		r := wire.NewReader(f.Body)
		n := r.Count(8)
		for i := 0; i < n; i++ {
			s.snaps.release(r.U64())
		}
		if err := r.Done(); err != nil {
			c.fail(f.ID, err)
		}
	case wire.OpCall:
		c.serveCall(f, start)
	case wire.OpReadCall:
		c.serveReadCall(f, start)
	case wire.OpIndex:
		c.serveIndex(f.ID)
	case wire.OpCancel:
		r := wire.NewReader(f.Body)
		id := r.U64()
		if r.Done() == nil {
			c.cancelCall(id)
		}
	case wire.OpAttach:
		sid, client, conf, open, err := decodeAttach(f.Body)
		if err != nil {
			c.fail(f.ID, err)
			return
		}
		id := f.ID
		go func() { // its reads and commits come back through the loop
			if err := s.attach(context.Background(), sid, client, conf, open); err != nil {
				c.fail(id, err)
				c.flush()
				return
			}
			c.reply(id, wire.StatusOK, nil)
			c.flush()
		}()
	case wire.OpDetach:
		r := wire.NewReader(f.Body)
		sid := r.U64()
		if err := r.Done(); err != nil {
			c.fail(f.ID, err)
			return
		}
		id := f.ID
		go func() {
			if err := s.detach(context.Background(), sid); err != nil {
				c.fail(id, err)
				c.flush()
				return
			}
			c.reply(id, wire.StatusOK, nil)
			c.flush()
		}()
	case wire.OpStats:
		st := s.Stats()
		if len(f.Body) > 0 && f.Body[0]&wire.StatsDigest != 0 {
			st.Digest = digest(s.pub.Load().tree)
		}
		js, _ := json.Marshal(st)
		c.reply(f.ID, wire.StatusOK, func(b *wire.Buf) { b.Bytes(js) })
	case wire.OpMember:
		r := wire.NewReader(f.Body)
		change, id, addr := r.Byte(), string(r.Bytes()), string(r.Bytes())
		if err := r.Done(); err != nil {
			c.fail(f.ID, err)
			return
		}
		fid := f.ID
		go func() { // a change waits for the group to commit it
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var err error
			switch change {
			case wire.MemberAdd:
				err = s.AddMember(ctx, id, addr)
			case wire.MemberRemove:
				err = s.RemoveMember(ctx, id)
			default:
				err = fmt.Errorf("membership change %d unknown", change)
			}
			if err != nil {
				c.fail(fid, err)
			} else {
				c.reply(fid, wire.StatusOK, nil)
			}
			c.flush()
		}()
	default:
		c.fail(f.ID, fmt.Errorf("unknown operation %d", f.Kind))
	}
}

// read serves a read request: its body is a snapshot id, then what
// decode reads; the reply is the snapshot id (the one taken when the
// request named none), then what serve writes from that snapshot.
func (c *conn) read(f wire.Frame, decode func(*wire.Reader), serve func(*tree, *wire.Buf)) {
	r := wire.NewReader(f.Body)
	id := r.U64()
	decode(r)
	if err := r.Done(); err != nil {
		c.fail(f.ID, err)
		return
	}
	if id == 0 && c.s.rep != nil && !c.anyMember {
		// A new snapshot of a member: only once it still leads (see
		// readIndex); the wait does not hold up the connection.
		go func() {
			if err := c.s.readIndex(); err != nil {
				c.reply(f.ID, wire.StatusNotLeader, func(b *wire.Buf) { b.Bytes(nil) })
			} else {
				c.serveRead(f.ID, id, serve)
			}
			c.flush()
		}()
		return
	}
	c.serveRead(f.ID, id, serve)
}

// serveRead answers a read from the snapshot id names (0: a new one).
func (c *conn) serveRead(fid, id uint64, serve func(*tree, *wire.Buf)) {
	t, id, ok := c.snapshot(id)
	if !ok {
		c.reply(fid, wire.StatusNoSnapshot, nil)
		return
	}
	c.reply(fid, wire.StatusOK, func(b *wire.Buf) {
		b.U64(id)
		serve(t, b)
	})
}

// putValue appends whether key is in t and its value, and returns the
// value (nil when absent, or when key is nil).
func putValue(b *wire.Buf, t *tree, key []byte) []byte {
	if key == nil {
		b.Byte(0)
		return nil
	}
	it, ok := t.Get(key)
	if !ok {
		b.Byte(0)
		return nil
	}
	b.Byte(1)
	b.Bytes(it.val())
	return it.val()
}

// snapshot returns the snapshot id names, taking the newest published
// state when id is 0.
func (c *conn) snapshot(id uint64) (*tree, uint64, bool) {
	if id == 0 {
		p := c.s.pub.Load()
		return p.tree, c.s.snaps.take(p.tree), true
	}
	t := c.s.snaps.get(id)
	return t, id, t != nil
}

// Stats are the server's figures, as OpStats returns them.
type Stats struct {
	Keys            int
	Inodes          int64
	Index           uint64
	CheckpointIndex uint64
	CheckpointBytes int64
	Snapshots       int
	// HeapBytes is the Go heap in use after the last collection's
	// accounting; SysBytes what the process got from the system.
	HeapBytes uint64
	SysBytes  uint64
	// HeapBytesPerInode is HeapBytes over Inodes: what a file costs.
	HeapBytesPerInode float64
	// Pages hold the records, PageBytes the memory they take; of them,
	// PagesCompressed (idle ones) take PageCompressedBytes.
	Pages               int
	PageBytes           int
	PagesCompressed     int
	PageCompressedBytes int
	Dir                 string
	// AnyMemberReads counts the reads this server answered for mounts
	// that read from any member (read=follower).
	AnyMemberReads uint64
	// Raft is the member's view of its group; nil for a single server.
	Raft *RaftStats `json:",omitempty"`
	// Digest is a SHA-256 of the published records (asked for with
	// wire.StatsDigest): members at the same Index have the same.
	Digest string `json:",omitempty"`
}

// Stats returns the server's figures now.
func (s *Server) Stats() Stats {
	p := s.pub.Load()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return Stats{
		Keys:                p.tree.Len(),
		Index:               p.index,
		CheckpointIndex:     s.cpIndex.Load(),
		CheckpointBytes:     s.cpSize.Load(),
		Snapshots:           s.snaps.len(),
		HeapBytes:           ms.HeapAlloc,
		SysBytes:            ms.Sys,
		Inodes:              p.inodes,
		HeapBytesPerInode:   float64(ms.HeapAlloc) / float64(max(p.inodes, 1)),
		Pages:               p.tree.pages.Len(),
		PageBytes:           p.tree.bytes,
		PagesCompressed:     p.tree.zpages,
		PageCompressedBytes: p.tree.zbytes,
		Dir:                 s.opts.Dir,
		AnyMemberReads:      s.anyReads.Load(),
		Raft:                s.raftStats(),
	}
}

// digest returns a SHA-256 of t's records in key order, in hex.
func digest(t *tree) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	t.Ascend(func(it item) bool {
		for _, p := range [][]byte{it.key(), it.val()} {
			h.Write(n[:binary.PutUvarint(n[:], uint64(len(p)))])
			h.Write(p)
		}
		return true
	})
	return hex.EncodeToString(h.Sum(nil))
}
