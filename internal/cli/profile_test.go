package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/accesslog"
)

// profileLines are lines of a real mount's access log, with one line cut
// short and one comment added (the accesslog package's test log).
var profileLines = func() []string {
	b, err := os.ReadFile("../accesslog/testdata/cut.log")
	if err != nil {
		panic(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}()

func TestReplayProfileOnce(t *testing.T) {
	var out bytes.Buffer
	in := strings.NewReader(strings.Join(profileLines, "\n") + "\n")
	if err := replayProfile(&out, in, "a.log", 0, accesslog.Filter{}); err != nil {
		t.Fatal(err)
	}
	want := `a.log: 6 requests from 2026.11.26 14:33:35.508247 to 2026.11.26 14:33:38.646476 (3.138 s)
OPERATION      COUNT    TOTAL(ms)    AVG(ms)   TIME%
fsync              1       46.013     46.013    96.8
mkdir              1        0.448      0.448     0.9
opendir            1        0.431      0.431     0.9
lookup             2        0.356      0.178     0.7
create             1        0.302      0.302     0.6
total              6       47.550      7.925   100.0
skipped 2 of 8 lines (1 comment, 1 that do not parse); the mount dropped 12 lines because the reader was too slow, so the figures are short
`
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestReplayProfileFiltered(t *testing.T) {
	var out bytes.Buffer
	in := strings.NewReader(strings.Join(profileLines, "\n"))
	if err := replayProfile(&out, in, "a.log", 0, accesslog.Filter{Pids: []uint32{15897, 15976}}); err != nil {
		t.Fatal(err)
	}
	want := `a.log: 3 requests from 2026.11.26 14:33:35.509546 to 2026.11.26 14:33:36.696330 (1.187 s) of pid 15897,15976; 3 other requests left out
OPERATION      COUNT    TOTAL(ms)    AVG(ms)   TIME%
opendir            1        0.431      0.431    50.1
create             1        0.302      0.302    35.1
lookup             1        0.128      0.128    14.9
total              3        0.861      0.287   100.0
skipped 2 of 8 lines (1 comment, 1 that do not parse); the mount dropped 12 lines because the reader was too slow, so the figures are short
`
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestReplayProfileIntervals: with an interval, a table of the totals so
// far follows each interval of the log's time that had requests, then
// the whole.
func TestReplayProfileIntervals(t *testing.T) {
	var out bytes.Buffer
	in := strings.NewReader(strings.Join(profileLines, "\n"))
	if err := replayProfile(&out, in, "a.log", time.Second, accesslog.Filter{}); err != nil {
		t.Fatal(err)
	}
	// Intervals start at the first request, 14:33:35.508247: the first
	// ends before the create, the second before the fsync.
	var marks, totals []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "---") {
			marks = append(marks, l)
		}
		if strings.HasPrefix(l, "total ") {
			totals = append(totals, strings.Fields(l)[1])
		}
	}
	wantMarks := []string{"--- 2026.11.26 14:33:36.508 (log time)", "--- 2026.11.26 14:33:37.508 (log time)", "--- end of a.log"}
	if strings.Join(marks, "\n") != strings.Join(wantMarks, "\n") {
		t.Errorf("separators %q, want %q", marks, wantMarks)
	}
	if want := []string{"3", "5", "6"}; strings.Join(totals, ",") != strings.Join(want, ",") {
		t.Errorf("totals %v, want %v\n%s", totals, want, out.String())
	}
}

func TestProfileRejects(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "nothing"), "no such file"},
		{"plain directory", dir, "neither a Sluice mount point nor an access log file"},
		{"fifo", fifo, "neither a Sluice mount point nor an access log file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := runProfile(context.Background(), &bytes.Buffer{}, tt.path, time.Second, accesslog.Filter{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("runProfile(%s) = %v, want an error with %q", tt.path, err, tt.want)
			}
		})
	}
	root := NewRoot()
	root.SetArgs([]string{"profile", dir, "--uid", "1,x"})
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	if err := root.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "--uid") {
		t.Errorf("profile --uid 1,x = %v, want an error naming --uid", err)
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestFollowProfileReopens follows an access log that ends twice, the way
// .accesslog of a mount ends after a quiet second: a FIFO stands for it,
// and each writer that closes it ends one reading. The tables must add
// up the lines of both readings.
func TestFollowProfileReopens(t *testing.T) {
	root := t.TempDir()
	logPath := filepath.Join(root, ".accesslog")
	if err := syscall.Mkfifo(logPath, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- followProfile(ctx, out, root, 20*time.Millisecond, accesslog.Filter{}) }()

	// write opens the FIFO once the follower opened it for reading (an
	// open without a reader fails with ENXIO) and writes lines.
	write := func(lines []string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		var f *os.File
		for {
			var err error
			if f, err = os.OpenFile(logPath, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				break
			}
			if !errors.Is(err, syscall.ENXIO) || time.Now().After(deadline) {
				t.Fatalf("the follower does not open the log (again): %v", err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	write(profileLines[:4])
	// A writer that opens the FIFO after the follower read its end but
	// before it closed that reading would write into a pipe about to be
	// dropped, and its lines would be lost. A mount's log has no such
	// window (each reading is its own handle), so wait until the first
	// lines are counted and the first reading is closed.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "3 requests") || fifoOpen(t, logPath) {
		if time.Now().After(deadline) {
			t.Fatalf("the follower does not close its first reading; output:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	write(profileLines[4:])

	want := "total              6       47.550      7.925   100.0"
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no table with %q; output:\n%s", want, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	// The follower waits in a new open of the FIFO; let it finish.
	if f, err := os.OpenFile(logPath, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		f.Close()
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("followProfile: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("followProfile did not return after cancel")
	}
	s := out.String()
	if !strings.HasPrefix(s, "--- ") {
		t.Errorf("output to a non-terminal does not start with a time line:\n%s", s)
	}
	if !strings.Contains(s, "skipped 2 of 8 lines (1 comment, 1 that do not parse)") {
		t.Errorf("output does not count the skipped lines:\n%s", s)
	}
}

// fifoOpen reports whether this process holds a descriptor of path.
func fifoOpen(t *testing.T, path string) bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && target == path {
			return true
		}
	}
	return false
}
