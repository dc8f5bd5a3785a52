// Package wire is the binary protocol between the in-memory metadata
// server (package metaserver) and its clients (engine sluice): frames over
// one TCP connection, each carrying a request id so that many requests are
// in flight at once and replies come back in any order.
//
// A frame is a 4-byte big-endian length, then that many bytes: an 8-byte
// request id, one byte of operation (requests) or status (replies), and a
// body. Bodies are built from unsigned varints and length-prefixed byte
// strings (Buf, Reader). A frame longer than MaxFrame is refused: the
// reader returns an error and the connection is closed, so a bad or
// hostile peer can cost a connection, never the server.
//
// Before the first frame, a connection runs the handshake of auth.go
// (AuthServer, AuthClient): each side proves it holds the volume's
// secret, for one purpose, without sending it.
package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Version is the protocol version a client announces in OpHello.
const Version = 4

// MaxFrame bounds the length of one frame. A commit that writes more
// than this in one transaction is refused by the client before it is
// sent.
const MaxFrame = 256 << 20

// Operations (request frames).
const (
	// OpHello: uvarint version, bytes volume name, and optionally byte
	// flags (HelloAnyMember). Reply: bytes server description.
	OpHello byte = 1
	// OpGet: u64 snapshot (0: take the newest), uvarint n, n keys.
	// Reply: u64 snapshot, uvarint n, n values (byte present, bytes).
	OpGet byte = 2
	// OpScan: u64 snapshot, varint limit, uvarint n, n ranges (bytes
	// begin, byte bounded, bytes end when bounded). Reply: u64 snapshot,
	// uvarint n, per range uvarint count and count pairs (bytes, bytes).
	OpScan byte = 3
	// OpCommit: u64 snapshot (0: nothing read), u64 client, u64 txn,
	// uvarint reads and their keys, uvarint ranges (as OpScan), uvarint
	// writes (bytes key, byte kind, bytes value when kind is WriteSet),
	// and, for a commit that is a mount's call's effect, u64 session and
	// u64 call. Reply: empty, or StatusConflict.
	OpCommit byte = 4
	// OpRelease: uvarint n, n snapshots. No reply.
	OpRelease byte = 5
	// OpStats: empty, or byte flags (StatsDigest). Reply: bytes JSON of
	// the server's figures. Every member of a replicated group answers
	// it, leader or not.
	OpStats byte = 6
	// OpGetFollow: u64 snapshot, Follow rule, uvarint n, n keys each
	// with byte follow. Reply: u64 snapshot, uvarint n, n values (byte
	// present, bytes) each followed, when asked, by the value of the key
	// the rule makes of it (byte present, bytes).
	OpGetFollow byte = 7
	// OpAttach: u64 session, u64 client, bytes atime mode, uvarint
	// nanoseconds of directory attributes reuse, uvarint n, n pairs (u64
	// inode, uvarint open handles). The server runs a POSIX core for the
	// session (package remote serves its calls), counting the handles
	// the client holds open. Reply: empty.
	OpAttach byte = 8
	// OpCall: u64 session, u64 client, u64 call number, byte flags
	// (CallSentAgain), uvarint method, then the method's arguments
	// (package remote). Reply: u64 the index of the records the server
	// had published when it answered (the call's own changes are at or
	// below it), then the method's results (StatusOK) or the failure
	// (StatusErrno); or StatusNoSession when the session is not attached
	// (the client attaches and calls again). A call sent again with the
	// same client and number while the server remembers it is answered,
	// not run twice.
	OpCall byte = 9
	// OpCancel: u64 request id of an OpCall on the same connection,
	// whose caller gave up (an interrupted lock wait). No reply.
	OpCancel byte = 10
	// OpDetach: u64 session. The server drops what it ran for the
	// session. Reply: empty.
	OpDetach byte = 11
	// OpMember: byte MemberAdd or MemberRemove, bytes member id, bytes
	// the member's Raft address (for MemberAdd). The leader of a
	// replicated group changes its membership. Reply: empty.
	OpMember byte = 12
	// OpReadCall: u64 the least index the answer must reflect, then an
	// OpCall's body, of an operation any member may answer
	// (Op.AnyMember). Any member of a group answers it from its own
	// records once it has applied that index, on a connection whose
	// OpHello said HelloAnyMember; a member that does not get there
	// within a few milliseconds answers StatusNotLeader, and the client
	// asks the leader. Reply: as OpCall's.
	OpReadCall byte = 13
	// OpIndex: empty. The leader confirms it still leads (a read index)
	// and answers u64 the index of the records it has published: every
	// change acknowledged before the request is at or below it.
	OpIndex byte = 14
)

