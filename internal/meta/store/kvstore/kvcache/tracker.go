package kvcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Tracker keeps a Cache current from a Stream: it opens a session, sends
// the reads, listings and barriers the cache asks for and a barrier every
// PingEvery, and hands every report and reply to the cache in stream
// order. When a session ends it empties the cache and opens another one,
// with backoff.
type Tracker struct {
	c      *Cache
	s      Stream
	log    *slog.Logger
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	done   chan struct{}

	// late fires RefetchDelay after a read was delayed (Cache.SetOnLater)
	// while armed was false; a command sent before takes the delayed
	// reads along and stops it.
	late  *time.Timer
	armed atomic.Bool

	// mu orders the requests sent on sess with their entries in fifo.
	mu   sync.Mutex
	sess Session // nil between sessions
	fifo []pending
}

// pending is a request sent and not answered yet.
type pending struct {
	sent  time.Time
	req   Request
	seq   uint64 // the cache's number of a Read, a List or a Call
	fence string // the group of a fence's Barrier
	reply chan result
	// then, for a Call, runs on the reply before the caller gets it (see
	// Call).
	then func(seq uint64, reply any)
}

// result is a Call's reply or error.
type result struct {
	v   any
	err error
}

// ErrNoSession reports that the stream is down: a Call then goes
// elsewhere.
var ErrNoSession = errors.New("the cache's stream is down")

// ReadBatch is the most keys one Read asks for.
const ReadBatch = 256

