package metaserver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// openTestLog opens the Raft log in dir with small segments, so that a
// few hundred entries span many, and closes it when the test ends.
func openTestLog(t *testing.T, dir string) *raftLog {
	t.Helper()
	l, err := openRaftLog(dir, quiet())
	if err != nil {
		t.Fatal(err)
	}
	l.segMax, l.ahead = 4<<10, 4<<10
	t.Cleanup(func() { l.Close() })
	return l
}

// testEntry is the entry of index i in term term, its fields all used.
func testEntry(i, term uint64) *raft.Log {
	e := &raft.Log{Index: i, Term: term, Type: raft.LogType(i % 6), Data: bytes.Repeat([]byte{byte(i), byte(term)}, int(i%300))}
	if i%3 == 0 {
		e.Extensions = []byte(fmt.Sprint("ext", i))
	}
	if i%2 == 0 {
		e.AppendedAt = time.Unix(1700000000, int64(i)).Local()
	}
	return e
}

// storeRange appends entries from to to, in batches of up to 7.
func storeRange(t *testing.T, l *raftLog, from, to, term uint64) {
	t.Helper()
	for i := from; i <= to; {
		var es []*raft.Log
		for n := 1 + i%7; n > 0 && i <= to; n, i = n-1, i+1 {
			es = append(es, testEntry(i, term))
		}
		if err := l.StoreLogs(es); err != nil {
			t.Fatal(err)
		}
	}
}

// checkLog checks that l holds exactly the entries first to last, in
// the terms term gives.
func checkLog(t *testing.T, l *raftLog, first, last uint64, term func(uint64) uint64) {
	t.Helper()
	if got, _ := l.FirstIndex(); got != first {
		t.Errorf("FirstIndex = %d, want %d", got, first)
	}
	if got, _ := l.LastIndex(); got != last {
		t.Errorf("LastIndex = %d, want %d", got, last)
	}
	for i := first; i <= last && first > 0; i++ {
		var got raft.Log
		if err := l.GetLog(i, &got); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		want := testEntry(i, term(i))
		if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type ||
			!bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Extensions, want.Extensions) || !got.AppendedAt.Equal(want.AppendedAt) {
			t.Fatalf("GetLog(%d) = %+v, want %+v", i, got, *want)
		}
	}
	for _, i := range []uint64{first - 1, last + 1} {
		if i == 0 && first > 0 {
			continue
		}
		if err := l.GetLog(i, new(raft.Log)); !errors.Is(err, raft.ErrLogNotFound) {
			t.Errorf("GetLog(%d) = %v, want ErrLogNotFound", i, err)
		}
	}
}

func termOne(uint64) uint64 { return 1 }

func segments(t *testing.T, dir string) []uint64 {
	t.Helper()
	s, err := listFiles(dir, "seg-", ".log")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRaftLogRoundTrip stores entries across many segments and reads
// them back, before and after reopening.
func TestRaftLogRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir)
	checkLog(t, l, 0, 0, termOne)
	storeRange(t, l, 1, 600, 1)
	checkLog(t, l, 1, 600, termOne)
	if n := len(segments(t, dir)); n < 10 {
		t.Fatalf("%d segments, want the entries to span at least 10", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir)
	checkLog(t, l, 1, 600, termOne)
	storeRange(t, l, 601, 700, 2)
	checkLog(t, l, 1, 700, func(i uint64) uint64 { return 1 + i/601 })
	if err := l.StoreLog(testEntry(702, 2)); err == nil || !strings.Contains(err.Error(), "gap") {
		t.Errorf("appending 702 after 700 = %v, want a gap refused", err)
	}
}