// HelloAnyMember, in OpHello's flags, opens a connection for OpReadCall:
// a member that does not lead accepts it.
const HelloAnyMember byte = 1

// StatsDigest asks OpStats for a digest of the whole state (every
// record read once: slow on a large volume), to compare the members of
// a group.
const StatsDigest byte = 1

// Changes of OpMember.
const (
	MemberAdd    byte = 1
	MemberRemove byte = 2
)

// Follow is the rule of OpGetFollow: the key read next is Prefix, the
// value from byte From on, then Suffix, for a value ValueLen bytes long.
type Follow struct {
	Prefix, Suffix []byte
	From, ValueLen int
}

// Next returns the key the rule makes of value v, or nil.
func (f Follow) Next(v []byte) []byte {
	if len(v) != f.ValueLen || f.From > len(v) {
		return nil
	}
	k := make([]byte, 0, len(f.Prefix)+len(v)-f.From+len(f.Suffix))
	k = append(k, f.Prefix...)
	k = append(k, v[f.From:]...)
	return append(k, f.Suffix...)
}

// Follow appends f.
func (b *Buf) Follow(f Follow) {
	b.Bytes(f.Prefix)
	b.Bytes(f.Suffix)
	b.Uvarint(uint64(f.From))
	b.Uvarint(uint64(f.ValueLen))
}

// Follow reads a rule.
func (r *Reader) Follow() Follow {
	f := Follow{Prefix: r.Bytes(), Suffix: r.Bytes()}
	from, n := r.Uvarint(), r.Uvarint()
	if from > 1<<20 || n > 1<<20 {
		r.fail("follow rule out of range")
		return Follow{}
	}
	f.From, f.ValueLen = int(from), int(n)
	return f
}

// Reply statuses.
const (
	StatusOK byte = 0
	// StatusConflict: a commit lost a race; the client retries its
	// transaction.
	StatusConflict byte = 1
	// StatusNoSnapshot: the snapshot named is gone (expired, or the
	// server restarted); the client starts its transaction again.
	StatusNoSnapshot byte = 2
	// StatusError: body is bytes message.
	StatusError byte = 3
	// StatusNoSession: an OpCall named a session not attached.
	StatusNoSession byte = 4
	// StatusErrno: an OpCall failed; body is uvarint kind (ErrnoPOSIX,
	// ErrnoNoInode, ErrnoIO), uvarint errno, bytes message.
	StatusErrno byte = 5
	// StatusNotLeader: the server is a member of a replicated group that
	// is not its leader (or no longer is), and serves nothing; the client
	// sends the request again to another member. Body: bytes, the
	// client address of the leader when the member knows it, or empty.
	StatusNotLeader byte = 6
)

// CallSentAgain flags an OpCall its client sent before without getting
// the reply: a server that does not remember the call (it restarted)
// may have run it already, and runs it as meta.WithSentAgain says.
const CallSentAgain byte = 1

// Kinds of failure in a StatusErrno reply.
const (
	// ErrnoPOSIX is a POSIX failure: the errno alone is the answer.
	ErrnoPOSIX = 1
	// ErrnoNoInode is meta.ErrNoInode: the inode named no longer exists.
	ErrnoNoInode = 2
	// ErrnoIO is any other failure, an I/O error for the caller.
	ErrnoIO = 3
)

// Write kinds in OpCommit.
const (
	WriteSet    byte = 1
	WriteDelete byte = 2
)

// ErrFrame reports a malformed frame or body.
var ErrFrame = errors.New("malformed frame")

// Frame is one decoded frame.
type Frame struct {
	ID   uint64
	Kind byte // operation or status
	Body []byte
}

