package metaserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/wire"
)

// Options configure a Server.
type Options struct {
	// Dir holds the log and the checkpoints. It is created if missing,
	// and locked: one server per directory.
	Dir string
	// Name, when set, is the only volume name clients may ask for.
	Name string
	// CheckpointBytes is how much log makes the server write a checkpoint
	// and cut the log (default 256 MiB).
	CheckpointBytes int64
	// SnapshotTTL is how long a snapshot a client stopped using is kept
	// (default 2 minutes).
	SnapshotTTL time.Duration
	// CompressIdle is how long a page of the state (a run of about fifty
	// records: a directory's entries, or neighbouring inodes) may go
	// unread and unwritten before the loop compresses it, in small steps
	// while no commit waits (default 10 s, at least 1 s; negative: never).
	CompressIdle time.Duration
	// Logger receives the server's log (default: slog.Default()).
	Logger *slog.Logger
	// Secret, when set, is what a client must prove it holds before its
	// first request is read (wire.AuthServer); the server proves it holds
	// it too. Empty: clients without a secret are served, and those with
	// one refused.
	Secret []byte
	// TLS, when set, encrypts every connection: the handshake runs over
	// TLS. Its ClientAuth may require client certificates.
	TLS *tls.Config
	// Raft, when set, makes the server a member of a replicated group
	// (see RaftOptions): Raft's log and snapshots replace the log and
	// checkpoints of a single server.
	Raft *RaftOptions
}

// Server holds one namespace in memory. Every change is applied by one
// goroutine (the apply loop) in log order; reads run on the connections'
// goroutines over immutable snapshots, which is safe because a published
// tree is never written again (the loop writes its own copy-on-write
// clone). A commit is acknowledged after the fsync of the log records
// that hold it, and its effect is published to readers at the same time.
type Server struct {
	opts   Options
	log    *slog.Logger
	lock   *os.File
	m      *metrics
	closed atomic.Bool

	// Owned by the apply loop.
	tree   *tree
	index  uint64 // last record applied
	inodes int64  // node records in tree
	dd     *dedupe
	calls  callTable
	logged int64 // log bytes since the last checkpoint

	commits   chan *commitReq
	cpRequest chan chan error
	stop      chan struct{}
	syncq     chan *batch
	syncReady chan struct{} // the syncer is free for the next batch
	finalErr  error         // of the checkpoint written at Close
	loopEnd   chan struct{}
	syncEnd   chan struct{}

	// Owned by the syncer.
	seg *segment

	pub       atomic.Pointer[published]
	failed    atomic.Pointer[error] // the log could not be written: no more commits
	cpRunning atomic.Bool
	cpWG      sync.WaitGroup
	cpIndex   atomic.Uint64 // index of the newest checkpoint
	cpSize    atomic.Int64

	snaps snapshots
	sess  *sessions // mounts whose operations the server runs
	// reader answers the reads of any member (anymember.go); pubWake
	// wakes those waiting for a published index.
	reader   reader
	pubWake  atomic.Pointer[chan struct{}]
	anyReads atomic.Uint64 // reads answered (Stats.AnyMemberReads)

	// A member of a replicated group (Options.Raft); see raft.go.
	rep     *replica
	leading atomic.Bool // validates and commits; serves clients
	fsmJobs chan *fsmJob
	// Owned by the apply loop: the leader's batches handed to Raft, by
	// the index of their last record, and the state Raft committed.
	pending   map[uint64]*published
	committed *published

	connMu sync.Mutex
	conns  map[*conn]struct{}
	lnMu   sync.Mutex
	lns    []closer
}

type closer interface{ Close() error }

// published is what readers see: the state as of a durable index.
type published struct {
	tree   *tree
	index  uint64
	inodes int64
}

// commitReq is one commit handed to the apply loop.
type commitReq struct {
	c      *wire.Commit
	snap   *tree // nil when c.Snap is 0 or the snapshot is gone
	noSnap bool  // c.Snap named a snapshot that is gone
	// conflict: what c read changed; the refusal is sent with the batch
	// (see apply).
	conflict bool
	done     func(status byte, msg string)
}

