package metaserver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/sluicefs/sluice/internal/wire"
)

// Replication. With Options.Raft set, the server is one member of a group
// that replicates the log with Raft (github.com/hashicorp/raft):
//
//   - The leader's apply loop validates and applies commits as a single
//     server's does, in batches; a batch's records, the bytes a single
//     server appends to its log, are one Raft log entry. A batch is
//     acknowledged and published once Raft has committed it, that is once
//     a quorum of members has it durably.
//   - Every member's state machine (fsm) applies committed entries through
//     the same apply loop, so one goroutine still writes the state. The
//     leader already applied its own entries while validating them; it
//     only marks them committed.
//   - Snapshots are checkpoints: the same bytes, written by Raft's snapshot
//     store and streamed to a member that lags behind the log.
//   - The tables that answer a commit or a call sent again (dedupe,
//     callTable) are rebuilt from the records on every member, so a client
//     that sends a request again to a new leader after a failover is
//     answered, not served twice.
//   - Only the leader serves clients. A member that is not the leader
//     answers wire.StatusNotLeader and the client tries another address.
//     A read takes its snapshot only after the leader confirmed with a
//     quorum that it still leads (a read index, see readIndex), so a
//     leader cut off from the others never serves a stale read.
//   - A leader that loses its office closes its clients' connections and
//     goes back to the last committed state: what it applied but Raft did
//     not commit may never be committed, and the clients send it again
//     to the next leader.

// RaftOptions make the server a member of a replicated group.
type RaftOptions struct {
	// ID names this member in the group; it must be unique and stable
	// across restarts.
	ID string
	// Listener accepts the other members' connections; Advertise is the
	// address they reach it at (default: the listener's).
	Listener  net.Listener
	Advertise string
	// Peers are the members of a new group, this one included. Every
	// first member starts with the same list; a member started with none
	// waits to be added by the leader (AddMember).
	Peers []Peer
	// Secret authenticates the members to each other (see
	// wire.AuthServer); empty means none.
	Secret []byte
	// HeartbeatTimeout and ElectionTimeout bound how long a group goes
	// without a leader when one fails (default 1 s each).
	HeartbeatTimeout, ElectionTimeout time.Duration
	// SnapshotThreshold is how many log entries make a member take a
	// snapshot (default 8192).
	SnapshotThreshold uint64
}

// Peer is one member of a group: its id and the address of its Raft port.
type Peer struct {
	ID, Addr string
}

// ParsePeers parses a list "id=host:port,id=host:port".
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		id, addr, ok := strings.Cut(f, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("peer %q: want ID=HOST:PORT", f)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("peer %q: %w", f, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("peer id %q given twice", id)
		}
		seen[id] = true
		out = append(out, Peer{ID: id, Addr: addr})
	}
	return out, nil
}

// replica is a member's Raft machinery.
type replica struct {
	r         *raft.Raft
	store     *raftboltdb.BoltStore
	transport *raft.NetworkTransport
	legacy    bool // the state came from a single server's checkpoint and log

	mu      sync.Mutex // guards waiters, running
	waiters []chan error
	running bool
}

// fsmJob is work of the state machine for the apply loop.
type fsmJob struct {
	entry    []byte              // a committed entry's records
	snapshot chan *checkpointJob // the committed state, for a snapshot
	restore  *restored
	lead     bool // leadership was won: commits may be validated
	rollback bool // leadership was lost: back to the committed state
	done     chan error
}

// restored is a state decoded from a snapshot.
type restored struct {
	index     uint64
	tree      *tree
	dd, calls *dedupe
	inodes    int64
}

