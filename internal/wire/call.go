package wire

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta"
)

// An OpCall carries one metadata operation of meta.Ops, whole, from a
// mount to the metadata server. Its body is the session, client, call
// number and flags (serveCall in package metaserver), then the method's
// number, the caller's credentials and the method's arguments; the reply
// is the method's results (StatusOK) or its failure (StatusErrno,
// EncodeError). Everything per method comes from one entry of the
// operation table (ops.go): the client's stubs (internal/meta/remote)
// encode with it, and the server decodes and runs with it (Decode).

// Class tells what the server may do with a call of an operation: where
// it runs, whether its reply is remembered for a call sent again, and how
// a call sent again after a restart is answered.
type Class uint8

const (
	// ClassRead only reads: it runs where the request is read, and a call
	// sent again simply runs again.
	ClassRead Class = iota + 1
	// ClassHandles changes only the session's count of open handles on the
	// server (open, created): it runs where the request is read, commits
	// nothing, and its reply is remembered.
	ClassHandles
	// ClassWrite may commit a transaction or wait for a lock: it runs on a
	// goroutine of its own and its reply is remembered. A call sent again
	// that the server no longer remembers (it restarted) runs again,
	// under meta.WithSentAgain.
	ClassWrite
	// ClassRecorded is a ClassWrite whose commit records the call (store.WithCall),
	// so that a call sent again after a restart whose effect the records
	// hold is answered by the operation's Applied instead of running
	// twice.
	ClassRecorded
)

