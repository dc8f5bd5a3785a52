package metaserver

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCatchUp measures how long a member added to a group takes to
// catch up from the leader's snapshot of N small files
// (SLUICE_CATCHUP_FILES, default 1,000,000; issue's figure 10,000,000):
// a single server's data directory holding their checkpoint becomes a
// one-member group, whose first snapshot is that state; a second member
// with an empty directory is added, and the time runs from AddMember
// until the new member publishes the leader's index and key count. Each
// run is checked by digest afterwards.
//
//	SLUICE_CATCHUP_FILES=10000000 go test -run XXX -bench CatchUp -benchtime 3x -timeout 60m ./internal/metaserver
//
// Per run it reports (medians over the runs): catchup-s, and
// catchup-cpu-s, the CPU time the process spent in it; the phases of
// it, transfer-s (from AddMember until Restore is called), split into
// stream-s (until the new member's snapshot store has the snapshot on
// disk: the leader's store reading it once for its CRC-64, then the
// stream, written and checksummed and synced on the other side) and
// open-s (the new member's store reading it again for its CRC-64),
// restore-copy-s and restore-decode-s (what Restore logs); persist-s,
// the leader writing a whole snapshot (Raft's Snapshot, taken apart from
// the catch-up); snapshot-MB; and, of the process holding both members,
// the heap and resident memory the new member added, and the peak
// resident memory during the catch-up above what it held before.
func BenchmarkCatchUp(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("SLUICE_CATCHUP_FILES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("SLUICE_CATCHUP_FILES=%q: want a positive count", v)
		}
	}
	// The single server's checkpoint, written once; every run starts the
	// leader on a link to it.
	tmpl := b.TempDir()
	start := time.Now()
	t := synthTree(n)
	pairs := t.Len()
	size, err := writeCheckpoint(tmpl, 7, t, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	t = nil
	b.Logf("%d files: %d pairs, checkpoint of %.0f MB, made in %v", n, pairs, float64(size)/1e6, time.Since(start).Round(time.Millisecond))
	var runs []catchUpRun
	b.ResetTimer()
	for range b.N {
		runs = append(runs, catchUp(b, tmpl, pairs))
	}
	b.StopTimer()
	med := func(f func(catchUpRun) float64) float64 {
		var xs []float64
		for _, r := range runs {
			xs = append(xs, f(r))
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(med(func(r catchUpRun) float64 { return r.total.Seconds() }), "catchup-s")
	b.ReportMetric(med(func(r catchUpRun) float64 { return r.cpu.Seconds() }), "catchup-cpu-s")
	b.ReportMetric(med(func(r catchUpRun) float64 { return r.transfer.Seconds() }), "transfer-s")
	b.ReportMetric(med(func(r catchUpRun) float64 { return r.stream.Seconds() }), "stream-s")
	b.ReportMetric(med(func(r catchUpRun) float64 { return r.open.Seconds() }), "open-s")
	b.ReportMetric(med(func(r catchUpRun) float64 { return r.copy.Seconds() }), "restore-copy-s")
	b.ReportMetric(med(func(r catchUpRun) float64 { return r.decode.Seconds() }), "restore-decode-s")
	b.ReportMetric(med(func(r catchUpRun) float64 { return r.persist.Seconds() }), "persist-s")
	b.ReportMetric(med(func(r catchUpRun) float64 { return r.crc64.Seconds() }), "crc64-pass-s")
	b.ReportMetric(float64(runs[0].snapshot)/1e6, "snapshot-MB")
	b.ReportMetric(med(func(r catchUpRun) float64 { return float64(r.heap) / 1e6 }), "member-heap-MB")
	b.ReportMetric(med(func(r catchUpRun) float64 { return float64(r.rss) / 1e6 }), "member-rss-MB")
	b.ReportMetric(med(func(r catchUpRun) float64 { return float64(r.peak) / 1e6 }), "peak-rss-MB")
	for i, r := range runs {
		b.Logf("run %d: %+v", i, r)
	}
}

// catchUpRun is one run's figures.
type catchUpRun struct {
	total, transfer, stream, open, copy, decode time.Duration
	cpu, persist, crc64                         time.Duration
	snapshot                                    int64
	heap, rss, peak                             int64 // bytes
}

func (r catchUpRun) String() string {
	return fmt.Sprintf("catch-up %v, CPU %v (transfer %v = stream %v + open %v, restore copy %v, decode %v); persist %v; crc64 pass %v; snapshot %d B; member heap %d MB, rss %d MB, peak +%d MB",
		r.total.Round(time.Millisecond), r.cpu.Round(time.Millisecond), r.transfer.Round(time.Millisecond), r.stream.Round(time.Millisecond), r.open.Round(time.Millisecond), r.copy.Round(time.Millisecond), r.decode.Round(time.Millisecond),
		r.persist.Round(time.Millisecond), r.crc64.Round(time.Millisecond), r.snapshot, r.heap>>20, r.rss>>20, r.peak>>20)
}

// catchUp runs one catch-up: a leader on a copy of the single server's
// directory tmpl, then a new member.
func catchUp(b *testing.B, tmpl string, pairs int) catchUpRun {
	b.Helper()
	var run catchUpRun
	dir := b.TempDir()
	cps, err := listFiles(tmpl, "checkpoint-", ".ckpt")
	if err != nil || len(cps) != 1 {
		b.Fatalf("template checkpoints: %v %v", cps, err)
	}
	if err := os.Link(checkpointPath(tmpl, cps[0]), checkpointPath(dir, cps[0])); err != nil {
		b.Fatal(err)
	}
	logs := &logTap{}
	a := benchMember(b, "a", dir, logs, true)
	defer a.s.Close()
	logs.wait(b, "raft: the single server's state is the group's first snapshot", 10*time.Minute)

	// The leader's Persist of a whole snapshot, on its own.
	commit(b, a.s, set("after", "v"))
	start := time.Now()
	if err := a.s.rep.r.Snapshot().Error(); err != nil {
		b.Fatal(err)
	}
	run.persist = time.Since(start)
	snaps, _ := filepath.Glob(filepath.Join(dir, "raft", "snapshots", "*", "state.bin"))
	slices.Sort(snaps)
	if len(snaps) == 0 {
		b.Fatal("the leader has no snapshot")
	}
	st, err := os.Stat(snaps[len(snaps)-1])
	if err != nil {
		b.Fatal(err)
	}
	run.snapshot = st.Size()
	run.crc64 = crc64Pass(b, snaps[len(snaps)-1])

	nb := &logTap{}
	nm := benchMember(b, "b", b.TempDir(), nb, false)
	defer nm.s.Close()
	debug.FreeOSMemory()
	heap0, rss0 := heapInUse(), procStatus(b, "VmRSS")
	// Reset the peak resident size, so VmHWM is the catch-up's peak.
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)

	start, cpu0 := time.Now(), cpuTime()
	added := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		added <- a.s.AddMember(ctx, "b", nm.raftAddr)
	}()
	want := a.s.pub.Load()
	for {
		if p := nm.s.pub.Load(); p.index == want.index && p.tree.Len() == want.tree.Len() {
			break
		}
		if time.Since(start) > 10*time.Minute {
			b.Fatal("the new member did not catch up in 10 minutes")
		}
		time.Sleep(5 * time.Millisecond)
	}
	run.total, run.cpu = time.Since(start), cpuTime()-cpu0
	peak := procStatus(b, "VmHWM")
	if err := <-added; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	defer b.StartTimer()
	r := nb.find(b, "raft: state restored from a snapshot")
	if _, ok := r.attrs["copy"]; ok { // Restore copied the stream to a file first
		run.copy = r.dur(b, "copy")
	}
	run.decode = r.dur(b, "took")
	run.transfer = r.at.Sub(start) - run.copy - run.decode
	// The new member's snapshot store writes meta.json once it has the
	// whole stream on disk, synced; then it reads it all again for its
	// CRC-64 before handing it to Restore.
	metas, _ := filepath.Glob(filepath.Join(nm.dir, "raft", "snapshots", "*", "meta.json"))
	if len(metas) != 1 {
		b.Fatalf("the new member's snapshots: %v", metas)
	}
	if st, err := os.Stat(metas[0]); err == nil {
		run.stream = st.ModTime().Sub(start)
		run.open = run.transfer - run.stream
	}
	debug.FreeOSMemory()
	run.heap, run.rss, run.peak = heapInUse()-heap0, procStatus(b, "VmRSS")-rss0, peak-rss0
	if got := nm.s.pub.Load(); got.tree.Len() != pairs+1 || digest(got.tree) != digest(want.tree) {
		b.Fatalf("the new member holds %d pairs, want %d, or another state", got.tree.Len(), pairs+1)
	}
	b.Logf("%v", run)
	return run
}