// openRaft starts the member's Raft machinery; the apply loop runs.
func (s *Server) openRaft(legacy bool) error {
	o := s.opts.Raft
	if o.ID == "" {
		return errors.New("raft: a member needs an id")
	}
	dir := filepath.Join(s.opts.Dir, "raft")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	hl := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: slogWriter{s.log}})
	conf := raft.DefaultConfig()
	conf.LocalID = raft.ServerID(o.ID)
	conf.Logger = hl
	if o.HeartbeatTimeout > 0 {
		conf.HeartbeatTimeout = o.HeartbeatTimeout
		conf.LeaderLeaseTimeout = min(conf.LeaderLeaseTimeout, o.HeartbeatTimeout/2)
	}
	if o.ElectionTimeout > 0 {
		conf.ElectionTimeout = o.ElectionTimeout
	}
	if o.SnapshotThreshold > 0 {
		conf.SnapshotThreshold = o.SnapshotThreshold
	}
	conf.NoLegacyTelemetry = true
	store, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		return fmt.Errorf("raft log %s: %w", dir, err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hl)
	if err != nil {
		store.Close()
		return fmt.Errorf("raft snapshots %s: %w", dir, err)
	}
	adv := o.Advertise
	if adv == "" {
		adv = o.Listener.Addr().String()
	}
	advAddr, err := net.ResolveTCPAddr("tcp", adv)
	if err != nil {
		store.Close()
		return fmt.Errorf("raft advertise address %q: %w", adv, err)
	}
	layer := &streamLayer{Listener: o.Listener, adv: advAddr, secret: o.Secret, log: s.log}
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: layer, MaxPool: 3, Timeout: 10 * time.Second, Logger: hl,
	})
	has, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		store.Close()
		return fmt.Errorf("raft: %w", err)
	}
	rep := &replica{store: store, transport: tr, legacy: legacy && !has}
	s.rep = rep
	if !has && len(o.Peers) > 0 {
		var cfg raft.Configuration
		for _, p := range o.Peers {
			cfg.Servers = append(cfg.Servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr), Suffrage: raft.Voter})
		}
		if err := raft.BootstrapCluster(conf, store, store, snaps, tr, cfg); err != nil {
			store.Close()
			return fmt.Errorf("raft: start the group: %w", err)
		}
	}
	logs, err := raft.NewLogCache(1024, store)
	if err != nil {
		store.Close()
		return fmt.Errorf("raft: %w", err)
	}
	r, err := raft.NewRaft(conf, (*fsm)(s), logs, store, snaps, tr)
	if err != nil {
		store.Close()
		return fmt.Errorf("raft: %w", err)
	}
	rep.r = r
	go s.watchLeadership(r.LeaderCh())
	return nil
}

// slogWriter carries the Raft library's log lines into the server's log.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.log.Warn(strings.TrimSpace(string(p)))
	return len(p), nil
}

// watchLeadership follows the member's leadership: won, the member waits
// until every entry of earlier terms is applied (a barrier) before it
// validates commits, whose records must follow them; lost, it stops
// serving (see stepDown).
func (s *Server) watchLeadership(ch <-chan bool) {
	for leader := range ch {
		if !leader {
			s.stepDown()
			continue
		}
		if err := s.rep.r.Barrier(0).Error(); err != nil {
			s.log.Warn("raft: elected, but the barrier failed", "err", err)
			continue
		}
		if err := s.fsmDo(&fsmJob{lead: true}); err != nil {
			return
		}
		s.log.Info("raft: this member leads the group", "term", s.rep.r.Stats()["term"])
		if s.rep.legacy {
			s.rep.legacy = false
			s.snapshotLegacy()
		}
	}
}

// snapshotLegacy makes the state a single server left (its checkpoint
// and log, which Raft's log does not hold) a Raft snapshot, with no log
// kept behind it, so that a member added later starts from it.
func (s *Server) snapshotLegacy() {
	r := s.rep.r
	if err := r.Snapshot().Error(); err != nil {
		s.log.Error("raft: snapshot of the single server's state failed; members added later would miss it", "err", err)
		return
	}
	rc := r.ReloadableConfig()
	keep := rc.TrailingLogs
	rc.TrailingLogs = 0
	if err := r.ReloadConfig(rc); err == nil {
		r.Barrier(0).Error()
		r.Snapshot().Error()
		rc.TrailingLogs = keep
		r.ReloadConfig(rc)
	}
	s.log.Info("raft: the single server's state is the group's first snapshot")
}

// stepDown stops serving clients once the member no longer leads: its
// connections are closed (the clients send their requests again to
// the next leader) and the apply loop goes back to the committed state.
//
// A request that failed because the member no longer leads must reach no
// client as a failure: the calls the member runs for mounts (sessions.go)
// would answer it as an I/O error. So the connections are closed before
// such a failure is answered (the replies are then dropped, and the
// clients send the requests again), by whoever sees it first.
func (s *Server) stepDown() {
	was := s.leading.Swap(false)
	s.connMu.Lock()
	for c := range s.conns {
		c.close()
	}
	s.connMu.Unlock()
	if !was {
		return
	}
	s.log.Warn("raft: this member no longer leads; clients go to the next leader")
	s.fsmDo(&fsmJob{rollback: true})
}