// batch is what the apply loop hands the syncer: records to make
// durable, then replies to send and a state to publish.
type batch struct {
	buf    []byte
	reqs   []*commitReq
	tree   *tree // clone after the batch; nil when nothing was applied
	index  uint64
	inodes int64
	cp     *checkpointJob
	stop   bool

	pub    bool       // pages were compressed or opened: publish the state even without records
	wantCP bool       // seal adds a checkpoint job
	cpDone chan error // told when the checkpoint asked for is written
}

type checkpointJob struct {
	tree  *tree
	index uint64
	dd    []dedupeEntry
	calls []dedupeEntry
	done  chan error // nil: nobody waits
}

// Open loads the state in opts.Dir (the newest checkpoint, then the log
// after it) and starts the apply loop. A torn or corrupt record at the
// end of the last log segment is cut; anything else that fails its
// checks (a corrupt checkpoint, a bad record with good ones after it, a
// gap in the log) is refused with an error that names the file.
func Open(opts Options) (*Server, error) {
	if opts.CheckpointBytes <= 0 {
		opts.CheckpointBytes = 256 << 20
	}
	if opts.SnapshotTTL <= 0 {
		opts.SnapshotTTL = 2 * time.Minute
	}
	if opts.CompressIdle == 0 {
		opts.CompressIdle = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(opts.Dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("data directory %s is in use by another server: %w", opts.Dir, err)
	}
	s := &Server{
		opts:      opts,
		log:       opts.Logger,
		lock:      lock,
		m:         newMetrics(),
		commits:   make(chan *commitReq, 1024),
		cpRequest: make(chan chan error),
		stop:      make(chan struct{}),
		syncq:     make(chan *batch, 1),
		syncReady: make(chan struct{}),
		loopEnd:   make(chan struct{}),
		syncEnd:   make(chan struct{}),
		conns:     map[*conn]struct{}{},
		fsmJobs:   make(chan *fsmJob),
	}
	s.snaps.init(opts.SnapshotTTL)
	s.m.pages(func() *tree {
		if p := s.pub.Load(); p != nil {
			return p.tree
		}
		return nil
	})
	if opts.Raft != nil {
		if err := s.openReplicated(); err != nil {
			lock.Close()
			return nil, err
		}
	} else {
		if err := s.recover(); err != nil {
			lock.Close()
			return nil, err
		}
		seg, err := createSegment(opts.Dir, s.index+1)
		if err != nil {
			lock.Close()
			return nil, err
		}
		s.seg = seg
		s.pub.Store(&published{tree: s.tree.Clone(), index: s.index, inodes: s.inodes})
		s.m.setInodes(s.inodes)
		s.m.keys.Set(float64(s.tree.Len()))
		// Decoding the checkpoint and the log left garbage as large as
		// the state; give it back before serving.
		debug.FreeOSMemory()
		go s.loop()
		go s.syncer()
	}
	go s.snaps.reap(s.loopEnd)
	s.initSessions()
	go s.reapSessions(s.loopEnd)
	return s, nil
}

// openReplicated starts a member of a replicated group: its state is
// what Raft restores (the newest snapshot, then the log); a data
// directory a single server left, which Raft has no state of, is loaded
// as a single server's is and becomes the group's first snapshot.
func (s *Server) openReplicated() error {
	// A single server's files stay where they are until they are a Raft
	// snapshot (snapshotLegacy moves them aside then): a first start as a
	// member that failed half-way must not leave them ignored.
	cps, _ := listFiles(s.opts.Dir, "checkpoint-", ".ckpt")
	segs, _ := listFiles(s.opts.Dir, "log-", ".wal")
	legacy := len(cps) > 0 || len(segs) > 0
	if legacy && len(s.opts.Raft.Peers) > 1 {
		return fmt.Errorf("data directory %s holds a single server's state: start it as a group of one (--peers naming only this member) and add the other members to it, so that they receive the state", s.opts.Dir)
	}
	if legacy {
		if err := s.recover(); err != nil {
			return err
		}
		s.log.Info("raft: starting from the state a single server left in the data directory", "index", s.index)
	} else {
		s.tree, s.dd, s.calls.d = newTree(), newDedupe(), newDedupe()
	}
	s.pending = map[uint64]*published{}
	s.committed = &published{tree: s.tree.Clone(), index: s.index, inodes: s.inodes}
	s.publish(s.committed)
	go s.loop()
	go s.replicator()
	if err := s.openRaft(legacy); err != nil {
		close(s.stop)
		<-s.syncEnd
		return err
	}
	return nil
}

// recover loads the newest checkpoint and replays the log after it.
func (s *Server) recover() error {
	// Loading makes little garbage (buffers are reused, pairs go into
	// arenas) but a heap that keeps growing: without this the collector
	// would run again and again over the state being built.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	dir := s.opts.Dir
	cps, err := listFiles(dir, "checkpoint-", ".ckpt")
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	s.tree, s.dd, s.calls.d = newTree(), newDedupe(), newDedupe()
	if len(cps) > 0 {
		newest := cps[len(cps)-1]
		path := checkpointPath(dir, newest)
		start := time.Now()
		index, t, dd, calls, inodes, err := readCheckpoint(path)
		if err != nil {
			return fmt.Errorf("load checkpoint: %w; refusing to start: restore the data directory from a copy, or move this checkpoint aside only if the log still holds every record after the previous one", err)
		}
		if index != newest {
			return fmt.Errorf("load checkpoint: %w: %s holds index %d", errBadCheckpoint, path, index)
		}
		s.tree, s.dd, s.calls.d, s.index, s.inodes = t, dd, calls, index, inodes
		s.cpIndex.Store(index)
		if st, err := os.Stat(path); err == nil {
			s.cpSize.Store(st.Size())
			s.m.checkpointBytes.Set(float64(st.Size()))
		}
		s.log.Info("loaded checkpoint", "file", path, "keys", t.Len(), "index", index, "took", time.Since(start).Round(time.Millisecond))
	}
	segs, err := listFiles(dir, "log-", ".wal")
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	replayed := 0
	start := time.Now()
	for i, first := range segs {
		path := segmentPath(dir, first)
		last := i == len(segs)-1
		if !last && segs[i+1] <= s.index+1 {
			continue // every record of this segment is in the checkpoint
		}
		good, err := readSegment(path, func(r *record) error {
			if r.Index <= s.index {
				return nil
			}
			if r.Index != s.index+1 {
				return fmt.Errorf("log %s: record %d follows %d: records are missing", path, r.Index, s.index)
			}
			s.inodes += applyWrites(s.tree, r.Writes, r.Index)
			s.dd.add(txnKey{r.Client, r.Txn}, r.Index)
			s.calls.add(txnKey{r.Session, r.Call}, r.Index)
			s.index = r.Index
			replayed++
			return nil
		})
		if errors.Is(err, errBadRecord) {
			if !last {
				return fmt.Errorf("log %s: %w, and later segments follow: refusing to start", path, err)
			}
			st, serr := os.Stat(path)
			if serr != nil {
				return serr
			}
			s.log.Warn("cutting the torn tail of the log", "file", path, "at", good, "dropped_bytes", st.Size()-good, "reason", err)
			if err := os.Truncate(path, good); err != nil {
				return fmt.Errorf("cut log %s: %w", path, err)
			}
			if err := syncDir(dir); err != nil {
				return err
			}
		} else if err != nil {
			return fmt.Errorf("replay log: %w", err)
		} else if st, serr := os.Stat(path); serr == nil && st.Size() > good {
			// Space allocated ahead of the records by a server that
			// did not stop cleanly.
			if err := os.Truncate(path, good); err != nil {
				return fmt.Errorf("trim log %s: %w", path, err)
			}
		}
	}
	if replayed > 0 {
		s.log.Info("replayed log", "records", replayed, "index", s.index, "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// loop is the apply loop: it validates and applies commits one at a
// time, in the order they arrive, into a batch, and hands the batch to
// the syncer when the syncer is free. So commits gather while a sync
// runs, and one fsync makes all of them durable (group commit).
func (s *Server) loop() {
	defer close(s.loopEnd)
	var cur *batch
	commits, stop := s.commits, s.stop
	clock := time.NewTicker(time.Second)
	defer clock.Stop()
	compact := time.NewTimer(time.Second)
	defer compact.Stop()
	var pass compaction
	for {
		var ready chan struct{}
		if cur != nil {
			ready = s.syncReady
		}
		in := commits
		if cur != nil && (len(cur.reqs) >= 4096 || len(cur.buf) >= 8<<20) {
			in = nil // full: wait for the syncer
		}
		select {
		case req := <-in:
			if cur == nil {
				cur = &batch{}
			}
			s.apply(req, cur)
		case done := <-s.cpRequest:
			if cur == nil {
				cur = &batch{}
			}
			cur.cpDone = done
			cur.wantCP = true
		case <-stop:
			stop, commits = nil, nil
			if cur == nil {
				cur = &batch{}
			}
			cur.stop = true
		case <-ready:
			s.seal(cur)
			s.syncq <- cur
			if cur.stop {
				return
			}
			cur = nil
		case j := <-s.fsmJobs:
			s.runFSM(j, &cur)
		case <-clock.C:
			s.tree.clock.now.Add(1)
		case p := <-s.tree.clock.opened:
			if s.tree.open(p) {
				if cur == nil {
					cur = &batch{}
				}
				cur.pub = true
			}
		case <-compact.C:
			// A step runs when no commit waits: the loop may still have
			// a batch the syncer has not taken, which then publishes the
			// step's pages along with its records, after their sync.
			wait := time.Second
			if len(s.commits) == 0 && s.opts.CompressIdle > 0 && pass.step(s) {
				if cur == nil {
					cur = &batch{}
				}
				cur.pub = true
				wait = 2 * time.Millisecond
			}
			compact.Reset(wait)
		}
	}
}

// compaction is where the loop's passes over the pages, compressing the
// idle ones, stand.
type compaction struct {
	at    []byte // first key of the last page looked at; nil: the start
	saved int    // bytes saved in this pass
}

// step compresses a few idle pages (a bounded amount of work, so that a
// commit arriving meanwhile waits at most about a millisecond) and
// reports whether it compressed any. At the end of a pass that saved
// much, the memory goes back to the system.
func (c *compaction) step(s *Server) bool {
	idle := uint32(max(1, s.opts.CompressIdle/time.Second))
	var n, saved int
	c.at, n, saved = s.tree.compact(c.at, idle, 512, 16)
	c.saved += saved
	if c.at == nil {
		if c.saved >= 8<<20 {
			go debug.FreeOSMemory()
		}
		c.saved = 0
	}
	return n > 0
}

// seal completes a batch as the syncer takes it: the state to publish,
// and a checkpoint when one is due or asked for.
func (s *Server) seal(b *batch) {
	if len(b.buf) > 0 || b.pub {
		b.tree = s.tree.Clone()
		b.index = s.index
		b.inodes = s.inodes
		s.logged += int64(len(b.buf))
		if s.rep != nil {
			// Raft's snapshots are the checkpoints of a member.
			if len(b.buf) > 0 {
				s.pending[b.index] = &published{tree: b.tree, index: b.index, inodes: b.inodes}
			}
			return
		}
		if s.logged >= s.opts.CheckpointBytes && !b.wantCP && !b.stop && s.cpRunning.CompareAndSwap(false, true) {
			b.wantCP = true
		}
	}
	if b.wantCP || b.stop {
		b.cp = s.checkpointJob(b.cpDone)
		s.logged = 0
	}
}

// checkpointJob returns a job for the state as it stands.
func (s *Server) checkpointJob(done chan error) *checkpointJob {
	return &checkpointJob{tree: s.tree.Clone(), index: s.index, dd: s.dd.entries(), calls: s.calls.entries(), done: done}
}

// apply validates one commit and, when it holds, applies it and adds its
// record to b.
func (s *Server) apply(req *commitReq, b *batch) {
	c := req.c
	key := txnKey{c.Client, c.Txn}
	if s.dd.has(key) {
		s.m.retried.Inc()
		b.reqs = append(b.reqs, req) // acknowledged once its record is durable
		return
	}
	if s.failed.Load() != nil {
		req.done(wire.StatusError, (*s.failed.Load()).Error())
		return
	}
	if s.rep != nil && !s.leading.Load() {
		req.done(wire.StatusNotLeader, "")
		return
	}
	if req.noSnap {
		req.done(wire.StatusNoSnapshot, "")
		return
	}
	if req.snap != nil && changed(req.snap, s.tree, c.Reads, c.Ranges) {
		// The refusal waits for the batch, as an acknowledgement does:
		// the change c lost to may not be published yet (it waits in
		// this batch or in the one the syncer is writing), and the
		// snapshot a retry sent at once would take is the published
		// state, without that change. Every such retry conflicted
		// again, for as long as a sync took, and a client retrying
		// every millisecond or so spent its attempts there (eight
		// writers of one key: seven retries in ten read what they had
		// lost with again; issue 51). Sent with the batch, the refusal
		// reaches the client once the state it lost to is what its
		// retry reads.
		s.m.conflicts.Inc()
		req.conflict = true
		b.reqs = append(b.reqs, req)
		return
	}
	if len(c.Writes) == 0 {
		b.reqs = append(b.reqs, req)
		return
	}
	s.index++
	s.inodes += applyWrites(s.tree, c.Writes, s.index)
	s.dd.add(key, s.index)
	s.calls.add(txnKey{c.Session, c.Call}, s.index)
	b.buf = appendRecord(b.buf, &record{Index: s.index, Client: c.Client, Txn: c.Txn, Writes: c.Writes, Session: c.Session, Call: c.Call})
	b.reqs = append(b.reqs, req)
}

// syncer makes batches durable in order, then publishes their state and
// acknowledges their commits.
func (s *Server) syncer() {
	defer close(s.syncEnd)
	for {
		s.syncReady <- struct{}{}
		b := <-s.syncq
		if len(b.buf) > 0 && s.failed.Load() == nil {
			start := time.Now()
			if err := s.seg.append(b.buf); err != nil {
				s.log.Error("the log cannot be written: refusing commits from now on", "err", err)
				s.failed.Store(&err)
			}
			s.m.fsync.Observe(time.Since(start).Seconds())
			s.m.logBytes.Add(float64(len(b.buf)))
			s.m.batch.Observe(float64(len(b.reqs)))
		}
		if err := s.failed.Load(); err != nil {
			for _, r := range b.reqs {
				r.done(wire.StatusError, (*err).Error())
			}
		} else {
			if b.tree != nil {
				s.pub.Store(&published{tree: b.tree, index: b.index, inodes: b.inodes})
				s.wakePublished()
				s.m.setInodes(b.inodes)
				s.m.keys.Set(float64(b.tree.Len()))
				s.m.index.Set(float64(b.index))
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
			// The final checkpoint, written here so that Close returns
			// with it durable.
			s.cpWG.Wait()
			if s.failed.Load() == nil {
				s.finalErr = s.writeCheckpoint(b.cp)
			} else {
				s.finalErr = *s.failed.Load()
			}
			return
		}
		if b.cp != nil {
			s.startCheckpoint(b.cp)
		}
	}
}

// startCheckpoint cuts the log at cp's index and writes the checkpoint
// in the background; when it is durable, the log before it and older
// checkpoints are removed. Runs on the syncer.
func (s *Server) startCheckpoint(cp *checkpointJob) {
	if s.failed.Load() != nil {
		if cp.done != nil {
			cp.done <- *s.failed.Load()
		}
		s.cpRunning.Store(false)
		return
	}
	if s.seg.size > 0 {
		seg, err := createSegment(s.opts.Dir, cp.index+1)
		if err != nil {
			s.log.Error("cannot start a new log segment; checkpoint skipped", "err", err)
			s.cpRunning.Store(false)
			if cp.done != nil {
				cp.done <- err
			}
			return
		}
		if err := s.seg.close(); err != nil {
			s.log.Warn("closing the previous log segment", "err", err)
		}
		s.seg = seg
	}
	s.cpWG.Add(1)
	go func() {
		defer s.cpWG.Done()
		defer s.cpRunning.Store(false)
		err := s.writeCheckpoint(cp)
		if err != nil {
			s.log.Error("checkpoint failed; the log is kept", "index", cp.index, "err", err)
		}
		if cp.done != nil {
			cp.done <- err
		}
	}()
}

func (s *Server) writeCheckpoint(cp *checkpointJob) error {
	if cp.index == s.cpIndex.Load() {
		return nil // nothing new since the last one
	}
	start := time.Now()
	size, err := writeCheckpoint(s.opts.Dir, cp.index, cp.tree, cp.dd, cp.calls)
	if err != nil {
		return err
	}
	s.cpIndex.Store(cp.index)
	s.cpSize.Store(size)
	s.m.checkpointBytes.Set(float64(size))
	s.m.checkpoints.Inc()
	s.log.Info("checkpoint written", "index", cp.index, "keys", cp.tree.Len(), "bytes", size, "took", time.Since(start).Round(time.Millisecond))
	// Older checkpoints and segments whose records it holds go.
	cps, _ := listFiles(s.opts.Dir, "checkpoint-", ".ckpt")
	for _, i := range cps {
		if i < cp.index {
			os.Remove(checkpointPath(s.opts.Dir, i))
		}
	}
	segs, _ := listFiles(s.opts.Dir, "log-", ".wal")
	for j, first := range segs {
		if j+1 < len(segs) && segs[j+1] <= cp.index+1 {
			os.Remove(segmentPath(s.opts.Dir, first))
		}
	}
	return syncDir(s.opts.Dir)
}

// Checkpoint writes a checkpoint of the state now and waits for it; a
// member of a replicated group takes a Raft snapshot.
func (s *Server) Checkpoint() error {
	if s.rep != nil {
		return s.rep.r.Snapshot().Error()
	}
	for !s.cpRunning.CompareAndSwap(false, true) {
		time.Sleep(10 * time.Millisecond)
	}
	done := make(chan error, 1)
	select {
	case s.cpRequest <- done:
	case <-s.loopEnd:
		s.cpRunning.Store(false)
		return errClosed
	}
	return <-done
}

var errClosed = errors.New("metadata server is shutting down")

// Close stops serving, writes a final checkpoint and releases the data
// directory.
func (s *Server) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.lnMu.Lock()
	for _, l := range s.lns {
		l.Close()
	}
	s.lnMu.Unlock()
	s.connMu.Lock()
	for c := range s.conns {
		c.close()
	}
	s.connMu.Unlock()
	// The sessions' usage counts are committed while the loop runs.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	s.closeReader(ctx)
	if s.rep == nil || s.leading.Load() {
		s.closeSessions(ctx)
	}
	cancel()
	if s.rep != nil {
		// Raft first, so that its state machine waits for no loop.
		err := s.closeRaft()
		close(s.stop)
		<-s.syncEnd
		s.lock.Close()
		return err
	}
	close(s.stop)
	<-s.syncEnd
	s.cpWG.Wait()
	err := s.finalErr
	if cerr := s.seg.close(); err == nil && s.failed.Load() == nil {
		err = cerr
	}
	s.lock.Close()
	return err
}