// TestRaftLogDeleteRange deletes a prefix, a suffix or everything, goes
// on appending, and reopens.
func TestRaftLogDeleteRange(t *testing.T) {
	tests := []struct {
		name     string
		from, to uint64
		// After the deletion, entries first to last; appended after
		// that: next to 450 in term 2 (next 0: the entry after last).
		first, last, next uint64
	}{
		{"prefix", 1, 250, 251, 400, 0},
		{"prefix of one", 1, 1, 2, 400, 0},
		{"suffix", 333, 400, 1, 332, 0},
		{"suffix of one", 400, 400, 1, 399, 0},
		{"suffix from the start", 2, 400, 1, 1, 0},
		{"all", 1, 400, 0, 0, 1000},
		{"beyond the end", 401, 500, 1, 400, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openTestLog(t, dir)
			storeRange(t, l, 1, 400, 1)
			if err := l.DeleteRange(tt.from, tt.to); err != nil {
				t.Fatal(err)
			}
			checkLog(t, l, tt.first, tt.last, termOne)
			next := tt.next
			if next == 0 {
				next = tt.last + 1
			}
			storeRange(t, l, next, next+50, 2)
			first := tt.first
			if first == 0 {
				first = next
			}
			term := func(i uint64) uint64 {
				if i >= next {
					return 2
				}
				return 1
			}
			checkLog(t, l, first, next+50, term)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			// A prefix's partial segment is kept whole: after a restart
			// its first entries are readable again.
			segs := segments(t, dir)
			if segs[0] > first || len(segs) > 1 && segs[1] <= first {
				t.Fatalf("segments start at %v: want the first to hold entry %d", segs, first)
			}
			checkLog(t, openTestLog(t, dir), segs[0], next+50, term)
		})
	}
}

// TestRaftLogTornTail damages the end of the last segment; reopening
// cuts it, and appends go on after the last good entry.
func TestRaftLogTornTail(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, path string, lastOff int64)
		last   uint64 // the last entry left
	}{
		{"truncated mid-record", func(t *testing.T, path string, off int64) { truncateFile(t, path, off+20) }, 99},
		{"truncated mid-header", func(t *testing.T, path string, off int64) { truncateFile(t, path, off+5) }, 99},
		{"garbage appended", func(t *testing.T, path string, off int64) {
			appendFile(t, path, []byte("\x00\x00\x00\x40garbage that is not a record"))
		}, 100},
		{"random bytes appended", func(t *testing.T, path string, off int64) {
			b := make([]byte, 300)
			rand.New(rand.NewSource(1)).Read(b)
			appendFile(t, path, b)
		}, 100},
		{"last record corrupt", func(t *testing.T, path string, off int64) { flipByte(t, path, off+30) }, 99},
		{"zeros past the end", func(t *testing.T, path string, off int64) { appendFile(t, path, make([]byte, 5000)) }, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openTestLog(t, dir)
			storeRange(t, l, 1, 100, 1)
			l.mu.RLock()
			loc := l.mu.locs[len(l.mu.locs)-1]
			l.mu.RUnlock()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			tt.damage(t, loc.seg.f.Name(), loc.off)
			l = openTestLog(t, dir)
			checkLog(t, l, 1, tt.last, termOne)
			storeRange(t, l, tt.last+1, 120, 2)
			term := func(i uint64) uint64 { return 1 + i/(tt.last+1) }
			checkLog(t, l, 1, 120, term)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			checkLog(t, openTestLog(t, dir), 1, 120, term)
		})
	}
}

// TestRaftLogCrash reopens a log never closed, its last segment still
// holding the space allocated ahead, and one whose first append to a new
// segment was lost.
func TestRaftLogCrash(t *testing.T) {
	dir := t.TempDir()
	l, err := openRaftLog(dir, quiet())
	if err != nil {
		t.Fatal(err)
	}
	storeRange(t, l, 1, 50, 1)
	l.closeFiles() // no Close: the allocated space stays
	l = openTestLog(t, dir)
	checkLog(t, l, 1, 50, termOne)
	l.Close()
	empty := raftSegmentPath(dir, 51)
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir)
	checkLog(t, l, 1, 50, termOne)
	if _, err := os.Stat(empty); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the empty last segment is still there: %v", err)
	}
}