// fsmDo hands j to the apply loop and waits for it.
func (s *Server) fsmDo(j *fsmJob) error {
	j.done = make(chan error, 1)
	select {
	case s.fsmJobs <- j:
	case <-s.loopEnd:
		return errClosed
	}
	select {
	case err := <-j.done:
		return err
	case <-s.loopEnd:
		return errClosed
	}
}

// runFSM does j on the apply loop; cur is the loop's open batch.
func (s *Server) runFSM(j *fsmJob, cur **batch) {
	switch {
	case j.entry != nil:
		j.done <- s.applyEntry(j.entry)
	case j.snapshot != nil:
		c := s.committed
		j.snapshot <- &checkpointJob{tree: c.tree, index: c.index, dd: upTo(s.dd.entries(), c.index), calls: upTo(s.calls.entries(), c.index)}
		j.done <- nil
	case j.restore != nil:
		rs := j.restore
		s.tree, s.index, s.inodes, s.dd = rs.tree, rs.index, rs.inodes, rs.dd
		s.calls.mu.Lock()
		s.calls.d = rs.calls
		s.calls.mu.Unlock()
		s.pending = map[uint64]*published{}
		s.commitState()
		j.done <- nil
	case j.lead:
		s.pending = map[uint64]*published{}
		s.leading.Store(true)
		j.done <- nil
	case j.rollback:
		if b := *cur; b != nil {
			for _, r := range b.reqs {
				r.done(wire.StatusNotLeader, "")
			}
			b.reqs, b.buf = nil, nil
		}
		c := s.committed
		if s.index != c.index {
			s.log.Warn("raft: dropping changes the group did not commit", "applied", s.index, "committed", c.index)
			s.tree, s.index, s.inodes = c.tree.Clone(), c.index, c.inodes
			s.dd = dedupeOf(upTo(s.dd.entries(), c.index))
			s.calls.mu.Lock()
			s.calls.d = dedupeOf(upTo(s.calls.d.entries(), c.index))
			s.calls.mu.Unlock()
		}
		s.pending = map[uint64]*published{}
		j.done <- nil
	}
}

// commitState makes the loop's state the committed and published one.
func (s *Server) commitState() {
	p := &published{tree: s.tree.Clone(), index: s.index, inodes: s.inodes}
	s.committed = p
	s.publish(p)
}

// publish makes p what readers see, unless a newer state is published.
func (s *Server) publish(p *published) {
	for {
		cur := s.pub.Load()
		if cur != nil && cur.index > p.index {
			return
		}
		if s.pub.CompareAndSwap(cur, p) {
			break
		}
	}
	s.m.setInodes(p.inodes)
	s.m.keys.Set(float64(p.tree.Len()))
	s.m.index.Set(float64(p.index))
}

// applyEntry applies a committed entry's records, or marks committed the
// leader's own batch that holds them.
func (s *Server) applyEntry(data []byte) error {
	recs, err := decodeRecords(data)
	if err != nil || len(recs) == 0 {
		return s.fsmFailed(fmt.Errorf("raft entry: %w", err))
	}
	first, last := recs[0].Index, recs[len(recs)-1].Index
	c := s.committed
	switch {
	case last <= c.index:
		return nil // applied already (a snapshot held it)
	case first == c.index+1 && s.pending[last] != nil:
		s.committed = s.pending[last]
		delete(s.pending, last)
		return nil
	case first == s.index+1:
		for _, r := range recs {
			s.inodes += applyWrites(s.tree, r.Writes, r.Index)
			s.dd.add(txnKey{r.Client, r.Txn}, r.Index)
			s.calls.add(txnKey{r.Session, r.Call}, r.Index)
			s.index = r.Index
		}
		s.commitState()
		return nil
	}
	return s.fsmFailed(fmt.Errorf("raft entry holds records %d to %d, but the state is at %d (committed %d): records are missing", first, last, s.index, c.index))
}

// fsmFailed stops the member from taking commits: its state no longer
// follows the log.
func (s *Server) fsmFailed(err error) error {
	s.log.Error("raft: the state cannot follow the log; refusing commits", "err", err)
	s.failed.CompareAndSwap(nil, &err)
	return err
}

