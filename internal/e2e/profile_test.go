package e2e

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/accesslog"
)

// recordAccessLog copies the access log of the mount at mnt into a buffer,
// opening the log again whenever it ends (after a quiet second), the way
// `cat .accesslog > log` in a loop would. The log is open when it
// returns; stop ends the recording at the log's next end and returns
// what was recorded.
func recordAccessLog(t *testing.T, mnt string) (stop func() []byte) {
	t.Helper()
	path := filepath.Join(mnt, ".accesslog")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		buf     bytes.Buffer
		stopped atomic.Bool
		done    = make(chan error, 1)
	)
	go func() {
		for {
			_, err := io.Copy(&buf, f)
			f.Close()
			if err != nil || stopped.Load() {
				done <- err
				return
			}
			if f, err = os.Open(path); err != nil {
				done <- err
				return
			}
		}
	}()
	var once sync.Once
	return func() []byte {
		once.Do(func() {
			stopped.Store(true)
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("record the access log: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the access log did not end after a quiet second")
			}
		})
		return buf.Bytes()
	}
}

// profileTable reads the last table `sluice profile` printed in out:
// the count of each operation, and the total row's count.
func profileTable(t *testing.T, out string) (counts map[string]int, total int) {
	t.Helper()
	in := false
	counts = map[string]int{}
	total = -1
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "OPERATION":
			in, counts, total = true, map[string]int{}, -1
		case !in || len(f) != 5:
		case f[0] == "total":
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("total row %q: %v", line, err)
			}
			total, in = n, false
		default:
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("row %q: %v", line, err)
			}
			counts[f[0]] = n
		}
	}
	if total < 0 {
		t.Fatalf("no profile table in the output:\n%s", out)
	}
	return counts, total
}

