// Package sluice is the engine of the in-memory metadata server (package
// metaserver), opened with a URL such as sluice://127.0.0.1:9400/myvol,
// or sluice://10.0.0.5:9400/myvol?secret-file=PATH&tls=true for a server
// that requires the volume's secret (proven in wire's handshake on every
// connection) and TLS.
// It is a kvstore.DB: a transaction reads one snapshot on the server
// (taken by its first read), buffers its writes here, and sends them in
// one commit with what it read; the server's apply loop commits it only
// if nothing it read changed, and acknowledges it once it is durable.
//
// Requests travel on a few connections, many in flight on each. A broken
// connection is dialled again and the request sent again, for as long as
// the URL's timeout allows (default 60s): reads are idempotent, and a
// commit carries this client's id and a transaction number, so the
// server answers a commit it already applied instead of applying it
// twice. An update whose snapshot is gone (the server restarted) starts
// again; a read-only View fails instead, since what it read before may
// already be in its caller's hands.
package sluice

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/wire"
)

// errNoSnapshot reports a transaction whose snapshot the server no
// longer has; as a conflict, it makes kvstore run the transaction again.
var errNoSnapshot = fmt.Errorf("snapshot gone from the metadata server: %w", store.ErrConflict)

// DB is a connection pool to one metadata server, or to the leader of a
// replicated group of them.
type DB struct {
	endpoint              // addr joins the members' addresses
	addrs    []string     // the members the URL names
	leader   atomic.Int32 // index in addrs of the member that last led
	timeout  time.Duration
	client   uint64
	txn      atomic.Uint64

	mu     sync.Mutex // guards conns, rel, closed
	conns  []*conn
	rel    []uint64 // snapshots to release with the next request
	closed bool
	rr     atomic.Uint32

	// local, when set, serves every request in process (NewLocal).
	local Transport
	// serverOps: a mount's operations run on the server (package
	// remote), as the URL's ops says.
	serverOps bool
	// reads, for the URL's read=follower, sends the reads of any member
	// to a follower (followers.go).
	reads *followers
}

// ServerOps reports whether a mount should send its operations to the
// server whole (package remote) rather than run them over transactions:
// the URL's ops=server, the default, or ops=client.
func (d *DB) ServerOps() bool { return d.serverOps }

// Transport serves one request and returns its reply: the metadata
// server serves the transactions of the POSIX core it runs for a mount
// this way, through the code that serves connections.
type Transport func(ctx context.Context, op byte, fill func(*wire.Buf)) (wire.Frame, error)

// NewLocal returns a DB whose requests t serves, named name; client
// names its commits for retries, as a connection's DB's random id does.
func NewLocal(name string, client uint64, t Transport) *DB {
	return &DB{endpoint: endpoint{name: name}, client: client | 1, local: t, timeout: time.Minute}
}

// Call sends one request, dialling again and sending it again when its
// connection breaks, until the URL's timeout; a caller that gives up on
// an OpCall has the server told (OpCancel). The caller decides whether
// a request may be sent twice: OpCall carries a call number for that.
func (d *DB) Call(ctx context.Context, op byte, fill func(*wire.Buf)) (wire.Frame, error) {
	f, err := d.do(ctx, op, fill)
	if err == nil && op == wire.OpCall {
		f, err = d.indexed(f, false)
	}
	return f, err
}

// indexed takes the index off the front of an OpCall's or OpReadCall's
// reply and notes it (followers.seen); fromAny says a member that may
// not lead answered.
func (d *DB) indexed(f wire.Frame, fromAny bool) (wire.Frame, error) {
	if f.Kind != wire.StatusOK && f.Kind != wire.StatusErrno {
		return f, nil
	}
	if len(f.Body) < 8 {
		return f, fmt.Errorf("metadata server reply of %d bytes holds no index: %w", len(f.Body), wire.ErrFrame)
	}
	if d.reads != nil {
		d.reads.seen(binary.BigEndian.Uint64(f.Body), fromAny)
	}
	f.Body = f.Body[8:]
	return f, nil
}

