package metaserver

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/wire"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// commit applies writes through the apply loop and waits until durable.
func commit(t testing.TB, s *Server, ws ...wire.Write) {
	t.Helper()
	done := make(chan byte, 1)
	s.commits <- &commitReq{c: &wire.Commit{Writes: ws}, done: func(st byte, msg string) { done <- st }}
	if st := <-done; st != wire.StatusOK {
		t.Fatalf("commit: status %d", st)
	}
}

func set(k, v string) wire.Write { return wire.Write{Key: []byte(k), Value: []byte(v)} }
func del(k string) wire.Write    { return wire.Write{Key: []byte(k), Delete: true} }

// dump renders the published state.
func dump(s *Server) string {
	var b strings.Builder
	s.pub.Load().tree.Ascend(func(it item) bool {
		fmt.Fprintf(&b, "%s=%s ", it.key(), it.val())
		return true
	})
	return b.String()
}

func open(t *testing.T, dir string, cp int64) *Server {
	t.Helper()
	s, err := Open(Options{Dir: dir, CheckpointBytes: cp, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// crash stops s as a crash would: no final checkpoint, the log as it is.
func crash(s *Server) {
	s.closed.Store(true)
	// With the log marked failed, the syncer writes no final checkpoint.
	err := errors.New("crashed")
	s.failed.Store(&err)
	close(s.stop)
	<-s.syncEnd
	s.cpWG.Wait()
	s.seg.f.Close()
	s.lock.Close()
}

func TestRecover(t *testing.T) {
	tests := []struct {
		name  string
		cp    int64 // checkpoint threshold
		clean bool  // Close rather than crash
	}{
		{"log only", 1 << 30, false},
		{"checkpoints and log", 200, false},
		{"clean close", 1 << 30, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, tt.cp)
			for i := 0; i < 50; i++ {
				commit(t, s, set(fmt.Sprintf("k%02d", i), fmt.Sprint(i)), del(fmt.Sprintf("k%02d", i-10)))
			}
			want := dump(s)
			if tt.clean {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				crash(s)
			}
			s = open(t, dir, tt.cp)
			defer s.Close()
			if got := dump(s); got != want {
				t.Fatalf("after restart:\n%s\nwant\n%s", got, want)
			}
			if s.Stats().Index != 50 {
				t.Fatalf("index %d after restart, want 50", s.Stats().Index)
			}
			if tt.cp < 1000 {
				segs, _ := listFiles(dir, "log-", ".wal")
				cps, _ := listFiles(dir, "checkpoint-", ".ckpt")
				if len(cps) != 1 || len(segs) > 3 {
					t.Fatalf("checkpoints %v and segments %v: old ones were not removed", cps, segs)
				}
			}
		})
	}
}

// recordsEnd returns the offset just past the last record of segment p
// (space allocated ahead follows it).
func recordsEnd(t *testing.T, p string) int64 {
	t.Helper()
	good, err := readSegment(p, func(*record) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return good
}

// lastSegment returns the path of the newest log segment holding records.
func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	segs, _ := listFiles(dir, "log-", ".wal")
	for i := len(segs) - 1; i >= 0; i-- {
		p := segmentPath(dir, segs[i])
		if recordsEnd(t, p) > 0 {
			return p
		}
	}
	t.Fatal("no log records")
	return ""
}

func TestTornTail(t *testing.T) {
	damage := []struct {
		name string
		fn   func(path string, size int64) error
	}{
		{"cut inside the last record", func(p string, size int64) error { return os.Truncate(p, size-3) }},
		{"cut inside the last header", func(p string, size int64) error { return os.Truncate(p, size-int64(recordLen(t, p))+4) }},
		{"zeros over the last record", func(p string, size int64) error {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt(make([]byte, 5), size-5)
			return err
		}},
		{"flipped byte in the last record", func(p string, size int64) error { return flip(p, size-2) }},
		{"garbage after the records", func(p string, size int64) error {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt([]byte{0, 0, 1, 0, 9, 9}, size)
			return err
		}},
	}
	for _, d := range damage {
		t.Run(d.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, 1<<30)
			for i := 0; i < 5; i++ {
				commit(t, s, set(fmt.Sprint("k", i), "v"))
			}
			crash(s)
			p := lastSegment(t, dir)
			if err := d.fn(p, recordsEnd(t, p)); err != nil {
				t.Fatal(err)
			}
			s = open(t, dir, 1<<30)
			got := dump(s)
			want := "k0=v k1=v k2=v k3=v "
			if d.name == "garbage after the records" {
				want += "k4=v "
			}
			if got != want {
				t.Fatalf("after a damaged tail: %q, want %q", got, want)
			}
			// New commits go on after the cut, and survive another start.
			commit(t, s, set("k9", "v"))
			crash(s)
			s = open(t, dir, 1<<30)
			defer s.Close()
			if got := dump(s); got != want+"k9=v " {
				t.Fatalf("after more commits: %q", got)
			}
		})
	}
}