// TestRaftLogRefused damages what is not the end of the log: opening
// fails, naming the file.
func TestRaftLogRefused(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string, segs []uint64) string // returns the file to name
		bad    bool                                                 // the error wraps errBadRecord
	}{
		{"corrupt record in the first segment", func(t *testing.T, dir string, segs []uint64) string {
			p := raftSegmentPath(dir, segs[0])
			flipByte(t, p, 40)
			return p
		}, true},
		{"torn end of a middle segment", func(t *testing.T, dir string, segs []uint64) string {
			p := raftSegmentPath(dir, segs[2])
			fi, _ := os.Stat(p)
			truncateFile(t, p, fi.Size()-3)
			return p
		}, true},
		{"a segment missing", func(t *testing.T, dir string, segs []uint64) string {
			if err := os.Remove(raftSegmentPath(dir, segs[2])); err != nil {
				t.Fatal(err)
			}
			return raftSegmentPath(dir, segs[3])
		}, false},
		{"a segment renamed", func(t *testing.T, dir string, segs []uint64) string {
			p := raftSegmentPath(dir, segs[1]+1)
			if err := os.Rename(raftSegmentPath(dir, segs[1]), p); err != nil {
				t.Fatal(err)
			}
			return p
		}, false},
		{"raft-boltdb's file", func(t *testing.T, dir string, segs []uint64) string {
			p := filepath.Join(dir, "raft.db")
			if err := os.WriteFile(p, []byte("bolt"), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, false},
		{"stable store corrupt", func(t *testing.T, dir string, segs []uint64) string {
			p := filepath.Join(dir, raftStableFile)
			flipByte(t, p, 6)
			return p
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openTestLog(t, dir)
			storeRange(t, l, 1, 300, 1)
			if err := l.SetUint64([]byte("CurrentTerm"), 7); err != nil {
				t.Fatal(err)
			}
			l.Close()
			segs := segments(t, dir)
			if len(segs) < 5 {
				t.Fatalf("%d segments, want at least 5", len(segs))
			}
			name := tt.damage(t, dir, segs)
			_, err := openRaftLog(dir, quiet())
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("open = %v, want an error naming %s", err, name)
			}
			if errors.Is(err, errBadRecord) != tt.bad {
				t.Errorf("open = %v, wrapping errBadRecord: %v, want %v", err, !tt.bad, tt.bad)
			}
		})
	}
}

// TestRaftStableStore sets keys and reads them back, before and after
// reopening.
func TestRaftStableStore(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir)
	if _, err := l.Get([]byte("x")); err == nil || err.Error() != "not found" {
		t.Errorf("Get of a missing key = %v, want \"not found\" (Raft compares the text)", err)
	}
	if v, err := l.GetUint64([]byte("CurrentTerm")); v != 0 || err == nil || err.Error() != "not found" {
		t.Errorf("GetUint64 of a missing key = %d, %v, want 0, \"not found\"", v, err)
	}
	sets := []struct {
		key, val string
	}{{"LastVoteCand", "m1"}, {"empty", ""}, {"LastVoteCand", "m2"}, {"bin", "\x00\x01\xff"}}
	for _, s := range sets {
		if err := l.Set([]byte(s.key), []byte(s.val)); err != nil {
			t.Fatal(err)
		}
	}
	for _, term := range []uint64{1, 5, 1 << 40} {
		if err := l.SetUint64([]byte("CurrentTerm"), term); err != nil {
			t.Fatal(err)
		}
	}
	check := func(l *raftLog) {
		t.Helper()
		want := map[string]string{"LastVoteCand": "m2", "empty": "", "bin": "\x00\x01\xff"}
		for k, v := range want {
			if got, err := l.Get([]byte(k)); err != nil || string(got) != v {
				t.Errorf("Get(%q) = %q, %v, want %q", k, got, err, v)
			}
		}
		if got, err := l.GetUint64([]byte("CurrentTerm")); err != nil || got != 1<<40 {
			t.Errorf("GetUint64 = %d, %v, want %d", got, err, uint64(1<<40))
		}
	}
	check(l)
	l.Close()
	check(openTestLog(t, dir))
	if _, err := os.Stat(filepath.Join(dir, raftStableFile+".tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary file left behind: %v", err)
	}
}