// decodeRecords decodes the records of a batch (appendRecord's frames).
func decodeRecords(buf []byte) ([]*record, error) {
	var out []*record
	for len(buf) > 0 {
		if len(buf) < 8 {
			return nil, errBadRecord
		}
		n := binary.BigEndian.Uint32(buf)
		if uint64(n) > uint64(len(buf)-8) {
			return nil, errBadRecord
		}
		r, err := decodeRecord(buf[8 : 8+n])
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		buf = buf[8+n:]
	}
	return out, nil
}

// upTo returns the entries of index at most index.
func upTo(es []dedupeEntry, index uint64) []dedupeEntry {
	out := es[:0:0]
	for _, e := range es {
		if e.index <= index {
			out = append(out, e)
		}
	}
	return out
}

func dedupeOf(es []dedupeEntry) *dedupe {
	d := newDedupe()
	for _, e := range es {
		d.add(e.k, e.index)
	}
	return d
}

// fsm is the server as Raft's state machine.
type fsm Server

// Apply applies a committed entry through the apply loop.
func (f *fsm) Apply(l *raft.Log) any {
	s := (*Server)(f)
	if l.Type != raft.LogCommand {
		return nil
	}
	return s.fsmDo(&fsmJob{entry: l.Data})
}

// Snapshot captures the committed state; Persist writes it.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	s := (*Server)(f)
	ch := make(chan *checkpointJob, 1)
	if err := s.fsmDo(&fsmJob{snapshot: ch}); err != nil {
		return nil, err
	}
	return &fsmSnapshot{cp: <-ch}, nil
}

// Restore replaces the state with a snapshot's. It decodes the stream as
// it arrives, with no copy of it on disk: Raft's snapshot store already
// holds one, and decodeCheckpoint returns nothing unless the whole stream
// passed its checks, so a damaged snapshot is refused, never half loaded.
func (f *fsm) Restore(rc io.ReadCloser) error {
	s := (*Server)(f)
	defer rc.Close()
	start := time.Now()
	index, t, dd, calls, inodes, err := decodeCheckpoint(rc, "snapshot")
	if err != nil {
		return fmt.Errorf("raft restore: %w", err)
	}
	s.log.Info("raft: state restored from a snapshot", "index", index, "keys", t.Len(), "took", time.Since(start).Round(time.Millisecond))
	return s.fsmDo(&fsmJob{restore: &restored{index: index, tree: t, dd: dd, calls: calls, inodes: inodes}})
}

type fsmSnapshot struct{ cp *checkpointJob }