// recordLen returns the framed length of the last record of segment p.
func recordLen(t *testing.T, p string) int {
	t.Helper()
	var last int
	prev := int64(0)
	readSegmentOffsets(p, func(off int64) { last = int(off - prev); prev = off })
	return last
}

// readSegmentOffsets calls fn with the end offset of every good record.
func readSegmentOffsets(p string, fn func(int64)) {
	var off int64
	readSegment(p, func(r *record) error {
		off += int64(len(appendRecord(nil, r)))
		fn(off)
		return nil
	})
}

func flip(path string, at int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, at); err != nil {
		return err
	}
	b[0] ^= 0x40
	_, err = f.WriteAt(b, at)
	return err
}

func TestRefusedDamage(t *testing.T) {
	t.Run("corrupt checkpoint", func(t *testing.T) {
		dir := t.TempDir()
		s := open(t, dir, 1<<30)
		commit(t, s, set("a", "1"), set("b", "2"))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		cps, _ := listFiles(dir, "checkpoint-", ".ckpt")
		if len(cps) != 1 {
			t.Fatalf("checkpoints after Close: %v", cps)
		}
		p := checkpointPath(dir, cps[0])
		if err := flip(p, int64(len(checkpointMagic))+10); err != nil {
			t.Fatal(err)
		}
		_, err := Open(Options{Dir: dir, Logger: quiet()})
		if !errors.Is(err, errBadCheckpoint) || !strings.Contains(err.Error(), filepath.Base(p)) {
			t.Fatalf("open with a corrupt checkpoint: %v", err)
		}
	})
	t.Run("bad record before good ones", func(t *testing.T) {
		dir := t.TempDir()
		s := open(t, dir, 1<<30)
		commit(t, s, set("a", "1"))
		crash(s)
		first := lastSegment(t, dir)
		s = open(t, dir, 1<<30)
		commit(t, s, set("b", "2"))
		crash(s)
		if err := flip(first, 12); err != nil {
			t.Fatal(err)
		}
		_, err := Open(Options{Dir: dir, Logger: quiet()})
		if !errors.Is(err, errBadRecord) || !strings.Contains(err.Error(), "refusing to start") {
			t.Fatalf("open with a bad record in mid-log: %v", err)
		}
	})
	t.Run("second server on one directory", func(t *testing.T) {
		dir := t.TempDir()
		s := open(t, dir, 1<<30)
		defer s.Close()
		if _, err := Open(Options{Dir: dir, Logger: quiet()}); err == nil || !strings.Contains(err.Error(), "in use") {
			t.Fatalf("second server: %v", err)
		}
	})
}

func TestDedupe(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<30)
	c := &wire.Commit{Client: 7, Txn: 1, Writes: []wire.Write{set("a", "1")}}
	for i := 0; i < 2; i++ {
		done := make(chan byte, 1)
		s.commits <- &commitReq{c: c, done: func(st byte, _ string) { done <- st }}
		if st := <-done; st != wire.StatusOK {
			t.Fatalf("commit %d: status %d", i, st)
		}
	}
	if s.Stats().Index != 1 {
		t.Fatalf("a retried commit was applied twice: index %d", s.Stats().Index)
	}
	crash(s)
	s = open(t, dir, 1<<30)
	defer s.Close()
	done := make(chan byte, 1)
	s.commits <- &commitReq{c: c, done: func(st byte, _ string) { done <- st }}
	if st := <-done; st != wire.StatusOK || s.Stats().Index != 1 {
		t.Fatalf("retry after restart: status %d, index %d", st, s.Stats().Index)
	}
}

func TestInodeCount(t *testing.T) {
	node := func(ino byte) string { return "A\x00\x00\x00\x00\x00\x00\x00" + string([]byte{ino}) + "I" }
	dir := t.TempDir()
	s := open(t, dir, 1<<30)
	commit(t, s, set(node(1), "n"), set(node(2), "n"), set(node(3), "n"), set("A\x00\x00\x00\x00\x00\x00\x00\x01Dname", "e"))
	commit(t, s, set(node(2), "changed"), del(node(3)), del(node(9)))
	if n := s.Stats().Inodes; n != 2 {
		t.Fatalf("%d inodes after 3 created, 1 rewritten, 1 deleted, 1 missing deleted; want 2", n)
	}
	crash(s) // replay counts them again
	s = open(t, dir, 1<<30)
	if n := s.Stats().Inodes; n != 2 {
		t.Fatalf("%d inodes after replay, want 2", n)
	}
	if err := s.Close(); err != nil { // a checkpoint counts them too
		t.Fatal(err)
	}
	s = open(t, dir, 1<<30)
	defer s.Close()
	if n := s.Stats().Inodes; n != 2 {
		t.Fatalf("%d inodes after a checkpoint, want 2", n)
	}
}