// ReadFrame reads one frame from r.
func ReadFrame(r *bufio.Reader) (Frame, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 9 {
		return Frame{}, fmt.Errorf("frame of %d bytes: %w", n, ErrFrame)
	}
	if n > MaxFrame {
		return Frame{}, fmt.Errorf("frame of %d bytes exceeds %d: %w", n, MaxFrame, ErrFrame)
	}
	var buf []byte
	if n <= 1<<20 {
		buf = make([]byte, n)
		if _, err := io.ReadFull(r, buf); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Frame{}, err
		}
	} else {
		// A large frame's memory is taken as its bytes arrive, so that a
		// peer announcing lengths it does not send costs little.
		var b bytes.Buffer
		got, err := b.ReadFrom(io.LimitReader(r, int64(n)))
		if err != nil {
			return Frame{}, err
		}
		if got != int64(n) {
			return Frame{}, io.ErrUnexpectedEOF
		}
		buf = b.Bytes()
	}
	return Frame{ID: binary.BigEndian.Uint64(buf), Kind: buf[8], Body: buf[9:]}, nil
}

// Buf builds a frame. The zero Buf is not ready: use NewFrame.
type Buf struct {
	b []byte
}

// NewFrame starts a frame with request id and kind.
func NewFrame(id uint64, kind byte) *Buf {
	b := make([]byte, 13, 64)
	binary.BigEndian.PutUint64(b[4:], id)
	b[12] = kind
	return &Buf{b: b}
}

// NewBuf returns an empty buffer for bodies kept outside frames (the
// server's log and checkpoints).
func NewBuf(capacity int) *Buf { return &Buf{b: make([]byte, 0, capacity)} }

// Raw returns the bytes appended so far.
func (b *Buf) Raw() []byte { return b.b }

// Uvarint appends v.
func (b *Buf) Uvarint(v uint64) { b.b = binary.AppendUvarint(b.b, v) }

// Varint appends v.
func (b *Buf) Varint(v int64) { b.b = binary.AppendVarint(b.b, v) }

// U64 appends v as 8 bytes.
func (b *Buf) U64(v uint64) { b.b = binary.BigEndian.AppendUint64(b.b, v) }

// Byte appends c.
func (b *Buf) Byte(c byte) { b.b = append(b.b, c) }

// Bytes appends p with its length.
func (b *Buf) Bytes(p []byte) {
	b.b = binary.AppendUvarint(b.b, uint64(len(p)))
	b.b = append(b.b, p...)
}

// Append appends p as it is.
func (b *Buf) Append(p []byte) { b.b = append(b.b, p...) }

// Len returns the frame's length so far, header included.
func (b *Buf) Len() int { return len(b.b) }

// Finish sets the length and returns the frame's bytes.
func (b *Buf) Finish() []byte {
	binary.BigEndian.PutUint32(b.b, uint32(len(b.b)-4))
	return b.b
}

// Reader decodes a body. The first error sticks: later reads return
// zero values, and Err reports it.
type Reader struct {
	b   []byte
	err error
}

// NewReader reads body.
func NewReader(body []byte) *Reader { return &Reader{b: body} }

func (r *Reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s: %w", what, ErrFrame)
	}
	r.b = nil
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Varint reads a signed varint.
func (r *Reader) Varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// U64 reads 8 bytes.
func (r *Reader) U64() uint64 {
	if len(r.b) < 8 {
		r.fail("short u64")
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if len(r.b) < 1 {
		r.fail("short byte")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// Bytes reads a length-prefixed string. The result aliases the body.
func (r *Reader) Bytes() []byte {
	n := r.Uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail("string past the end")
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

// Count reads a count of items each at least min bytes long, refusing
// one the rest of the body cannot hold, so that a hostile count cannot
// make the decoder allocate.
func (r *Reader) Count(min int) int {
	n := r.Uvarint()
	if r.err != nil {
		return 0
	}
	if min < 1 {
		min = 1
	}
	if n > uint64(len(r.b)/min) {
		r.fail("count past the end")
		return 0
	}
	return int(n)
}

// Err returns the first decoding error.
func (r *Reader) Err() error { return r.err }

// Len returns how many bytes are left to read.
func (r *Reader) Len() int { return len(r.b) }

// Done returns the first decoding error, or one when bytes are left.
func (r *Reader) Done() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail(fmt.Sprintf("%d bytes left over", len(r.b)))
	}
	return r.err
}