// Client returns the id the DB names its commits and calls with.
func (d *DB) Client() uint64 { return d.client }

var _ kvstore.DB = (*DB)(nil)

// Open connects to the server the URL names:
//
//	sluice://[:SECRET@]HOST:PORT[,HOST:PORT…][/NAME][?timeout=DURATION&conns=N&ops=server|client
//	  &read=leader|follower&staleness=DURATION
//	  &secret-file=PATH&tls=true&ca=PATH&server-name=NAME&cert=PATH&key=PATH]
//
// read=follower sends a mount's reads that depend on the records alone
// to a member of the group other than the leader (see followers.go):
// what they see is at most staleness old (default 1s), never older than
// what the mount saw or changed before.
//
// SECRET (or the contents of secret-file, less a trailing newline) is
// proven to the server in wire's handshake, and the server must prove
// it too; tls=true encrypts the connections, trusting the CA bundle ca
// (default: the system's) for the certificate of server-name (default:
// HOST), and offering the certificate cert with key when the server
// asks for one. A refused secret or certificate fails Open at once.
func Open(ctx context.Context, rawURL string, create bool) (*DB, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Parse's error quotes the URL, secret and all.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("metadata URL: %w", err)
	}
	shown := redacted(u)
	if u.Scheme != "sluice" || u.Host == "" {
		return nil, fmt.Errorf("metadata URL %q: want sluice://[:SECRET@]HOST:PORT[,HOST:PORT…][/NAME]", shown)
	}
	var addrs []string
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" {
			return nil, fmt.Errorf("metadata URL %q: an empty address in the list", shown)
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), "9400")
		}
		addrs = append(addrs, h)
	}
	db := &DB{endpoint: endpoint{addr: strings.Join(addrs, ","), name: trimSlash(u.Path)}, addrs: addrs, timeout: time.Minute}
	if err := db.endpoint.credentials(u); err != nil {
		return nil, fmt.Errorf("metadata URL %q: %w", shown, err)
	}
	q := u.Query()
	if v := q.Get("timeout"); v != "" {
		if db.timeout, err = time.ParseDuration(v); err != nil || db.timeout <= 0 {
			return nil, fmt.Errorf("metadata URL %q: timeout %q: want a duration such as 30s", shown, v)
		}
	}
	switch v := q.Get("ops"); v {
	case "", "server":
		db.serverOps = true
	case "client":
	default:
		return nil, fmt.Errorf("metadata URL %q: ops %q: want server (a mount's operations run on the server, one round trip each) or client (they run in the mount, over transactions)", shown, v)
	}
	if err := db.readsFrom(q); err != nil {
		return nil, fmt.Errorf("metadata URL %q: %w", shown, err)
	}
	n := 4
	if v := q.Get("conns"); v != "" {
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 64 {
			return nil, fmt.Errorf("metadata URL %q: conns %q: want 1 to 64", shown, v)
		}
	}
	db.conns = make([]*conn, n)
	var id [8]byte
	rand.Read(id[:])
	db.client = binary.BigEndian.Uint64(id[:]) | 1
	// The first connection is made now, so that a wrong address, name or
	// secret fails Open with a clear error; a group electing a leader is
	// waited for, within the timeout.
	deadline := time.Now().Add(db.timeout)
	for i := 0; ; i++ {
		c, err := db.dial(ctx)
		if err == nil {
			db.conns[0] = c
			if len(db.addrs) > 1 {
				go db.watchStalls()
			}
			return db, nil
		}
		if !errors.Is(err, errNotLeader) || time.Now().After(deadline) {
			return nil, fmt.Errorf("metadata server %s: %w", db.addr, err)
		}
		select {
		case <-time.After(backoff(i)):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// stallAfter is how long a request to a member of a group may wait for
// its reply before the client asks the other members whether one of them
// leads now (watchStalls).
const stallAfter = time.Second

// watchStalls looks after a group's leader that stops answering without
// closing its connections (a paused process, a host that froze): a
// request that waited stallAfter makes the client ask the other members
// whether one of them leads; if one does, the connections to the stalled
// member are closed, and their requests go to the new leader (a commit
// or a call sent again is answered, not applied twice). A member that
// is merely slow is left alone: the others then say they do not lead.
func (d *DB) watchStalls() {
	tick := time.NewTicker(stallAfter / 2)
	defer tick.Stop()
	for range tick.C {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return
		}
		stalled := ""
		for _, c := range d.conns {
			if c != nil && !c.isBroken() && c.waiting() > stallAfter {
				stalled = c.addr
				break
			}
		}
		d.mu.Unlock()
		if stalled == "" {
			continue
		}
		for j, a := range d.addrs {
			if a == stalled {
				continue
			}
			ep := d.endpoint
			ep.addr = a
			ctx, cancel := context.WithTimeout(context.Background(), stallAfter)
			c, err := dial(ctx, ep)
			cancel()
			if err != nil {
				continue
			}
			c.close()
			d.leader.Store(int32(j))
			d.mu.Lock()
			for _, c := range d.conns {
				if c != nil && c.addr == stalled {
					c.close()
				}
			}
			d.mu.Unlock()
			break
		}
	}
}

// dial connects to the member that leads, trying the one that led last
// first, then the others in turn. With one address, it is the server.
func (d *DB) dial(ctx context.Context) (*conn, error) {
	first := int(d.leader.Load())
	var errs []error
	for i := range d.addrs {
		j := (first + i) % len(d.addrs)
		ep := d.endpoint
		ep.addr = d.addrs[j]
		c, err := dial(ctx, ep)
		if err == nil {
			d.leader.Store(int32(j))
			return c, nil
		}
		if ctx.Err() != nil || len(d.addrs) == 1 || isPermanent(err) {
			// Credentials one member refuses, all do.
			return nil, err
		}
		errs = append(errs, fmt.Errorf("%s: %w", d.addrs[j], err))
	}
	return nil, errors.Join(errs...)
}

func trimSlash(p string) string {
	for len(p) > 0 && p[0] == '/' {
		p = p[1:]
	}
	return p
}

// Name describes the engine: the URL without its secret or options.
func (d *DB) Name() string {
	if d.local != nil {
		return d.name
	}
	return "sluice://" + d.addr + "/" + d.name
}

// Close closes the connections.
func (d *DB) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for _, c := range d.conns {
		if c != nil {
			c.close()
		}
	}
	if d.reads != nil {
		d.reads.close()
	}
	return nil
}

