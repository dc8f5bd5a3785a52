package metaserver

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/sluice"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/wire"
)

// Whole operations. A mount attaches its session (OpAttach) and then
// sends each metadata operation in one OpCall; the server runs it with
// the POSIX core (package meta, a client attached to the session) whose
// transactions it serves in process, through the same code as a
// connection's requests: a snapshot read, a commit into the apply loop,
// acknowledged once durable. See package remote.

// rememberedCalls is how many replies of a session's last calls the
// server keeps to answer a call sent again.
const rememberedCalls = 1024

// sessionIdle is how long an attached session may go without a call
// before the server drops it; the mount attaches it again at its next.
const sessionIdle = 30 * time.Minute

// sessions are the attached sessions, by session id.
type sessions struct {
	mu sync.Mutex
	m  map[uint64]*session
	st store.Store // the server's records, served in process

	workers workers
}

// session is one attached session.
type session struct {
	mc     *meta.Session
	client uint64 // the DB id of the mount that attached it

	mu       sync.Mutex // guards the rest
	calls    map[uint64]*call
	order    []uint64 // call numbers in calls, oldest first
	inflight int
	used     time.Time
}

// call is one call of a session, running or answered.
type call struct {
	done   chan struct{} // closed when status and body are set
	status byte
	body   []byte
}

func (s *Server) initSessions() {
	var id [8]byte
	rand.Read(id[:])
	l := &localConn{waiting: map[uint64]chan []byte{}}
	l.c = &conn{s: s, sink: l.deliver, done: make(chan struct{})}
	db := sluice.NewLocal("sluice meta-server "+s.opts.Dir, binary.BigEndian.Uint64(id[:]), l.call)
	s.sess = &sessions{m: map[uint64]*session{}, st: kvstore.New(db), workers: workers{jobs: make(chan func())}}
}

// attach makes sid attached for client, with the handles it holds open.
// A session already attached for the same client is kept as it is (an
// attach sent again).
func (s *Server) attach(ctx context.Context, sid, client uint64, conf meta.Config, open map[meta.Ino]int) error {
	ss := s.sess
	ss.mu.Lock()
	cur := ss.m[sid]
	ss.mu.Unlock()
	if cur != nil && cur.client == client {
		return nil
	}
	conf.Logger = s.log
	mc, err := meta.Attach(ctx, ss.st, sid, open, conf)
	if err != nil {
		return err
	}
	se := &session{mc: mc, client: client, calls: map[uint64]*call{}, used: time.Now()}
	ss.mu.Lock()
	old := ss.m[sid]
	ss.m[sid] = se
	ss.mu.Unlock()
	s.m.sessions.Set(float64(ss.len()))
	if old != nil {
		go old.mc.Close(context.Background())
	}
	s.log.Info("session attached", "sid", sid, "open", len(open))
	return nil
}

// detach drops sid.
func (s *Server) detach(ctx context.Context, sid uint64) error {
	ss := s.sess
	ss.mu.Lock()
	se := ss.m[sid]
	delete(ss.m, sid)
	ss.mu.Unlock()
	s.m.sessions.Set(float64(ss.len()))
	if se == nil {
		return nil
	}
	return se.mc.Close(ctx)
}

func (ss *sessions) len() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.m)
}

func (ss *sessions) get(sid uint64) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.m[sid]
}

// begin registers call seq of client and reports whether it is new; a
// call seen before returns the one to wait for.
func (se *session) begin(client, seq uint64) (*call, bool) {
	se.mu.Lock()
	defer se.mu.Unlock()
	se.used = time.Now()
	if c := se.calls[seq]; c != nil && client == se.client {
		return c, false
	}
	c := &call{done: make(chan struct{})}
	se.calls[seq] = c
	se.order = append(se.order, seq)
	if len(se.order) > rememberedCalls {
		delete(se.calls, se.order[0])
		se.order = se.order[1:]
	}
	se.inflight++
	return c, true
}

// end records the reply of c.
func (se *session) end(c *call, status byte, body []byte) {
	c.status, c.body = status, body
	close(c.done)
	se.mu.Lock()
	se.inflight--
	se.used = time.Now()
	se.mu.Unlock()
}