// benchMember opens a member on dir, alone in a new group (first) or
// waiting to be added.
func benchMember(b *testing.B, id, dir string, logs *logTap, first bool) *member {
	b.Helper()
	rl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	m := &member{id: id, dir: dir, raftAddr: rl.Addr().String()}
	var peers []Peer
	if first {
		peers = []Peer{{ID: id, Addr: m.raftAddr}}
	}
	m.s, err = Open(Options{Dir: dir, Logger: slog.New(logs), Raft: &RaftOptions{
		ID: id, Listener: rl, Peers: peers,
		HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
	}})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// synthTree builds, in key order through the loader, the pairs of n
// small files shaped as BenchmarkCheckpointLoad's (and as
// bench/metaserver.sh's volume): directories of 1,000 files, each
// directory a node record and an entry per file, each file a node
// record and one chunk record of one slice.
func synthTree(n int) *tree {
	ld := newLoader()
	dirs := (n + 999) / 1000
	firstFile := uint64(2 + dirs)
	var k []byte
	key := func(ino uint64, kind byte, rest ...byte) []byte {
		k = append(k[:0], 'A')
		k = binary.BigEndian.AppendUint64(k, ino)
		return append(append(k, kind), rest...)
	}
	node, entry, chunk := make([]byte, 66), make([]byte, 9), make([]byte, 24)
	add := func(k, v []byte, seed uint64) {
		binary.BigEndian.PutUint64(v, seed) // values differ, as a volume's do
		if !ld.add(k, v, 0) {
			panic(fmt.Sprintf("synthTree: key %x out of order", k))
		}
	}
	for d := range dirs {
		ino := uint64(2 + d)
		for i := d * 1000; i < min(n, (d+1)*1000); i++ {
			add(key(ino, 'D', fmt.Appendf(nil, "file-%06d", i%1000)...), entry, firstFile+uint64(i))
		}
		add(key(ino, 'I'), node, ino)
	}
	for i := range n {
		ino := firstFile + uint64(i)
		add(key(ino, 'C', 0, 0, 0, 0), chunk, ino)
		add(key(ino, 'I'), node, ino)
	}
	return ld.tree()
}

// crc64Pass times one read of path through the CRC-64 Raft's
// FileSnapshotStore checks a snapshot with before it is opened.
func crc64Pass(b *testing.B, path string) time.Duration {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	start := time.Now()
	if _, err := io.Copy(crc64.New(crc64.MakeTable(crc64.ECMA)), bufio.NewReader(f)); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// cpuTime is the CPU time the process has used, both members' (and
// their collector's): on a shared machine a steadier figure than the
// wall clock's.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapInUse() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// procStatus returns a size field of /proc/self/status, in bytes.
func procStatus(b *testing.B, field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	b.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// logTap is a slog handler that keeps the records a server logs, so the
// benchmark can wait for one and read its figures.
type logTap struct {
	mu   sync.Mutex
	recs []tapped
}

type tapped struct {
	at    time.Time // when it was logged
	msg   string
	attrs map[string]slog.Value
}

func (r tapped) dur(b *testing.B, key string) time.Duration {
	v, ok := r.attrs[key]
	if !ok || v.Kind() != slog.KindDuration {
		b.Fatalf("log %q has no duration %q: %v", r.msg, key, r.attrs)
	}
	return v.Duration()
}

func (l *logTap) Enabled(context.Context, slog.Level) bool { return true }
func (l *logTap) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logTap) WithGroup(string) slog.Handler            { return l }
func (l *logTap) Handle(_ context.Context, r slog.Record) error {
	t := tapped{at: time.Now(), msg: r.Message, attrs: map[string]slog.Value{}}
	r.Attrs(func(a slog.Attr) bool {
		t.attrs[a.Key] = a.Value
		return true
	})
	l.mu.Lock()
	l.recs = append(l.recs, t)
	l.mu.Unlock()
	return nil
}

func (l *logTap) lookup(msg string) (tapped, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		if r.msg == msg {
			return r, true
		}
	}
	return tapped{}, false
}

func (l *logTap) find(b *testing.B, msg string) tapped {
	r, ok := l.lookup(msg)
	if !ok {
		b.Fatalf("nothing logged %q", msg)
	}
	return r
}

// wait polls for a record: the servers log from goroutines of their own.
func (l *logTap) wait(b *testing.B, msg string, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		if _, ok := l.lookup(msg); ok {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("nothing logged %q in %v", msg, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