// conn returns a live connection, dialling one when needed.
func (d *DB) conn(ctx context.Context) (*conn, error) {
	i := int(d.rr.Add(1)) % len(d.conns)
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, errors.New("metadata engine closed")
	}
	c := d.conns[i]
	d.mu.Unlock()
	if c != nil && !c.isBroken() {
		return c, nil
	}
	nc, err := d.dial(ctx)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur := d.conns[i]; cur != nil && cur != c && !cur.isBroken() {
		nc.close() // another caller dialled first
		return cur, nil
	}
	d.conns[i] = nc
	return nc, nil
}

// do sends a request, sending it again on another connection when its
// connection breaks, until the timeout.
func (d *DB) do(ctx context.Context, op byte, fill func(*wire.Buf)) (wire.Frame, error) {
	if d.local != nil {
		return d.local(ctx, op, fill)
	}
	deadline := time.Now().Add(d.timeout)
	for i := 0; ; i++ {
		c, err := d.conn(ctx)
		if err == nil {
			var f wire.Frame
			f, err = c.call(ctx, op, d.releases(), fill)
			if err == nil && f.Kind == wire.StatusNotLeader {
				// The member stopped leading: send the request again
				// to the next leader, which answers a commit or a call
				// it already has as a server does after a restart.
				c.close()
				err = errNotLeader
			}
			if err == nil {
				return f, nil
			}
		}
		if ctx.Err() != nil {
			return wire.Frame{}, ctx.Err()
		}
		if isPermanent(err) {
			return wire.Frame{}, fmt.Errorf("metadata server %s: %w", d.addr, err)
		}
		if time.Now().After(deadline) {
			return wire.Frame{}, fmt.Errorf("metadata server %s unreachable for %v: %w", d.addr, d.timeout, err)
		}
		select {
		case <-time.After(backoff(i)):
		case <-ctx.Done():
			return wire.Frame{}, ctx.Err()
		}
	}
}