// reapSessions drops sessions idle for sessionIdle until end is closed.
func (s *Server) reapSessions(end <-chan struct{}) {
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-end:
			return
		case now := <-tick.C:
			var idle []uint64
			ss := s.sess
			ss.mu.Lock()
			for sid, se := range ss.m {
				se.mu.Lock()
				if se.inflight == 0 && now.Sub(se.used) > sessionIdle {
					idle = append(idle, sid)
				}
				se.mu.Unlock()
			}
			ss.mu.Unlock()
			for _, sid := range idle {
				if err := s.detach(context.Background(), sid); err != nil {
					s.log.Warn("drop idle session", "sid", sid, "err", err)
				}
			}
		}
	}
}

// closeSessions drops every session, flushing what they counted.
func (s *Server) closeSessions(ctx context.Context) {
	s.sess.mu.Lock()
	sids := make([]uint64, 0, len(s.sess.m))
	for sid := range s.sess.m {
		sids = append(sids, sid)
	}
	s.sess.mu.Unlock()
	for _, sid := range sids {
		if err := s.detach(ctx, sid); err != nil {
			s.log.Warn("close session", "sid", sid, "err", err)
		}
	}
}

// serveCall serves an OpCall on c. A call that only reads runs here, on
// the goroutine reading c's requests, and its reply goes out with the
// next flush, as a get's does; one that may commit or wait for a lock
// runs on a goroutine of its own.
func (c *conn) serveCall(f wire.Frame, start time.Time) {
	s := c.s
	r := wire.NewReader(f.Body)
	sid, client, seq, flags := r.U64(), r.U64(), r.U64(), r.Byte()
	if r.Err() != nil {
		c.fail(f.ID, r.Err())
		return
	}
	se := s.sess.get(sid)
	if se == nil {
		c.reply(f.ID, wire.StatusNoSession, nil)
		return
	}
	call, err := wire.Decode(r)
	if err != nil {
		c.fail(f.ID, err)
		return
	}
	run := call.Run
	op := "call_" + call.Name
	if call.Class == wire.ClassRead {
		status, body := runCall(context.Background(), se.mc, run)
		s.m.observe(op, start)
		c.replyCall(f.ID, status, body, false)
		return
	}
	cl, fresh := se.begin(client, seq)
	if !fresh {
		s.m.retriedCalls.Inc()
		go func() {
			<-cl.done
			c.replyCall(f.ID, cl.status, cl.body, true)
		}()
		return
	}
	ctx := context.Background()
	if call.Applied != nil {
		// Its effect's commit says so in the log (see callTable).
		ctx = store.WithCall(ctx, store.CallTag{Session: sid, Call: seq})
	}
	if flags&wire.CallSentAgain != 0 {
		// Not remembered, yet sent before: the server may have run it
		// before a restart.
		if call.Applied != nil && s.calls.applied(sid, seq) {
			s.m.appliedCalls.Inc()
			run = call.Applied
		} else {
			ctx = meta.WithSentAgain(ctx)
		}
	}
	if call.Class == wire.ClassHandles {
		status, body := runCall(ctx, se.mc, run)
		se.end(cl, status, body)
		s.m.observe(op, start)
		c.replyCall(f.ID, status, body, false)
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	c.cmu.Lock()
	if c.cancels == nil {
		c.cancels = map[uint64]context.CancelFunc{}
	}
	c.cancels[f.ID] = cancel
	c.cmu.Unlock()
	job := func() {
		status, body := runCall(ctx, se.mc, run)
		c.cmu.Lock()
		delete(c.cancels, f.ID)
		c.cmu.Unlock()
		cancel()
		se.end(cl, status, body)
		s.m.observe(op, start)
		c.replyCall(f.ID, status, body, true)
	}
	if c.sink != nil {
		s.sess.workers.run(job)
		return
	}
	// Run on the goroutine that read the request, once it has handed the
	// reading on (readFrom): the call's commit then reaches the apply
	// loop with no hand-off between goroutines on its way, each of which
	// costs tens of microseconds when the CPU it wakes was idle.
	c.inline = job
}

// workers run the calls that may wait (commits, lock waits) on
// goroutines kept between calls, whose stacks have grown already.
type workers struct {
	jobs chan func() // unbuffered: a send succeeds when a worker waits
}

// workerIdle is how long a worker waits for a call before it ends.
const workerIdle = 10 * time.Second

// run runs job on an idle worker, or on a new one.
func (w *workers) run(job func()) {
	select {
	case w.jobs <- job:
	default:
		go w.work(job)
	}
}

func (w *workers) work(job func()) {
	job()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		select {
		case job := <-w.jobs:
			job()
			idle.Reset(workerIdle)
		case <-idle.C:
			return
		}
	}
}

