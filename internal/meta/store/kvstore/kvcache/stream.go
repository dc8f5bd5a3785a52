package kvcache

import (
	"context"
	"errors"
)

// Stream is what an engine provides to keep a Cache current: sessions
// of one ordered channel to the server that holds the keys. Redis
// implements it with CLIENT TRACKING on a RESP3 connection; an etcd
// watch (reports) beside reads at the watch's revision, with progress
// notifications as barriers, or a metadata server's change stream, fit
// the same shape.
type Stream interface {
	// Open starts a session. From the moment Open returns, the session
	// reports every change of the keys made after a moment before Open
	// was called. An error wrapping ErrUnsupported says that the server
	// can never report changes: the Tracker stops and the cache stays
	// off.
	Open(ctx context.Context) (Session, error)
}

// ErrUnsupported reports a server that cannot keep a cache current.
var ErrUnsupported = errors.New("the server cannot report changes of keys")

// Session is one session of a Stream. Send and Receive are each called
// from one goroutine, concurrently with each other.
type Session interface {
	// Send sends requests in order; their replies come back from Receive
	// in the same order.
	Send(reqs []Request) error
	// Receive returns the next message of the stream: a report of changed
	// keys, or the reply to the oldest request not answered yet. A reply
	// to a request reflects every change reported before it, and the
	// report of a change made after the request ran comes after it. It
	// fails when nothing arrives for Lease+PingEvery, so that a stalled
	// session ends.
	Receive() (Message, error)
	// Close ends the session; a blocked Receive or Send returns.
	Close() error
}

// RequestKind says what a Request asks for and what its reply holds.
type RequestKind uint8

// Kinds of requests.
const (
	// Read asks for the values of Keys: Reply is a [][]byte of as many
	// values, nil for a missing key.
	Read RequestKind = iota
	// List asks for the entry keys of directory Dir (see Layout.Dir),
	// more than DirMax of them being as good as all: Reply is a
	// []string of keys.
	List
	// Barrier asks for nothing: its reply proves that every change made
	// before it ran has been reported. Reply is nil.
	Barrier
	// Call runs an engine's command (Cmd), such as a commit, on the
	// session, so that what its reply shows is current in stream order
	// (see Tracker.Call). Reply is the engine's.
	Call
)

// Request is one request sent on a session.
type Request struct {
	Kind RequestKind
	Keys []string // Read
	Dir  string   // List
	Cmd  any      // Call: the engine's command
}

// Message is what Receive returns.
type Message struct {
	// Report is true for a report of changed keys: Keys, or, with All,
	// every key (the server dropped its promises).
	Report bool
	Keys   []string
	All    bool
	// Reply is the reply to a request (see RequestKind), unless Err: the
	// server refused the request. A refused request other than a Call
	// ends the session.
	Reply any
	Err   error
}
