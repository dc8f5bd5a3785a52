package kvcache

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeStream is a Stream whose sessions the test drives: requests sent
// appear on sent, and the test pushes messages for Receive on in.
type fakeStream struct {
	opened chan *fakeSession
}

func (f *fakeStream) Open(ctx context.Context) (Session, error) {
	s := &fakeSession{sent: make(chan Request, 100), batches: make(chan []Request, 100), in: make(chan Message, 100), closed: make(chan struct{})}
	select {
	case f.opened <- s:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s, nil
}

type fakeSession struct {
	sent    chan Request
	batches chan []Request // each Send's requests
	in      chan Message
	once    sync.Once
	closed  chan struct{}
}

func (s *fakeSession) Send(reqs []Request) error {
	for _, q := range reqs {
		s.sent <- q
	}
	s.batches <- append([]Request(nil), reqs...)
	return nil
}

func (s *fakeSession) Receive() (Message, error) {
	select {
	case m := <-s.in:
		return m, nil
	case <-s.closed:
		return Message{}, errors.New("closed")
	}
}

func (s *fakeSession) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

// serve answers the session's requests in order, as a server holding
// the values of vals would: barriers at once, reads from vals, and calls
// with onCall's messages (its reply, and a report of the change it made
// plus any other client's made in the same turn).
func (s *fakeSession) serve(mu *sync.Mutex, vals map[string][]byte, onCall func() []Message) {
	for {
		var q Request
		select {
		case q = <-s.sent:
		case <-s.closed:
			return
		}
		switch q.Kind {
		case Barrier:
			s.in <- Message{}
		case Read:
			mu.Lock()
			out := make([][]byte, len(q.Keys))
			for i, k := range q.Keys {
				out[i] = vals[k]
			}
			mu.Unlock()
			s.in <- Message{Reply: out}
		case Call:
			for _, m := range onCall() {
				s.in <- m
			}
		}
	}
}

// startTracker starts a Tracker of a cache with no groups on a fake
// stream, and returns them with the first session once the cache is live.
// The tracker stops when the test ends.
func startTracker(t *testing.T) (*fakeStream, *Cache, *Tracker, *fakeSession) {
	t.Helper()
	f := &fakeStream{opened: make(chan *fakeSession)}
	c := New(16, Layout{Group: func(string) string { return "" }, Dir: func(string) (string, bool) { return "", false }})
	tr := NewTracker(c, f, nil)
	t.Cleanup(tr.Close)
	s := <-f.opened
	for !c.Live() {
		time.Sleep(time.Millisecond)
	}
	return f, c, tr, s
}

// TestTrackerCallThen checks that the outcome of a Call reaches the cache
// where its reply is in the stream: a report that follows the reply
// makes the value unusable even when the caller has not run yet, and
// the value read again is the one served.
func TestTrackerCallThen(t *testing.T) {
	f, c, tr, s := startTracker(t)
	var mu sync.Mutex
	vals := map[string][]byte{}
	go s.serve(&mu, vals, func() []Message {
		// The commit writes v1; another client writes v2 at once.
		mu.Lock()
		vals["k"] = []byte("v2")
		mu.Unlock()
		return []Message{{Reply: "ok"}, {Report: true, Keys: []string{"k"}}}
	})
	block := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := tr.Call(context.Background(), "commit", func(seq uint64, reply any) {
			c.Committed(seq, nil, map[string][]byte{"k": []byte("v1")}, true)
		})
		<-block // the caller runs late
		done <- err
	}()
	for {
		v, ok := c.Get("k")
		if ok && string(v) == "v2" {
			break
		}
		if ok && string(v) != "v1" {
			t.Fatalf("get = %q, want v1 or v2", v)
		}
		time.Sleep(time.Millisecond)
	}
	close(block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A lost session empties the cache, and the tracker opens another.
	s.Close()
	s2 := <-f.opened
	defer s2.Close()
	if v, ok := c.Get("k"); ok {
		t.Fatalf("get = %q after the session was lost", v)
	}
}

// TestTrackerDelayedReads checks where the reads the cache delays go: a
// Call takes them along, before itself and in the same write, so that a
// commit after a report costs no read of its own; without a Call the
// timer of delayed reads sends them, not the next ping.
func TestTrackerDelayedReads(t *testing.T) {
	_, c, tr, s := startTracker(t)
	kinds := func(b []Request) (out []RequestKind) {
		for _, q := range b {
			out = append(out, q.Kind)
		}
		return out
	}
	next := func() []Request {
		t.Helper()
		for {
			select {
			case b := <-s.batches:
				if len(b) == 1 && b[0].Kind == Barrier {
					s.in <- Message{} // a ping: answer it, look further
					continue
				}
				return b
			case <-time.After(10 * time.Second):
				t.Fatal("nothing sent")
				return nil
			}
		}
	}

	// A report, then a commit: one write, the read first.
	c.Committed(c.Seq(), map[string][]byte{"k": []byte("v0")}, nil, false)
	c.Invalidated([]string{"k"})
	done := make(chan error, 1)
	go func() {
		_, err := tr.Call(context.Background(), "commit", nil)
		done <- err
	}()
	b := next()
	if len(b) != 2 || b[0].Kind != Read || len(b[0].Keys) != 1 || b[0].Keys[0] != "k" || b[1].Kind != Call {
		t.Fatalf("the commit's write held %v (keys %q); want the delayed read of k, then the call", kinds(b), b[0].Keys)
	}
	s.in <- Message{Reply: [][]byte{[]byte("v1")}}
	s.in <- Message{Reply: "ok"}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v, ok := c.Get("k"); !ok || string(v) != "v1" {
		t.Fatalf("get = %q, %v; want the value read with the commit, v1", v, ok)
	}

	// A report and no commit: the timer sends the read on its own.
	c.Invalidated([]string{"k"})
	b = next()
	if len(b) != 1 || b[0].Kind != Read {
		t.Fatalf("sent %v after a report; want the delayed read alone", kinds(b))
	}
	s.in <- Message{Reply: [][]byte{[]byte("v2")}}
	for {
		if v, ok := c.Get("k"); ok {
			if string(v) != "v2" {
				t.Fatalf("get = %q; want v2", v)
			}
			break
		}
		time.Sleep(time.Millisecond)
	}
}
