package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSQLiteWALAfterKilledMount runs SQLite in WAL mode on a mount, with
// acknowledged commits (synchronous=FULL) and the connection holding the
// WAL write lock on its -shm file when the mount is killed with SIGKILL.
// The dead FUSE mount is forced off and the volume mounted again at once
// on the same host, with the default heartbeat: the dead session would
// expire only after 5 minutes, so everything here must come from the new
// mount cleaning up after it before it serves. At once: every
// acknowledged row is there and the uncommitted one is not (SQLite found
// no live connection, and recovered the WAL instead of trusting a stale
// shared-memory index), integrity_check passes, a writer with no busy
// timeout commits (no "database is locked"), and `sluice status` lists
// the new mount only.
func TestSQLiteWALAfterKilledMount(t *testing.T) {
	requireTools(t, "python3")
	script, err := filepath.Abs("testdata/sqlite_wal.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, engine := range []string{"sqlite3", "redis", "sluice"} {
		t.Run(engine, func(t *testing.T) {
			v := newVolumeOn(t, engine)
			v.mount(t)
			db := v.path("wal.db")
			w := startSQLiteServe(t, script, db)
			var acked []string
			for k := range 60 {
				acked = append(acked, strconv.Itoa(k))
				w.ask(t, "insert "+acked[k], "ok "+acked[k])
				if k%10 == 9 {
					w.ask(t, "read", fmt.Sprintf("rows %d", k+1))
				}
			}
			w.ask(t, "hold", "held")

			pid := mountPID(t, v, v.mnt)
			if s := sessionOf(t, v, pid); s == nil || s.LockCount == 0 {
				t.Fatalf("the mount's session (pid %d) holds no lock before the kill: %+v", pid, s)
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitProcessGone(t, pid)
			if r := sluice(t, "umount", "--force", v.mnt); r.code != 0 {
				t.Fatalf("umount --force of the dead mount: %s", r.stderr)
			}
			w.kill()
			if sessionOf(t, v, pid) == nil {
				t.Fatal("the dead mount's session is gone before the new mount: the test proves nothing")
			}

			start := time.Now()
			v.mount(t)
			took := time.Since(start)
			out, err := exec.Command("python3", script, db, "check").CombinedOutput()
			checked := time.Since(start)
			if err != nil {
				t.Fatalf("check: %v\n%s", err, out)
			}
			got := map[string]string{}
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				k, val, _ := strings.Cut(l, " ")
				got[k] = val
			}
			if _, wrote := got["wrote"]; !wrote || len(got) != 4 {
				t.Errorf("check after the remount:\n%s", out)
			}
			if got["journal_mode"] != "wal" || got["integrity"] != "ok" {
				t.Errorf("journal_mode %q, integrity_check %q; want wal, ok", got["journal_mode"], got["integrity"])
			}
			if want := strings.Join(acked, ","); got["rows"] != want {
				t.Errorf("rows %q, want the acknowledged ones %q", got["rows"], want)
			}
			if s := sessionOf(t, v, pid); s != nil {
				t.Errorf("sluice status still lists the dead session: %+v", s)
			}
			if n := len(sessions(t, v)); n != 1 {
				t.Errorf("sluice status lists %d sessions, want the new mount's only", n)
			}
			t.Logf("remount took %v; SQLite read and wrote %v after the remount began", took.Round(time.Millisecond), checked.Round(time.Millisecond))
		})
	}
}

// sqliteServe is a sqlite_wal.py serve process.
type sqliteServe struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

// startSQLiteServe starts `sqlite_wal.py DB serve` and waits until its
// table is ready; the end of the test kills it.
func startSQLiteServe(t *testing.T, script, db string) *sqliteServe {
	t.Helper()
	cmd := exec.Command("python3", script, db, "serve")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &sqliteServe{cmd: cmd, in: in, lines: make(chan string, 16)}
	t.Cleanup(w.kill)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
	}()
	if l := w.next(t); l != "journal_mode wal" {
		t.Fatalf("journal mode: %q", l)
	}
	if l := w.next(t); l != "ready" {
		t.Fatalf("start: %q", l)
	}
	return w
}

// next returns the next line the process printed.
func (w *sqliteServe) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-w.lines:
		if !ok {
			t.Fatal("sqlite_wal.py ended")
		}
		return l
	case <-time.After(time.Minute):
		t.Fatal("sqlite_wal.py did not answer within a minute")
	}
	return ""
}

// ask sends a command and fails t unless the answer is want.
func (w *sqliteServe) ask(t *testing.T, cmd, want string) {
	t.Helper()
	if _, err := fmt.Fprintln(w.in, cmd); err != nil {
		t.Fatal(err)
	}
	if l := w.next(t); l != want {
		t.Fatalf("%s: %q, want %q", cmd, l, want)
	}
}

// kill ends the process with SIGKILL and waits for it; calling it again
// does nothing.
func (w *sqliteServe) kill() {
	if w.cmd.ProcessState == nil {
		w.cmd.Process.Kill()
		w.cmd.Wait()
	}
}

// sessionStatus is what these tests read of a session in `sluice status`.
type sessionStatus struct {
	Sid       uint64
	PID       int
	LockCount int
}

func sessions(t *testing.T, v *volume) []sessionStatus {
	t.Helper()
	var st struct{ Sessions []sessionStatus }
	if err := json.Unmarshal([]byte(mustSluice(t, "status", v.metaURL)), &st); err != nil {
		t.Fatal(err)
	}
	return st.Sessions
}

// sessionOf returns the session of the mount process pid, or nil.
func sessionOf(t *testing.T, v *volume, pid int) *sessionStatus {
	t.Helper()
	for _, s := range sessions(t, v) {
		if s.PID == pid {
			return &s
		}
	}
	return nil
}

// waitProcessGone waits until process pid has ended: reaped, or a
// zombie (its parent, the init of a container, may never reap it).
func waitProcessGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if os.IsNotExist(err) {
			return
		}
		if i := strings.LastIndexByte(string(stat), ')'); err == nil && i > 0 && strings.HasPrefix(string(stat[i:]), ") Z") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still there 10 s after SIGKILL", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