// release queues the release of a snapshot; it goes out with the next
// request.
func (d *DB) release(snap uint64) {
	if snap == 0 {
		return
	}
	if d.local != nil {
		d.local(context.Background(), wire.OpRelease, func(b *wire.Buf) {
			b.Uvarint(1)
			b.U64(snap)
		})
		return
	}
	d.mu.Lock()
	d.rel = append(d.rel, snap)
	d.mu.Unlock()
}

// releases returns a release frame for the queued snapshots, or nil.
func (d *DB) releases() []byte {
	d.mu.Lock()
	rel := d.rel
	d.rel = nil
	d.mu.Unlock()
	if len(rel) == 0 {
		return nil
	}
	b := wire.NewFrame(0, wire.OpRelease)
	b.Uvarint(uint64(len(rel)))
	for _, s := range rel {
		b.U64(s)
	}
	return b.Finish()
}

// Update runs fn in a transaction and commits it.
func (d *DB) Update(ctx context.Context, fn func(kvstore.Txn) error) error {
	t := &txn{ctx: ctx, db: d, writes: map[string][]byte{}}
	if err := fn(t); err != nil {
		d.release(t.snap)
		return err
	}
	if len(t.writes) == 0 {
		d.release(t.snap)
		return nil
	}
	c := &wire.Commit{Snap: t.snap, Client: d.client, Txn: d.txn.Add(1), Reads: t.reads, Ranges: t.ranges}
	if tag, ok := store.CallOf(ctx); ok {
		c.Session, c.Call = tag.Session, tag.Call
	}
	c.Writes = make([]wire.Write, 0, len(t.writes))
	for k, v := range t.writes {
		c.Writes = append(c.Writes, wire.Write{Key: []byte(k), Value: v, Delete: v == nil})
	}
	slices.SortFunc(c.Writes, func(a, b wire.Write) int { return bytes.Compare(a.Key, b.Key) })
	f, err := d.do(ctx, wire.OpCommit, c.Encode)
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	switch f.Kind {
	case wire.StatusOK:
		return nil
	case wire.StatusConflict:
		return fmt.Errorf("sluice: commit: %w", store.ErrConflict)
	case wire.StatusNoSnapshot:
		return errNoSnapshot
	}
	return replyError(f)
}

// View runs fn in a read-only transaction over one snapshot. When the
// server lost the snapshot between two of fn's reads (it restarted), the
// View fails: fn may have kept what it read before, so it is not run
// again. (A View's first read never finds its snapshot gone: it takes
// one.)
func (d *DB) View(ctx context.Context, fn func(kvstore.Txn) error) error {
	t := &txn{ctx: ctx, db: d, readOnly: true}
	err := fn(t)
	d.release(t.snap)
	if err == nil {
		err = t.err
	}
	return err
}

var _ store.Reporter = (*DB)(nil)

// Report returns the server's figures (metaserver.Stats) as JSON; for a
// replicated group, the leader's, with each member's as it answers
// (Members) under "Members".
func (d *DB) Report(ctx context.Context) (json.RawMessage, error) {
	f, err := d.do(ctx, wire.OpStats, nil)
	if err != nil {
		return nil, err
	}
	if f.Kind != wire.StatusOK {
		return nil, replyError(f)
	}
	r := wire.NewReader(f.Body)
	js := r.Bytes()
	if err := r.Done(); err != nil || len(d.addrs) < 2 {
		return json.RawMessage(js), err
	}
	var out map[string]any
	if err := json.Unmarshal(js, &out); err != nil {
		return nil, fmt.Errorf("metadata server figures: %w", err)
	}
	out["Members"] = d.Members(ctx, false)
	return json.Marshal(out)
}

