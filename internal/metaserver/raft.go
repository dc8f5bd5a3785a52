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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

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

	// Faults injected by tests: net cuts the member's Raft traffic when
	// asked; lateStepDown delays the news of lost leadership (which Raft
	// delivers on a channel, so late at times); noReadIndex drops the
	// read index, which the linearizability check must catch.
	net          *netFaults
	lateStepDown time.Duration
	noReadIndex  bool
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
	guard     *guardedStore // the member's Raft log and stable store
	transport *raft.NetworkTransport
	legacy    bool // the state came from a single server's checkpoint and log

	mu      sync.Mutex // guards waiters, running
	waiters []chan error
	running bool

	// down is closed once Raft has shut down (closeRaft): see wait.
	down chan struct{}
}

// wait returns f's error. Raft answers no future it had queued but not
// taken when it shut down (the futures of Apply and VerifyLeader carry
// no shutdown channel), so once it is down, wait answers
// raft.ErrRaftShutdown instead of waiting for ever; the goroutine left
// waiting on such a future ends with the process.
func (rep *replica) wait(f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-rep.down:
		select {
		case err := <-done:
			return err
		default:
			return raft.ErrRaftShutdown
		}
	}
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
	conf.CommitTimeout = commitTimeout
	// Batches applied together are written and sent together.
	conf.BatchApplyCh = true
	store, err := openRaftLog(dir, s.log)
	if err != nil {
		return err
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
	layer := &streamLayer{Listener: o.Listener, adv: advAddr, secret: o.Secret, log: s.log, faults: o.net}
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: layer, MaxPool: 3, Timeout: 10 * time.Second, Logger: hl,
	})
	has, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		store.Close()
		return fmt.Errorf("raft: %w", err)
	}
	rep := &replica{transport: tr, legacy: legacy, down: make(chan struct{})}
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
	rep.guard = &guardedStore{inner: store}
	logs, err := raft.NewLogCache(1024, rep.guard)
	if err != nil {
		store.Close()
		return fmt.Errorf("raft: %w", err)
	}
	r, err := raft.NewRaft(conf, (*fsm)(s), logs, rep.guard, snaps, tr)
	if err != nil {
		store.Close()
		return fmt.Errorf("raft: %w", err)
	}
	rep.r = r
	s.m.reg.MustRegister(raftCollector{s})
	go s.watchLeadership(r.LeaderCh())
	return nil
}

// raftCollector exports a member's view of its group to Prometheus, read
// from Raft at each scrape.
type raftCollector struct{ s *Server }

var (
	raftLeaderDesc    = prometheus.NewDesc("sluice_metaserver_raft_leader", "1 while this member leads its group and serves clients, else 0.", nil, nil)
	raftTermDesc      = prometheus.NewDesc("sluice_metaserver_raft_term", "The member's current Raft term: it grows with each election.", nil, nil)
	raftCommitDesc    = prometheus.NewDesc("sluice_metaserver_raft_commit_index", "Index of the last Raft entry the member knows committed.", nil, nil)
	raftAppliedDesc   = prometheus.NewDesc("sluice_metaserver_raft_applied_index", "Index of the last Raft entry the member applied.", nil, nil)
	raftContactDesc   = prometheus.NewDesc("sluice_metaserver_raft_last_contact_seconds", "Seconds since a follower last heard from its leader (0 on the leader).", nil, nil)
	raftMembersDesc   = prometheus.NewDesc("sluice_metaserver_raft_members", "Voting members in the group's configuration.", nil, nil)
	raftSnapshotDesc  = prometheus.NewDesc("sluice_metaserver_raft_snapshot_index", "Index of the member's newest Raft snapshot.", nil, nil)
	raftCollectorDesc = []*prometheus.Desc{raftLeaderDesc, raftTermDesc, raftCommitDesc, raftAppliedDesc, raftContactDesc, raftMembersDesc, raftSnapshotDesc}
)

func (c raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range raftCollectorDesc {
		ch <- d
	}
}