func (p *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := encodeCheckpoint(sink, p.cp.index, p.cp.tree, p.cp.dd, p.cp.calls); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (p *fsmSnapshot) Release() {}

// readIndex confirms that the member still leads before a read takes its
// snapshot: it waits for a round of heartbeats a quorum answered that
// began after it was called (rounds are shared by the reads waiting for
// them). Then the published state holds every change acknowledged
// before the read began, since a change is acknowledged only once
// committed and published.
func (s *Server) readIndex() error {
	rep := s.rep
	if !s.leading.Load() {
		return errNotLeader
	}
	ch := make(chan error, 1)
	rep.mu.Lock()
	rep.waiters = append(rep.waiters, ch)
	if !rep.running {
		rep.running = true
		go s.verifyRounds()
	}
	rep.mu.Unlock()
	return <-ch
}

var errNotLeader = errors.New("not the leader of the group")

func (s *Server) verifyRounds() {
	rep := s.rep
	for {
		rep.mu.Lock()
		ws := rep.waiters
		rep.waiters = nil
		if len(ws) == 0 {
			rep.running = false
			rep.mu.Unlock()
			return
		}
		rep.mu.Unlock()
		err := rep.r.VerifyLeader().Error()
		if err == nil && !s.leading.Load() {
			err = errNotLeader
		}
		if err != nil {
			s.stepDown()
		}
		for _, w := range ws {
			w <- err
		}
	}
}

// replicator is the syncer of a member: it hands each batch's records to
// Raft, and acknowledges and publishes the batch once Raft committed it.
func (s *Server) replicator() {
	defer close(s.syncEnd)
	for {
		s.syncReady <- struct{}{}
		b := <-s.syncq
		var err error
		if len(b.buf) > 0 && s.failed.Load() == nil {
			start := time.Now()
			err = s.rep.r.Apply(b.buf, 0).Error()
			s.m.fsync.Observe(time.Since(start).Seconds())
			s.m.logBytes.Add(float64(len(b.buf)))
			s.m.batch.Observe(float64(len(b.reqs)))
		}
		switch {
		case s.failed.Load() != nil:
			for _, r := range b.reqs {
				r.done(wire.StatusError, (*s.failed.Load()).Error())
			}
		case err != nil:
			// Not committed in this term: the clients send again to the
			// next leader, which answers what was committed after all.
			s.log.Warn("raft: a batch was not committed", "records", len(b.reqs), "err", err)
			s.stepDown()
			for _, r := range b.reqs {
				r.done(wire.StatusNotLeader, "")
			}
		default:
			if b.tree != nil {
				s.publish(&published{tree: b.tree, index: b.index, inodes: b.inodes})
			}
			for _, r := range b.reqs {
				if r.conflict {
					r.done(wire.StatusConflict, "")
				} else {
					r.done(wire.StatusOK, "")
				}
			}
		}
		if b.stop {
			return
		}
	}
}

// closeRaft stops the member's Raft machinery.
func (s *Server) closeRaft() error {
	rep := s.rep
	err := rep.r.Shutdown().Error()
	if cerr := rep.transport.Close(); err == nil {
		err = cerr
	}
	if cerr := rep.store.Close(); err == nil {
		err = cerr
	}
	return err
}

// RaftStats are a member's figures of its group.
type RaftStats struct {
	ID       string   `json:"id"`
	State    string   `json:"state"`
	Leader   string   `json:"leader"`
	LeaderID string   `json:"leader_id"`
	Term     string   `json:"term"`
	Commit   string   `json:"commit_index"`
	Applied  string   `json:"applied_index"`
	LastLog  string   `json:"last_log_index"`
	Snapshot string   `json:"last_snapshot_index"`
	Members  []Member `json:"members"`
}

// Member is one member of the group as its configuration says.
type Member struct {
	ID      string `json:"id"`
	Addr    string `json:"address"`
	Voter   bool   `json:"voter"`
	Leading bool   `json:"leading"`
}

func (s *Server) raftStats() *RaftStats {
	if s.rep == nil || s.rep.r == nil {
		return nil
	}
	r := s.rep.r
	st := r.Stats()
	addr, id := r.LeaderWithID()
	out := &RaftStats{ID: s.opts.Raft.ID, State: st["state"], Leader: string(addr), LeaderID: string(id),
		Term: st["term"], Commit: st["commit_index"], Applied: st["applied_index"],
		LastLog: st["last_log_index"], Snapshot: st["last_snapshot_index"]}
	if f := r.GetConfiguration(); f.Error() == nil {
		for _, m := range f.Configuration().Servers {
			out.Members = append(out.Members, Member{ID: string(m.ID), Addr: string(m.Address), Voter: m.Suffrage == raft.Voter, Leading: m.ID == id})
		}
	}
	return out
}

// AddMember adds a voting member to the group, or changes its address;
// only the leader can.
func (s *Server) AddMember(ctx context.Context, id, addr string) error {
	if s.rep == nil {
		return errors.New("this metadata server is not a member of a replicated group (start it with --raft-listen)")
	}
	return s.rep.r.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeoutOf(ctx)).Error()
}

// RemoveMember removes a member from the group; only the leader can.
func (s *Server) RemoveMember(ctx context.Context, id string) error {
	if s.rep == nil {
		return errors.New("this metadata server is not a member of a replicated group (start it with --raft-listen)")
	}
	return s.rep.r.RemoveServer(raft.ServerID(id), 0, timeoutOf(ctx)).Error()
}

func timeoutOf(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Millisecond)
	}
	return 30 * time.Second
}

// streamLayer is Raft's transport between members: TCP, each connection
// authenticated with the members' secret before Raft reads a byte.
type streamLayer struct {
	net.Listener
	adv    net.Addr
	secret []byte
	log    *slog.Logger
}

func (l *streamLayer) Addr() net.Addr { return l.adv }

// Accept returns the next connection whose peer proved it holds the
// secret; others are closed.
func (l *streamLayer) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if err := wire.AuthServer(nc, l.secret, "raft"); err != nil {
			l.log.Warn("raft: refused a member connection", "remote", nc.RemoteAddr(), "err", err)
			nc.Close()
			continue
		}
		return nc, nil
	}
}

func (l *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	nc, err := d.Dial("tcp", string(addr))
	if err != nil {
		return nil, err
	}
	if err := wire.AuthClient(nc, l.secret, "raft"); err != nil {
		nc.Close()
		return nil, fmt.Errorf("member %s: %w", addr, err)
	}
	return nc, nil
}