// runCall runs a decoded call and returns its reply's status and body.
func runCall(ctx context.Context, t wire.Target, run wire.RunFunc) (byte, []byte) {
	out := wire.NewBuf(64)
	if err := run(ctx, t, out); err != nil {
		out = wire.NewBuf(64)
		wire.EncodeError(out, err)
		return wire.StatusErrno, out.Raw()
	}
	return wire.StatusOK, out.Raw()
}

// replyCall queues the reply of a call, with the index of the records
// published now before its results or failure (the call's own changes
// are published by the time it ends); wake has the connection's writer
// send it (from a goroutine other than the reader's).
func (c *conn) replyCall(id uint64, status byte, body []byte, wake bool) {
	b := wire.NewFrame(id, status)
	switch status {
	case wire.StatusError:
		b.Bytes(body)
	case wire.StatusOK, wire.StatusErrno:
		b.U64(c.s.pub.Load().index)
		b.Append(body)
	default:
		b.Append(body)
	}
	c.queue(b.Finish(), wake)
}

// cancelCall stops the call that request id of c runs.
func (c *conn) cancelCall(id uint64) {
	c.cmu.Lock()
	cancel := c.cancels[id]
	c.cmu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// decodeAttach reads an OpAttach body.
func decodeAttach(body []byte) (sid, client uint64, conf meta.Config, open map[meta.Ino]int, err error) {
	r := wire.NewReader(body)
	sid, client, atime := r.U64(), r.U64(), string(r.Bytes())
	reuse := r.Uvarint()
	n := r.Count(9)
	open = make(map[meta.Ino]int, n)
	for i := 0; i < n; i++ {
		ino := meta.Ino(r.U64())
		open[ino] += int(r.Uvarint())
	}
	if err := r.Done(); err != nil {
		return 0, 0, meta.Config{}, nil, err
	}
	switch atime {
	case "", meta.AtimeNone, meta.AtimeRelative, meta.AtimeStrict:
	default:
		return 0, 0, meta.Config{}, nil, fmt.Errorf("atime mode %q: %w", atime, wire.ErrFrame)
	}
	if reuse > uint64(time.Hour) {
		return 0, 0, meta.Config{}, nil, fmt.Errorf("directory attributes reuse of %v: %w", time.Duration(reuse), wire.ErrFrame)
	}
	return sid, client, meta.Config{AtimeMode: atime, DirAttrReuse: time.Duration(reuse)}, open, nil
}

// localConn serves the in-process requests of the sessions' POSIX core
// through conn.handle, as if they came from a connection.
type localConn struct {
	c       *conn
	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan []byte
}

func (l *localConn) call(ctx context.Context, op byte, fill func(*wire.Buf)) (wire.Frame, error) {
	l.mu.Lock()
	l.next++
	id := l.next
	l.mu.Unlock()
	b := wire.NewFrame(id, op)
	if fill != nil {
		fill(b)
	}
	raw := b.Finish()
	f := wire.Frame{ID: id, Kind: op, Body: raw[13:]}
	if op == wire.OpRelease {
		l.c.handle(f)
		return wire.Frame{}, nil
	}
	ch := make(chan []byte, 1)
	l.mu.Lock()
	l.waiting[id] = ch
	l.mu.Unlock()
	l.c.handle(f)
	select {
	case r := <-ch:
		return wire.Frame{ID: id, Kind: r[12], Body: r[13:]}, nil
	case <-ctx.Done():
		l.mu.Lock()
		delete(l.waiting, id)
		l.mu.Unlock()
		return wire.Frame{}, ctx.Err()
	}
}

// deliver hands a reply to its caller.
func (l *localConn) deliver(frame []byte) {
	id := binary.BigEndian.Uint64(frame[4:12])
	l.mu.Lock()
	ch := l.waiting[id]
	delete(l.waiting, id)
	l.mu.Unlock()
	if ch != nil {
		ch <- frame
	}
}