func truncateFile(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x5a
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// sumFSM is a state machine that adds up its entries' numbers, which
// the test applies in increasing order: one not above the largest so
// far is an entry applied again after a failover, and is skipped.
type sumFSM struct{ top, sum atomic.Uint64 }

func (f *sumFSM) Apply(l *raft.Log) any {
	v := binary.BigEndian.Uint64(l.Data)
	if v > f.top.Load() {
		f.top.Store(v)
		f.sum.Add(v)
	}
	return nil
}

func (f *sumFSM) Snapshot() (raft.FSMSnapshot, error) {
	return sumSnapshot{f.top.Load(), f.sum.Load()}, nil
}

func (f *sumFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var b [16]byte
	if _, err := io.ReadFull(rc, b[:]); err != nil {
		return err
	}
	f.top.Store(binary.BigEndian.Uint64(b[:]))
	f.sum.Store(binary.BigEndian.Uint64(b[8:]))
	return nil
}

type sumSnapshot struct{ top, sum uint64 }

func (s sumSnapshot) Persist(sink raft.SnapshotSink) error {
	b := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, s.top), s.sum)
	if _, err := sink.Write(b); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (sumSnapshot) Release() {}

// raftNode is a member of a group TestRaftLogUnderRaft makes.
type raftNode struct {
	id   raft.ServerID
	dir  string
	log  *raftLog
	fsm  *sumFSM
	tr   *raft.InmemTransport
	r    *raft.Raft
	conf *raft.Config
}