// MemberReport is what one address of the URL answers: the figures of
// the server there, or why it did not answer, and what follows from them.
type MemberReport struct {
	Address string
	// Healthy: the member answered, takes part in a group with a leader,
	// and (a follower) heard from the leader within the last 5 s.
	Healthy bool
	// Lag is how many Raft entries the member applied fewer than the
	// leader that answered (-1: unknown).
	Lag   int64
	Stats json.RawMessage `json:",omitempty"`
	Error string          `json:",omitempty"`
}

// memberRaft is what Members reads of a member's figures.
type memberRaft struct {
	Raft *struct {
		State       string  `json:"state"`
		Leader      string  `json:"leader"`
		Applied     string  `json:"applied_index"`
		LastContact float64 `json:"last_contact_seconds"`
	}
}

// Members asks every address of the URL for its server's figures, in
// turn, each within the URL's timeout or ctx; with digest, each computes
// a digest of its records (see wire.StatsDigest).
func (d *DB) Members(ctx context.Context, digest bool) []MemberReport {
	out := make([]MemberReport, len(d.addrs))
	for i, a := range d.addrs {
		out[i].Address = a
		js, err := d.memberStats(ctx, a, digest)
		if err != nil {
			out[i].Error = err.Error()
			continue
		}
		out[i].Stats = js
	}
	// Health and lag, against the applied index of a member that leads.
	var leader int64 = -1
	rafts := make([]memberRaft, len(out))
	for i, r := range out {
		out[i].Lag = -1
		if r.Stats == nil || json.Unmarshal(r.Stats, &rafts[i]) != nil || rafts[i].Raft == nil {
			continue
		}
		if rafts[i].Raft.State == "Leader" {
			leader, _ = strconv.ParseInt(rafts[i].Raft.Applied, 10, 64)
		}
	}
	for i, mr := range rafts {
		if mr.Raft == nil {
			out[i].Healthy = out[i].Stats != nil && len(d.addrs) == 1
			continue
		}
		st := mr.Raft
		out[i].Healthy = st.State == "Leader" || st.State == "Follower" && st.Leader != "" && st.LastContact >= 0 && st.LastContact < 5
		if applied, err := strconv.ParseInt(st.Applied, 10, 64); err == nil && leader >= 0 {
			out[i].Lag = max(leader-applied, 0)
		}
	}
	return out
}

func (d *DB) memberStats(ctx context.Context, addr string, digest bool) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, min(d.timeout, 10*time.Second))
	defer cancel()
	ep := d.endpoint
	ep.addr = addr
	c, err := connect(ctx, ep)
	if err != nil {
		return nil, err
	}
	defer c.close()
	f, err := c.call(ctx, wire.OpStats, nil, func(b *wire.Buf) {
		if digest {
			b.Byte(wire.StatsDigest)
		}
	})
	if err != nil {
		return nil, err
	}
	if f.Kind != wire.StatusOK {
		return nil, replyError(f)
	}
	r := wire.NewReader(f.Body)
	js := r.Bytes()
	return json.RawMessage(js), r.Done()
}

// AddMember adds the member id, whose Raft port is at addr, to the
// replicated group, or changes its address; the leader does it once the
// group has committed the change.
func (d *DB) AddMember(ctx context.Context, id, addr string) error {
	return d.member(ctx, wire.MemberAdd, id, addr)
}

// RemoveMember removes the member id from the replicated group.
func (d *DB) RemoveMember(ctx context.Context, id string) error {
	return d.member(ctx, wire.MemberRemove, id, "")
}

func (d *DB) member(ctx context.Context, change byte, id, addr string) error {
	f, err := d.do(ctx, wire.OpMember, func(b *wire.Buf) {
		b.Byte(change)
		b.Bytes([]byte(id))
		b.Bytes([]byte(addr))
	})
	if err != nil {
		return err
	}
	if f.Kind != wire.StatusOK {
		return replyError(f)
	}
	return nil
}