// String names the class, as in test failures.
func (c Class) String() string {
	switch c {
	case ClassRead:
		return "read"
	case ClassHandles:
		return "handles"
	case ClassWrite:
		return "write"
	case ClassRecorded:
		return "recorded"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// Target is what the server runs a call on: the session's POSIX core,
// attached on the server (meta.Attach), and its caches, whose remembered
// directory attributes a reply carries back (Op.Dirs).
type Target interface {
	meta.Ops
	meta.TmpfileCreator
	Caches() meta.Caches
}

// Codec encodes and decodes one value of a call or a reply.
type Codec[T any] struct {
	Put func(*Buf, T)
	Get func(*Reader) T
}

// Op is one operation of the table: its number on the wire (never
// reused), its name in metrics, its class, the codecs of its arguments
// and results, and what the server runs.
type Op[A, R any] struct {
	Method uint64
	Name   string
	Class  Class
	Args   Codec[A]
	Result Codec[R]
	// Serve runs the operation on the server.
	Serve func(ctx context.Context, t Target, a A) (R, error)
	// Dirs, when set, names the directories whose entries the operation
	// changes: the reply carries after the results the attributes the
	// session remembers of them after the change (meta.Caches.Dir), so
	// that the mount answers the kernel's next getattr of them without a
	// round trip.
	Dirs func(a A) []meta.Ino
	// Applied answers a ClassRecorded call sent again whose effect the
	// records hold: the server applied it, lost the reply (it restarted),
	// and the mount sent it again. A create answers the node its name
	// holds, an unlink or a rename nothing.
	Applied func(ctx context.Context, t Target, a A) (R, error)
	// AnyMember marks a ClassRead operation whose answer depends on the
	// records alone, not on the session that asks (its locks, its open
	// handles): any member of a replicated group may answer it from its
	// own copy (OpReadCall), for a mount that reads from followers.
	AnyMember bool
}

// RunFunc runs a decoded call on t and appends its results to out.
type RunFunc func(ctx context.Context, t Target, out *Buf) error

// Call is a decoded OpCall.
type Call struct {
	Name  string
	Class Class
	// Run runs the call.
	Run RunFunc
	// Applied, set for a ClassRecorded call, answers it without running it
	// (Op.Applied).
	Applied RunFunc
	// AnyMember: any member may answer the call (Op.AnyMember).
	AnyMember bool
}

// Request appends an OpCall's method, credentials and arguments a to b:
// the client's half of op.
func (op *Op[A, R]) Request(b *Buf, cred meta.Cred, a A) {
	b.Uvarint(op.Method)
	putCred(b, cred)
	op.Args.Put(b, a)
}

// Reply reads op's results from a reply's body, and the directories'
// attributes when op has Dirs.
func (op *Op[A, R]) Reply(r *Reader) (R, []*meta.Attr) {
	res := op.Result.Get(r)
	if op.Dirs == nil {
		return res, nil
	}
	n := r.Count(1)
	dirs := make([]*meta.Attr, 0, n)
	for i := 0; i < n; i++ {
		dirs = append(dirs, getAttr(r))
	}
	return res, dirs
}

// entry is an operation of the table whatever its types.
type entry interface {
	info() (method uint64, name string, class Class)
	anyMember() bool
	decode(r *Reader, cred meta.Cred) (run, applied RunFunc)
	check() error
}

func (op *Op[A, R]) info() (uint64, string, Class) { return op.Method, op.Name, op.Class }

func (op *Op[A, R]) anyMember() bool { return op.AnyMember }

func (op *Op[A, R]) decode(r *Reader, cred meta.Cred) (run, applied RunFunc) {
	a := op.Args.Get(r)
	run = func(ctx context.Context, t Target, out *Buf) error {
		res, err := op.Serve(meta.WithCred(ctx, cred), t, a)
		op.Result.Put(out, res)
		if op.Dirs != nil {
			putDirs(out, t, op.Dirs(a))
		}
		return err
	}
	if op.Applied != nil {
		applied = func(ctx context.Context, t Target, out *Buf) error {
			res, err := op.Applied(meta.WithCred(ctx, cred), t, a)
			op.Result.Put(out, res)
			if op.Dirs != nil {
				out.Uvarint(0) // optional, and the session remembers none
			}
			return err
		}
	}
	return run, applied
}

// check tells whether op is complete and its class agrees with it.
func (op *Op[A, R]) check() error {
	switch {
	case op.Method == 0 || op.Name == "":
		return fmt.Errorf("operation %q (%d): no number or name", op.Name, op.Method)
	case op.Args.Put == nil || op.Args.Get == nil || op.Result.Put == nil || op.Result.Get == nil:
		return fmt.Errorf("operation %q: a codec is missing", op.Name)
	case op.Serve == nil:
		return fmt.Errorf("operation %q: no Serve", op.Name)
	case (op.Class == ClassRecorded) != (op.Applied != nil):
		return fmt.Errorf("operation %q: class %v with Applied %v: Recorded operations, and only they, have Applied", op.Name, op.Class, op.Applied != nil)
	case op.Class < ClassRead || op.Class > ClassRecorded:
		return fmt.Errorf("operation %q: no class", op.Name)
	case op.AnyMember && op.Class != ClassRead:
		return fmt.Errorf("operation %q: class %v answered by any member: only reads may be", op.Name, op.Class)
	}
	return nil
}

// putDirs appends the attributes the session remembers of the
// directories dirs, whose entries the call just changed.
func putDirs(out *Buf, t Target, dirs []meta.Ino) {
	var as []*meta.Attr
	k := t.Caches()
	for i, d := range dirs {
		if i > 0 && d == dirs[i-1] {
			continue // a rename within one directory
		}
		if a, ok := k.Dir(d); ok {
			as = append(as, a)
		}
	}
	out.Uvarint(uint64(len(as)))
	for _, a := range as {
		putAttr(out, a)
	}
}

// Decode reads an OpCall's method, credentials and arguments from r
// (after the session, client, call number and flags) and returns the
// call. A body that does not decode, or names no method, returns an
// error wrapping ErrFrame.
func Decode(r *Reader) (*Call, error) {
	method := r.Uvarint()
	cred := getCred(r)
	if r.Err() != nil {
		return nil, r.Err()
	}
	e := lookup(method)
	if e == nil {
		return nil, fmt.Errorf("unknown method %d: %w", method, ErrFrame)
	}
	run, applied := e.decode(r, cred)
	if err := r.Done(); err != nil {
		return nil, err
	}
	_, name, class := e.info()
	return &Call{Name: name, Class: class, Run: run, Applied: applied, AnyMember: e.anyMember()}, nil
}

// byMethod indexes the table by method number.
var byMethod = func() map[uint64]entry {
	m := make(map[uint64]entry, len(table))
	for _, e := range table {
		method, _, _ := e.info()
		if _, dup := m[method]; !dup { // TestTable refuses a number given twice
			m[method] = e
		}
	}
	return m
}()

func lookup(m uint64) entry { return byMethod[m] }

// EncodeError appends err to a StatusErrno reply.
func EncodeError(b *Buf, err error) {
	kind := uint64(ErrnoIO)
	errno := meta.Errno(err)
	var e syscall.Errno
	switch {
	case errors.Is(err, meta.ErrNoInode):
		kind = ErrnoNoInode
	case errors.As(err, &e) || errno == syscall.EINTR:
		kind = ErrnoPOSIX
	}
	b.Uvarint(kind)
	b.Uvarint(uint64(errno))
	b.Bytes([]byte(err.Error()))
}

// DecodeError returns the failure a StatusErrno reply's body carries: a
// syscall.Errno for a POSIX failure, meta.ErrNoInode, or an I/O failure
// with the server's message.
func DecodeError(body []byte) error {
	r := NewReader(body)
	kind, errno, msg := r.Uvarint(), syscall.Errno(r.Uvarint()), r.Bytes()
	if err := r.Done(); err != nil {
		return fmt.Errorf("metadata server reply: %w", err)
	}
	switch kind {
	case ErrnoPOSIX:
		return errno
	case ErrnoNoInode:
		return meta.ErrNoInode
	}
	return fmt.Errorf("metadata server: %s", msg)
}

// ReplyError turns a reply of status StatusError, or of a status the
// request did not expect, into an error.
func ReplyError(f Frame) error {
	if f.Kind == StatusError {
		r := NewReader(f.Body)
		return fmt.Errorf("metadata server: %s", r.Bytes())
	}
	return fmt.Errorf("metadata server: unexpected status %d", f.Kind)
}
