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
	s := &fakeSession{sent: make(chan Request, 100), in: make(chan Message, 100), closed: make(chan struct{})}
	select {
	case f.opened <- s:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s, nil
}

type fakeSession struct {
	sent   chan Request
	in     chan Message
	once   sync.Once
	closed chan struct{}
}

func (s *fakeSession) Send(reqs []Request) error {
	for _, q := range reqs {
		s.sent <- q
	}
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

// TestTrackerCallThen checks that the outcome of a Call reaches the cache
// where its reply is in the stream: a report that follows the reply
// makes the value unusable even when the caller has not run yet, and
// the value read again is the one served.
func TestTrackerCallThen(t *testing.T) {
	f := &fakeStream{opened: make(chan *fakeSession)}
	c := New(16, Layout{Group: func(string) string { return "" }, Dir: func(string) (string, bool) { return "", false }})
	tr := NewTracker(c, f, nil)
	defer tr.Close()
	s := <-f.opened
	var mu sync.Mutex
	vals := map[string][]byte{}
	go s.serve(&mu, vals, func() []Message {
		// The commit writes v1; another client writes v2 at once.
		mu.Lock()
		vals["k"] = []byte("v2")
		mu.Unlock()
		return []Message{{Reply: "ok"}, {Report: true, Keys: []string{"k"}}}
	})
	for !c.Live() {
		time.Sleep(time.Millisecond)
	}
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