func (c raftCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.raftStats()
	if st == nil {
		return
	}
	num := func(s string) float64 {
		v, _ := strconv.ParseFloat(s, 64)
		return v
	}
	leading := 0.0
	if c.s.leading.Load() {
		leading = 1
	}
	voters := 0
	for _, m := range st.Members {
		if m.Voter {
			voters++
		}
	}
	ch <- prometheus.MustNewConstMetric(raftLeaderDesc, prometheus.GaugeValue, leading)
	ch <- prometheus.MustNewConstMetric(raftTermDesc, prometheus.GaugeValue, num(st.Term))
	ch <- prometheus.MustNewConstMetric(raftCommitDesc, prometheus.GaugeValue, num(st.Commit))
	ch <- prometheus.MustNewConstMetric(raftAppliedDesc, prometheus.GaugeValue, num(st.Applied))
	ch <- prometheus.MustNewConstMetric(raftContactDesc, prometheus.GaugeValue, st.LastContact)
	ch <- prometheus.MustNewConstMetric(raftMembersDesc, prometheus.GaugeValue, float64(voters))
	ch <- prometheus.MustNewConstMetric(raftSnapshotDesc, prometheus.GaugeValue, num(st.Snapshot))
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
			time.Sleep(s.opts.Raft.lateStepDown)
			s.stepDown()
			continue
		}
		if err := s.rep.wait(s.rep.r.Barrier(0)); err != nil {
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
	rep, r := s.rep, s.rep.r
	if err := rep.wait(r.Snapshot()); err != nil {
		s.log.Error("raft: snapshot of the single server's state failed; members added later would miss it", "err", err)
		return
	}
	rc := r.ReloadableConfig()
	keep := rc.TrailingLogs
	rc.TrailingLogs = 0
	if err := r.ReloadConfig(rc); err == nil {
		rep.wait(r.Barrier(0))
		rep.wait(r.Snapshot())
		rc.TrailingLogs = keep
		r.ReloadConfig(rc)
	}
	// The single server's files are a snapshot now: out of the way, so
	// that the next start does not load them again, but kept.
	aside := filepath.Join(s.opts.Dir, "single-server")
	if err := os.MkdirAll(aside, 0o700); err != nil {
		s.log.Warn("raft: cannot move the single server's files aside; the next start loads them again", "err", err)
		return
	}
	move := func(from, to string) {
		if err := os.Rename(from, to); err != nil {
			s.log.Warn("raft: cannot move a single server's file aside", "file", from, "err", err)
		}
	}
	cps, _ := listFiles(s.opts.Dir, "checkpoint-", ".ckpt")
	for _, i := range cps {
		move(checkpointPath(s.opts.Dir, i), checkpointPath(aside, i))
	}
	segs, _ := listFiles(s.opts.Dir, "log-", ".wal")
	for _, i := range segs {
		move(segmentPath(s.opts.Dir, i), segmentPath(aside, i))
	}
	syncDir(s.opts.Dir)
	s.log.Info("raft: the single server's state is the group's first snapshot; its files are kept in " + aside)
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
	go s.dropSessions()
}