// start opens n's log and starts its Raft.
func (n *raftNode) start(t *testing.T) {
	t.Helper()
	var err error
	if n.log, err = openRaftLog(filepath.Join(n.dir, "raft"), quiet()); err != nil {
		t.Fatal(err)
	}
	n.log.segMax, n.log.ahead = 4<<10, 4<<10
	snaps, err := raft.NewFileSnapshotStoreWithLogger(n.dir, 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	cache, err := raft.NewLogCache(16, n.log)
	if err != nil {
		t.Fatal(err)
	}
	n.fsm = &sumFSM{}
	if n.r, err = raft.NewRaft(n.conf, n.fsm, cache, n.log, snaps, n.tr); err != nil {
		t.Fatal(err)
	}
}

func (n *raftNode) stop(t *testing.T) {
	t.Helper()
	if err := n.r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	if err := n.log.Close(); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 15s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRaftLogUnderRaft runs a group of three Raft members on the log:
// the leader's log is cut after a snapshot (a prefix), a member that
// was away catches up from the snapshot (Raft empties its log, which
// then starts again after the snapshot's index), a leader cut off
// appends entries that the next leader's replace (a suffix), and members
// restart from their logs.
func TestRaftLogUnderRaft(t *testing.T) {
	nodes := make([]*raftNode, 3)
	var cfg raft.Configuration
	for i := range nodes {
		conf := raft.DefaultConfig()
		conf.LocalID = raft.ServerID(fmt.Sprint("n", i))
		conf.Logger = hclog.NewNullLogger()
		conf.HeartbeatTimeout, conf.ElectionTimeout = 100*time.Millisecond, 100*time.Millisecond
		conf.LeaderLeaseTimeout, conf.CommitTimeout = 50*time.Millisecond, 5*time.Millisecond
		conf.TrailingLogs, conf.SnapshotThreshold, conf.SnapshotInterval = 20, 1<<30, time.Hour
		_, tr := raft.NewInmemTransport(raft.ServerAddress(conf.LocalID))
		nodes[i] = &raftNode{id: conf.LocalID, dir: t.TempDir(), tr: tr, conf: conf}
		cfg.Servers = append(cfg.Servers, raft.Server{ID: conf.LocalID, Address: tr.LocalAddr()})
	}
	connect := func(a *raftNode) {
		for _, b := range nodes {
			if a != b {
				a.tr.Connect(b.tr.LocalAddr(), b.tr)
				b.tr.Connect(a.tr.LocalAddr(), a.tr)
			}
		}
	}
	isolate := func(a *raftNode) {
		a.tr.DisconnectAll()
		for _, b := range nodes {
			b.tr.Disconnect(a.tr.LocalAddr())
		}
	}
	for _, n := range nodes {
		connect(n)
		n.start(t)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.r.Shutdown().Error()
			n.log.Close()
		}
	})
	if err := nodes[0].r.BootstrapCluster(cfg).Error(); err != nil {
		t.Fatal(err)
	}
	leader := func() *raftNode {
		t.Helper()
		var l *raftNode
		waitFor(t, "a leader", func() bool {
			for _, n := range nodes {
				if n.r.State() == raft.Leader {
					l = n
					return true
				}
			}
			return false
		})
		return l
	}
	apply := func(from, to uint64) {
		t.Helper()
		for i := from; i <= to; i++ {
			// A failover may lose an entry, or commit it and lose the
			// answer: it is sent again (the state machine skips it
			// if it was applied).
			var err error
			for try := 0; try < 5; try++ {
				if err = leader().r.Apply(binary.BigEndian.AppendUint64(nil, i), 5*time.Second).Error(); err == nil {
					break
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	sum := func(to uint64) uint64 { return to * (to + 1) / 2 }
	converged := func(to uint64) {
		t.Helper()
		for _, n := range nodes {
			waitFor(t, fmt.Sprintf("%s applies 1 to %d", n.id, to), func() bool { return n.fsm.sum.Load() == sum(to) })
		}
	}
	apply(1, 100)
	converged(100)

	// One follower is cut off while the leader goes on, takes a
	// snapshot, and cuts its log behind it.
	l := leader()
	away := nodes[0]
	if away == l {
		away = nodes[1]
	}
	isolate(away)
	apply(101, 400)
	if err := l.r.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	first, _ := l.log.FirstIndex()
	last, _ := l.log.LastIndex()
	if first < 300 || last-first > 100 {
		t.Fatalf("the leader's log holds %d to %d after the snapshot: want only the last entries", first, last)
	}
	if segs := segments(t, l.log.dir); len(segs) > 10 {
		t.Errorf("the leader's log has %d segments after the snapshot: want those before it removed", len(segs))
	}
	awayLast, _ := away.log.LastIndex()

	// Back, it catches up from the snapshot: its old log goes.
	connect(away)
	apply(401, 450)
	converged(450)
	if first, _ := away.log.FirstIndex(); first <= awayLast {
		t.Errorf("the member that was away holds entries from %d: want its log from before the snapshot (to %d) emptied", first, awayLast)
	}

	// A leader cut off appends entries nobody else sees; back, it takes
	// the next leader's entries in their place.
	old := leader()
	isolate(old)
	doomed := old.r.Apply(binary.BigEndian.AppendUint64(nil, 1<<40), 0)
	for i := 0; i < 5; i++ {
		old.r.Apply(binary.BigEndian.AppendUint64(nil, 1<<40), 0)
	}
	if doomed.Error() == nil {
		t.Fatal("a leader cut off from the group committed an entry")
	}
	waitFor(t, "another leader", func() bool {
		for _, n := range nodes {
			if n != old && n.r.State() == raft.Leader {
				return true
			}
		}
		return false
	})
	oldLast, _ := old.log.LastIndex()
	apply(451, 480)
	connect(old)
	converged(480)
	var e raft.Log
	if err := old.log.GetLog(oldLast, &e); err != nil || len(e.Data) == 8 && binary.BigEndian.Uint64(e.Data) == 1<<40 {
		t.Errorf("entry %d of the leader that was cut off = %v, %v: want the next leader's", oldLast, e, err)
	}

	// Every member restarts from its log and snapshot.
	for _, n := range nodes {
		n.stop(t)
	}
	for _, n := range nodes {
		n.start(t)
	}
	for _, n := range nodes {
		connect(n) // Shutdown closed the transports
	}
	apply(481, 500)
	converged(500)
}