// TestServerCompressesIdlePages: the loop compresses pages nobody uses,
// publishes them, opens again those a reader meets, and a checkpoint of
// compressed pages loads back the same.
func TestServerCompressesIdlePages(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, CheckpointBytes: 1 << 30, CompressIdle: time.Second, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	var ws []wire.Write
	for i := range 3000 {
		ws = append(ws, set(fmt.Sprintf("A%08dI", i), strings.Repeat("attributes", 7)))
	}
	commit(t, s, ws...)
	before := dump(s)
	waitFor := func(what string, ok func(*tree) bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(s.pub.Load().tree); {
			if time.Now().After(deadline) {
				t.Fatalf("no %s in 20 s: %d of %d pages compressed", what, s.pub.Load().tree.zpages, s.pub.Load().tree.pages.Len())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("compressed pages", func(t *tree) bool { return t.zpages > 0 && t.zpages == t.pages.Len() })
	if got := dump(s); got != before {
		t.Fatal("the state reads differently once compressed")
	}
	all := s.pub.Load().tree.zpages
	if it, ok := s.pub.Load().tree.Get([]byte("A00001500I")); !ok || string(it.val()) != strings.Repeat("attributes", 7) {
		t.Fatalf("Get from a compressed page: %v %q", ok, it.val())
	}
	waitFor("page opened again", func(t *tree) bool { return t.zpages < all })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, 1<<30)
	defer s.Close()
	if got := dump(s); got != before {
		t.Fatal("a checkpoint of compressed pages loads back differently")
	}
}

// TestCallsRemembered checks that the calls named by commits (a mount's
// calls the server ran, see callTable) are remembered across a crash,
// from the log and from a checkpoint, and that a commit that was not
// applied names no call.
func TestCallsRemembered(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<30)
	send := func(s *Server, c *wire.Commit) byte {
		t.Helper()
		done := make(chan byte, 1)
		s.commits <- &commitReq{c: c, done: func(st byte, _ string) { done <- st }}
		return <-done
	}
	if st := send(s, &wire.Commit{Client: 7, Txn: 1, Writes: []wire.Write{set("a", "1")}, Session: 3, Call: 10}); st != wire.StatusOK {
		t.Fatalf("commit: status %d", st)
	}
	if st := send(s, &wire.Commit{Client: 7, Txn: 2, Writes: []wire.Write{set("b", "1")}}); st != wire.StatusOK {
		t.Fatalf("commit: status %d", st)
	}
	// A commit that conflicts is not applied, and names no call.
	snap := s.pub.Load().tree
	if st := send(s, &wire.Commit{Client: 7, Txn: 3, Writes: []wire.Write{set("a", "2")}, Session: 3, Call: 11}); st != wire.StatusOK {
		t.Fatalf("commit: status %d", st)
	}
	if st := send(s, &wire.Commit{Client: 7, Txn: 4, Writes: []wire.Write{set("a", "3")}, Session: 3, Call: 12}); st != wire.StatusOK {
		t.Fatalf("commit: status %d", st)
	}
	req := &commitReq{c: &wire.Commit{Client: 7, Txn: 5, Reads: [][]byte{[]byte("a")}, Writes: []wire.Write{set("c", "1")}, Session: 3, Call: 13}, snap: snap}
	done := make(chan byte, 1)
	req.done = func(st byte, _ string) { done <- st }
	s.commits <- req
	if st := <-done; st != wire.StatusConflict {
		t.Fatalf("commit over a changed read: status %d, want a conflict", st)
	}
	check := func(when string, s *Server) {
		t.Helper()
		for _, c := range []struct {
			sid, seq uint64
			want     bool
		}{{3, 10, true}, {3, 11, true}, {3, 12, true}, {3, 13, false}, {4, 10, false}, {0, 0, false}} {
			if got := s.calls.applied(c.sid, c.seq); got != c.want {
				t.Errorf("%s: call %d of session %d applied = %v, want %v", when, c.seq, c.sid, got, c.want)
			}
		}
	}
	check("before the crash", s)
	crash(s)
	s = open(t, dir, 1<<30)
	check("replayed from the log", s)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	crash(s)
	s = open(t, dir, 1<<30)
	defer s.Close()
	check("loaded from a checkpoint", s)
}