// NewTracker starts keeping c current from s.
func NewTracker(c *Cache, s Stream, log *slog.Logger) *Tracker {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Tracker{c: c, s: s, log: log, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	t.late = time.NewTimer(RefetchDelay)
	t.late.Stop()
	c.SetOnLater(t.armLate)
	go t.run()
	return t
}

// armLate starts the timer of delayed reads unless it runs. It is called
// by the cache, from whichever goroutine delayed a read (most often the
// session's, for a report of the handle's own commit), and does not wake
// the writer: a commit sent within RefetchDelay takes the reads along.
func (t *Tracker) armLate() {
	if t.armed.CompareAndSwap(false, true) {
		t.late.Reset(RefetchDelay)
	}
}

// disarmLate stops the timer of delayed reads, before they are taken
// (Cache.Due): a read delayed after that arms it again.
func (t *Tracker) disarmLate() {
	if t.armed.CompareAndSwap(true, false) {
		t.late.Stop()
	}
}

// Close stops the tracker and waits for it; the cache stays off.
func (t *Tracker) Close() {
	t.cancel()
	t.Drop()
	<-t.done
}

func (t *Tracker) run() {
	defer close(t.done)
	wait := 100 * time.Millisecond
	for {
		start := time.Now()
		err := t.session()
		t.c.Reset(true)
		if errors.Is(err, ErrUnsupported) {
			t.log.Warn("metadata cache off", "err", err)
			return
		}
		if time.Since(start) > 10*time.Second {
			wait = 100 * time.Millisecond
		}
		select {
		case <-t.ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// session runs one session until it ends or the tracker stops.
func (t *Tracker) session() error {
	sent := time.Now()
	sess, err := t.s.Open(t.ctx)
	if err != nil {
		return err
	}
	defer sess.Close()
	t.mu.Lock()
	if t.ctx.Err() != nil {
		t.mu.Unlock()
		return nil
	}
	t.sess, t.fifo = sess, nil
	t.mu.Unlock()
	t.c.Up(sent)

	quit := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() { writerDone <- t.write(sess, quit) }()
	defer func() {
		close(quit)
		sess.Close()
		<-writerDone
		t.mu.Lock()
		fifo := t.fifo
		t.sess, t.fifo = nil, nil
		t.mu.Unlock()
		for _, p := range fifo {
			if p.reply != nil {
				p.reply <- result{err: errors.New("the cache's stream was lost")}
			}
		}
	}()
	for {
		m, err := sess.Receive()
		if err != nil {
			if t.ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("cache stream: %w", err)
		}
		if m.Report {
			if m.All {
				t.c.Reset(false)
			} else {
				t.c.Invalidated(m.Keys)
			}
			continue
		}
		t.mu.Lock()
		if len(t.fifo) == 0 {
			t.mu.Unlock()
			return errors.New("cache stream: a reply to no request")
		}
		p := t.fifo[0]
		t.fifo = t.fifo[1:]
		t.mu.Unlock()
		if err := t.answered(p, m); err != nil {
			return fmt.Errorf("cache stream: %w", err)
		}
	}
}

// answered hands the reply m to the request p it answers: a Call's
// caller, or the cache. A refused request other than a Call ends the
// session.
func (t *Tracker) answered(p pending, m Message) error {
	if p.reply != nil {
		if m.Err == nil && p.then != nil {
			p.then(p.seq, m.Reply)
		}
		p.reply <- result{v: m.Reply, err: m.Err}
		return nil
	}
	if m.Err != nil {
		return m.Err
	}
	switch p.req.Kind {
	case Barrier:
		t.c.Ack(p.sent)
		if p.fence != "" {
			t.c.Unfence(p.fence)
		}
	case List:
		keys, ok := m.Reply.([]string)
		if !ok {
			return fmt.Errorf("listing of %q: a reply of %T", p.req.Dir, m.Reply)
		}
		t.c.Listed(p.seq, p.req.Dir, keys)
	case Read:
		vals, ok := m.Reply.([][]byte)
		if !ok || len(vals) != len(p.req.Keys) {
			return fmt.Errorf("read of %d keys: a reply of %T", len(p.req.Keys), m.Reply)
		}
		t.c.Filled(p.seq, p.req.Keys, vals)
	}
	return nil
}

// write sends the cache's requests and the pings until quit or an error.
func (t *Tracker) write(sess Session, quit chan struct{}) error {
	tick := time.NewTicker(PingEvery)
	defer tick.Stop()
	var reqs []Request
	for {
		ping := false
		select {
		case <-quit:
			return nil
		case <-tick.C:
			ping = true
		case <-t.c.Kick():
		case <-t.late.C:
		}
		t.mu.Lock()
		reqs = t.gather(reqs[:0], ping)
		var err error
		if len(reqs) > 0 {
			err = sess.Send(reqs)
		}
		t.mu.Unlock()
		if err != nil {
			sess.Close()
			return err
		}
	}
}

// gather appends to reqs, and records in fifo, what the cache has to
// send: a barrier first with ping, then the fences' barriers, the
// listings, and the reads, delayed ones included (Due). The caller holds
// mu and sends reqs before it lets go of it.
func (t *Tracker) gather(reqs []Request, ping bool) []Request {
	t.disarmLate()
	t.c.Due()
	now := time.Now()
	add := func(p pending) {
		p.sent = now
		t.fifo = append(t.fifo, p)
		reqs = append(reqs, p.req)
	}
	if ping {
		add(pending{req: Request{Kind: Barrier}})
	}
	for _, g := range t.c.TakeFences() {
		add(pending{req: Request{Kind: Barrier}, fence: g})
	}
	dirs, seq := t.c.TakeLists()
	for _, g := range dirs {
		add(pending{req: Request{Kind: List, Dir: g}, seq: seq})
	}
	for {
		keys, seq := t.c.Take(ReadBatch)
		if len(keys) == 0 {
			break
		}
		add(pending{req: Request{Kind: Read, Keys: keys}, seq: seq})
	}
	return reqs
}

// Call runs the engine's command cmd on the stream and waits for its
// reply, which comes in order with the reports. Whatever the cache has
// to send goes first, in the same write (see gather): the reads again of
// keys the handle's last commits changed ride on its next one rather
// than costing a command and two wake-ups each. then, if not nil, is
// called with the cache's number of the command (see Cache.Seq) and the
// reply (not with an error) where the reply arrives in the stream, before
// any later report is handled, so that what it tells the cache (see
// Cache.Committed) is known to be current until a report says otherwise:
// the caller itself may run long after, when later changes have been
// reported. An error the server answered is returned as is. Call fails
// with ErrNoSession, having sent nothing, when the stream is down.
func (t *Tracker) Call(ctx context.Context, cmd any, then func(seq uint64, reply any)) (any, error) {
	reply := make(chan result, 1)
	t.mu.Lock()
	sess := t.sess
	if sess == nil {
		t.mu.Unlock()
		return nil, ErrNoSession
	}
	reqs := t.gather(nil, false)
	req := Request{Kind: Call, Cmd: cmd}
	t.fifo = append(t.fifo, pending{sent: time.Now(), req: req, seq: t.c.Seq(), reply: reply, then: then})
	err := sess.Send(append(reqs, req))
	t.mu.Unlock()
	if err != nil {
		sess.Close()
		return nil, fmt.Errorf("cache stream: %w", err)
	}
	select {
	case r := <-reply:
		return r.v, r.err
	case <-ctx.Done():
		// The reply, when it comes, goes to the buffered channel.
		return nil, ctx.Err()
	}
}

// Drop ends the current session, if any, so that the tracker opens
// another one (a Stream may then find its server anew).
func (t *Tracker) Drop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sess != nil {
		t.sess.Close()
	}
}