// dropSessions forgets the sessions the member ran for mounts once it no
// longer leads: the next leader may change what they hold (open handles,
// locks, cached directories), so should this member lead again, each
// mount attaches its session afresh (its next call is answered
// wire.StatusNoSession). The changes of space and inodes used that a
// session counted since its last flush cannot be committed here, and are
// lost from the volume's totals, as when a single server is killed.
func (s *Server) dropSessions() {
	ss := s.sess
	ss.mu.Lock()
	old := ss.m
	ss.m = map[uint64]*session{}
	ss.mu.Unlock()
	s.m.sessions.Set(0)
	if len(old) > 0 {
		s.log.Info("raft: dropping the sessions of mounts, which attach again to the leader", "sessions", len(old))
	}
	for _, se := range old {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		se.mc.Close(ctx) // the flush of its counts fails: not the leader
		cancel()
	}
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
	s.wakePublished()
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
	if s.opts.Raft.noReadIndex {
		return nil
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
		err := rep.wait(rep.r.VerifyLeader())
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
// Raft at once and goes back for the next, so that several batches are
// in flight (Raft writes and sends those it has together), up to
// maxInflight; acknowledge completes them in order.
func (s *Server) replicator() {
	defer close(s.syncEnd)
	q := make(chan inflight, maxInflight)
	done := make(chan struct{})
	go s.acknowledge(q, done)
	for {
		s.syncReady <- struct{}{}
		b := <-s.syncq
		in := inflight{b: b, start: time.Now()}
		if len(b.buf) > 0 && s.failed.Load() == nil {
			in.f = s.rep.r.Apply(b.buf, 0)
		}
		q <- in
		if b.stop {
			close(q)
			<-done
			return
		}
	}
}

// maxInflight bounds the batches handed to Raft and not yet committed;
// commits arriving meanwhile gather in the loop's next batch.
const maxInflight = 4

// inflight is a batch handed to Raft (f nil: nothing to replicate).
type inflight struct {
	b     *batch
	f     raft.ApplyFuture
	start time.Time
}

// acknowledge waits for each batch of q in order: committed, it is
// published and its commits acknowledged; not committed (the member lost
// its office), the clients are sent to the next leader.
func (s *Server) acknowledge(q <-chan inflight, done chan<- struct{}) {
	defer close(done)
	for in := range q {
		b := in.b
		var err error
		if in.f != nil {
			err = s.rep.wait(in.f)
			s.m.fsync.Observe(time.Since(in.start).Seconds())
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
	}
}

// closeRaft stops the member's Raft machinery.
func (s *Server) closeRaft() error {
	rep := s.rep
	err := rep.r.Shutdown().Error()
	close(rep.down)
	if cerr := rep.transport.Close(); err == nil {
		err = cerr
	}
	if cerr := rep.guard.close(); err == nil {
		err = cerr
	}
	return err
}

// RaftStats are a member's figures of its group.
type RaftStats struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Leader   string `json:"leader"`
	LeaderID string `json:"leader_id"`
	Term     string `json:"term"`
	Commit   string `json:"commit_index"`
	Applied  string `json:"applied_index"`
	LastLog  string `json:"last_log_index"`
	Snapshot string `json:"last_snapshot_index"`
	// LastContact is how many seconds ago a follower last heard from
	// its leader (0 on the leader; -1: never).
	LastContact float64  `json:"last_contact_seconds"`
	Members     []Member `json:"members"`
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
	switch lc := st["last_contact"]; lc {
	case "0":
	case "never":
		out.LastContact = -1
	default:
		if d, err := time.ParseDuration(lc); err == nil {
			out.LastContact = d.Seconds()
		}
	}
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
	faults *netFaults // nil but in tests

	once     sync.Once
	admitted chan net.Conn // authenticated connections, for Accept
	ended    chan struct{} // closed when the listener fails or closes
	err      error         // why; set before ended is closed
}

func (l *streamLayer) Addr() net.Addr { return l.adv }

// Accept returns the next connection whose peer proved it holds the
// secret; others are closed. Each handshake runs on its own goroutine
// (acceptLoop), so that a peer that connects and says nothing holds up
// no other member for the handshake's deadline.
func (l *streamLayer) Accept() (net.Conn, error) {
	l.once.Do(l.start)
	select {
	case nc := <-l.admitted:
		return nc, nil
	case <-l.ended:
		return nil, l.err
	}
}

func (l *streamLayer) start() {
	l.admitted, l.ended = make(chan net.Conn), make(chan struct{})
	go l.acceptLoop()
}

// acceptLoop accepts connections and authenticates each on a goroutine
// of its own, until the listener is closed.
func (l *streamLayer) acceptLoop() {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			l.err = err
			close(l.ended)
			return
		}
		go func() {
			if err := wire.AuthServer(nc, l.secret, "raft"); err != nil {
				l.log.Warn("raft: refused a member connection", "remote", nc.RemoteAddr(), "err", err)
				nc.Close()
				return
			}
			if nc = l.faults.wrap(nc); nc == nil {
				return
			}
			select {
			case l.admitted <- nc:
			case <-l.ended:
				nc.Close()
			}
		}()
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
	if nc = l.faults.wrap(nc); nc == nil {
		return nil, fmt.Errorf("member %s: %w", addr, errCut)
	}
	return nc, nil
}

// netFaults cuts a member off from the others, for tests: while cut, its
// Raft connections are closed and no new one is made.
type netFaults struct {
	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

var errCut = errors.New("cut off by a test")

// wrap returns nc, tracked to be closed at the next cut; nil (nc closed)
// while cut. A nil netFaults injects nothing.
func (f *netFaults) wrap(nc net.Conn) net.Conn {
	if f == nil {
		return nc
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut {
		nc.Close()
		return nil
	}
	if f.conns == nil {
		f.conns = map[net.Conn]struct{}{}
	}
	f.conns[nc] = struct{}{}
	return nc
}

// setCut cuts the member off (closing its connections) or heals it.
func (f *netFaults) setCut(cut bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut = cut
	if cut {
		for c := range f.conns {
			c.Close()
		}
		f.conns = nil
	}
}

// raftStore is what Raft keeps its log and its terms and votes in.
type raftStore interface {
	raft.LogStore
	raft.StableStore
	Close() error
}

// guardedStore is the member's store as Raft uses it, closed safely: a
// heartbeat that Raft's transport took just before the shutdown may
// still save a term after it, and Raft answers a failure to save one
// with a panic. After close, such a call waits for the process's end
// instead: its connection is closed, so its peer gets no answer, as from
// a stopped member.
type guardedStore struct {
	mu     sync.RWMutex
	closed bool
	inner  raftStore
}

// enter holds the store open for one call, or never returns once it is
// closed.
func (g *guardedStore) enter() {
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		select {} // unreachable: see guardedStore
	}
}

func (g *guardedStore) close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	return g.inner.Close()
}

func (g *guardedStore) FirstIndex() (uint64, error) {
	g.enter()
	defer g.mu.RUnlock()
	return g.inner.FirstIndex()
}

func (g *guardedStore) LastIndex() (uint64, error) {
	g.enter()
	defer g.mu.RUnlock()
	return g.inner.LastIndex()
}

func (g *guardedStore) GetLog(index uint64, log *raft.Log) error {
	g.enter()
	defer g.mu.RUnlock()
	return g.inner.GetLog(index, log)
}

func (g *guardedStore) StoreLog(log *raft.Log) error {
	g.enter()
	defer g.mu.RUnlock()
	return g.inner.StoreLog(log)
}

func (g *guardedStore) StoreLogs(logs []*raft.Log) error {
	g.enter()
	defer g.mu.RUnlock()
	return g.inner.StoreLogs(logs)
}

func (g *guardedStore) DeleteRange(min, max uint64) error {
	g.enter()
	defer g.mu.RUnlock()
	return g.inner.DeleteRange(min, max)
}

func (g *guardedStore) Set(key, val []byte) error {
	g.enter()
	defer g.mu.RUnlock()
	return g.inner.Set(key, val)
}

func (g *guardedStore) Get(key []byte) ([]byte, error) {
	g.enter()
	defer g.mu.RUnlock()
	return g.inner.Get(key)
}

func (g *guardedStore) SetUint64(key []byte, val uint64) error {
	g.enter()
	defer g.mu.RUnlock()
	return g.inner.SetUint64(key, val)
}

// IsMonotonic forwards the store's promise that its log has no gaps (see
// raft.MonotonicLogStore).
func (g *guardedStore) IsMonotonic() bool {
	m, ok := g.inner.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (g *guardedStore) GetUint64(key []byte) (uint64, error) {
	g.enter()
	defer g.mu.RUnlock()
	return g.inner.GetUint64(key)
}