// TestProfileReplaysRecordedLog records the access log while a known
// workload runs (20 files created, stated, read, 5 of them removed),
// then replays it with `sluice profile LOGFILE --interval 0`: the count
// of each operation must be that of the log's lines, create 20 and
// unlink 5, and every line must parse.
func TestProfileReplaysRecordedLog(t *testing.T) {
	v := newVolume(t)
	v.mount(t)
	if err := os.Mkdir(v.path("work"), 0o755); err != nil {
		t.Fatal(err)
	}
	stop := recordAccessLog(t, v.mnt)
	for i := range 20 {
		p := v.path(fmt.Sprintf("work/f%02d", i))
		if err := os.WriteFile(p, []byte(strings.Repeat("x", 100*i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		p := v.path(fmt.Sprintf("work/f%02d", i))
		if _, err := os.Stat(p); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(p); err != nil || len(b) != 100*i+1 {
			t.Fatalf("read %s: %d bytes, %v", p, len(b), err)
		}
	}
	for i := range 5 {
		if err := os.Remove(v.path(fmt.Sprintf("work/f%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	log := stop()

	// Count the lines per operation the way grep would: the fourth
	// field of each line that is not a comment.
	want := map[string]int{}
	lines := strings.Split(strings.TrimSuffix(string(log), "\n"), "\n")
	requests := 0
	for i, line := range lines {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if e, err := accesslog.Parse(line); err != nil {
			t.Errorf("line %d does not parse: %v", i+1, err)
		} else if f := strings.Fields(line); e.Op != f[3] {
			t.Errorf("line %d: operation %q, the line shows %q", i+1, e.Op, f[3])
		}
		want[strings.Fields(line)[3]]++
		requests++
	}
	if want["create"] != 20 || want["unlink"] != 5 {
		t.Fatalf("the log has %d creates and %d unlinks, want 20 and 5:\n%s", want["create"], want["unlink"], log)
	}

	file := filepath.Join(t.TempDir(), "access.log")
	if err := os.WriteFile(file, log, 0o644); err != nil {
		t.Fatal(err)
	}
	out := mustSluice(t, "profile", file, "--interval", "0")
	got, total := profileTable(t, out)
	if fmt.Sprint(got) != fmt.Sprint(want) || total != requests {
		t.Errorf("profile counts %v (total %d), the log's lines %v (total %d)\n%s", got, total, want, requests, out)
	}
	if wantLine := fmt.Sprintf("skipped 0 of %d lines", len(lines)); !strings.Contains(out, wantLine) {
		t.Errorf("output lacks %q:\n%s", wantLine, out)
	}

	// The requests of the threads that created the files (FUSE names the
	// calling thread, not its process): the lines with those pids.
	pids := map[string]bool{}
	for _, line := range lines {
		if f := strings.Fields(line); len(f) > 3 && f[3] == "create" {
			pids[strings.TrimSuffix(strings.SplitN(f[2], ",pid:", 2)[1], "]")] = true
		}
	}
	wantByPid, list := map[string]int{}, []string{}
	for pid := range pids {
		list = append(list, pid)
	}
	for _, line := range lines {
		f := strings.Fields(line)
		if !strings.HasPrefix(line, "#") && pids[strings.TrimSuffix(strings.SplitN(f[2], ",pid:", 2)[1], "]")] {
			wantByPid[f[3]]++
		}
	}
	out = mustSluice(t, "profile", file, "--interval", "0", "--pid", strings.Join(list, ","))
	if got, _ := profileTable(t, out); fmt.Sprint(got) != fmt.Sprint(wantByPid) || got["create"] != 20 {
		t.Errorf("--pid %s: %v, want %v\n%s", strings.Join(list, ","), got, wantByPid, out)
	}
	// A uid nobody used: nothing.
	out = mustSluice(t, "profile", file, "--interval", "0", "--uid", "4242")
	if _, total := profileTable(t, out); total != 0 {
		t.Errorf("--uid 4242: %d requests, want 0\n%s", total, out)
	}
}

// TestProfileLive runs `sluice profile MOUNT --interval 1` with its
// output to a pipe for about 3 seconds while a workload runs, then
// interrupts it: it must have printed tables, each after a line with the
// time, showing the workload's operations.
func TestProfileLive(t *testing.T) {
	v := newVolume(t)
	v.mount(t)
	var out bytes.Buffer
	cmd := exec.Command(sluiceBin, "profile", v.mnt, "--interval", "1")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	// Start the workload once the command reads the log, so that it
	// sees every request.
	logPath := filepath.Join(v.mnt, ".accesslog")
	eventuallyWithin(t, 20*time.Second, "profile opens "+logPath, func() error {
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", cmd.Process.Pid))
		for _, fd := range fds {
			if target, _ := os.Readlink(fd); target == logPath {
				return nil
			}
		}
		return fmt.Errorf("not open among %d descriptors", len(fds))
	})

	deadline := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		p := v.path(fmt.Sprintf("live%d", i))
		if err := os.WriteFile(p, []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("profile ended with %v:\n%s", err, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("profile did not end on SIGINT:\n%s", out.String())
	}
	s := out.String()
	if n := strings.Count(s, "\n--- ") + boolInt(strings.HasPrefix(s, "--- ")); n < 2 {
		t.Errorf("%d tables with a time line in 3 s of --interval 1, want 2 or more:\n%s", n, s)
	}
	if strings.Contains(s, "\033[") {
		t.Errorf("output to a pipe has terminal escapes:\n%q", s)
	}
	counts, total := profileTable(t, s)
	for _, op := range []string{"create", "write", "open", "read", "unlink"} {
		if counts[op] == 0 {
			t.Errorf("no %s in the last table:\n%s", op, s)
		}
	}
	if counts["create"] != counts["unlink"] && counts["create"] != counts["unlink"]+1 {
		t.Errorf("%d creates and %d unlinks: the workload removes each file it creates\n%s", counts["create"], counts["unlink"], s)
	}
	if total < 5*counts["create"] {
		t.Errorf("total %d below the workload's requests\n%s", total, s)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestProfileRejectsOtherPaths: a directory on another file system is
// neither a mount nor a log.
func TestProfileRejectsOtherPaths(t *testing.T) {
	r := sluice(t, "profile", t.TempDir())
	if r.code == 0 || !strings.Contains(r.stderr, "neither a Sluice mount point nor an access log file") {
		t.Errorf("profile of a plain directory: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = sluice(t, "stats", t.TempDir(), "--count", "1")
	if r.code == 0 || !strings.Contains(r.stderr, "is not on a Sluice mount") {
		t.Errorf("stats of a plain directory: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
