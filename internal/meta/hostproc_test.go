package meta

import (
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/testserver"
)

// self returns this process's identity, skipping where /proc cannot
// tell it.
func self(t *testing.T) procIdentity {
	t.Helper()
	id, ok := thisProcess()
	if !ok {
		testserver.Missing(t, "/proc does not tell this process's identity", "run on Linux with /proc of the process's own pid namespace")
	}
	return id
}

// TestThisProcess checks the identity read from /proc against what the
// kernel tells otherwise: the pid, a boot id in UUID form, a pid
// namespace link, and a start time after boot no later than now.
func TestThisProcess(t *testing.T) {
	id := self(t)
	if id.pid != os.Getpid() {
		t.Errorf("pid %d, want %d", id.pid, os.Getpid())
	}
	if len(id.bootID) != 36 || strings.Count(id.bootID, "-") != 4 {
		t.Errorf("boot id %q is not a UUID", id.bootID)
	}
	if !strings.HasPrefix(id.pidNS, "pid:[") {
		t.Errorf("pid namespace %q", id.pidNS)
	}
	up, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	secs, err := strconv.ParseFloat(strings.Fields(string(up))[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	// USER_HZ is 100 on every Linux architecture Go supports.
	if now := uint64(secs*100) + 1; id.start == 0 || id.start > now {
		t.Errorf("start time %d ticks after boot, now is %d", id.start, now)
	}
}

// exitedChild starts a process that exits at once and returns its pid
// while it is a zombie (not reaped), and a function that reaps it.
func exitedChild(t *testing.T) (pid int, reap func()) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start /bin/sh: %v", err)
	}
	pid = cmd.Process.Pid
	reaped := false
	reap = func() {
		if !reaped {
			reaped = true
			cmd.Wait()
		}
	}
	t.Cleanup(reap)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, state, err := procStat(pid)
		if err != nil {
			t.Fatal(err)
		}
		if state == 'Z' {
			return pid, reap
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d still in state %c after 10 s", pid, state)
		}
	}
}

func TestGone(t *testing.T) {
	id := self(t)
	mine := SessionInfo{Host: "h", PID: id.pid, BootID: id.bootID, PIDNamespace: id.pidNS, ProcStart: id.start}
	with := func(f func(*SessionInfo)) SessionInfo {
		i := mine
		f(&i)
		return i
	}
	zombie, reap := exitedChild(t)
	reaped, reapIt := exitedChild(t)
	reapIt()
	for _, tc := range []struct {
		name string
		info SessionInfo
		gone bool
	}{
		{"this process", mine, false},
		{"this process, start unknown", with(func(i *SessionInfo) { i.ProcStart = 0 }), false},
		{"pid reused by this process", with(func(i *SessionInfo) { i.ProcStart = id.start - 1 }), true},
		{"pid free", with(func(i *SessionInfo) { i.PID, i.ProcStart = reaped, 0 }), true},
		{"zombie", with(func(i *SessionInfo) { i.PID, i.ProcStart = zombie, 0 }), true},
		{"another host", with(func(i *SessionInfo) { i.Host, i.PID = "other", reaped }), false},
		{"another boot", with(func(i *SessionInfo) { i.BootID, i.PID = "b0a7b0a7-0000-0000-0000-000000000000", reaped }), false},
		{"another pid namespace", with(func(i *SessionInfo) { i.PIDNamespace, i.PID = "pid:[1]", reaped }), false},
		{"record without identity", SessionInfo{Host: "h", PID: reaped}, false},
		{"no pid", with(func(i *SessionInfo) { i.PID = 0 }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := id.gone("h", tc.info); got != tc.gone {
				t.Errorf("gone(%+v) = %v, want %v", tc.info, got, tc.gone)
			}
		})
	}
	reap()
	if !id.gone("h", with(func(i *SessionInfo) { i.PID, i.ProcStart = zombie, 0 })) {
		t.Error("a reaped child counts as alive")
	}
}

// TestDescribe checks which fields a client fills in its own record: all
// of them for itself, none that the caller set for another process.
func TestDescribe(t *testing.T) {
	id := self(t)
	for _, tc := range []struct {
		name     string
		in, want SessionInfo
	}{
		{"own process", SessionInfo{Host: "h"},
			SessionInfo{Host: "h", PID: id.pid, BootID: id.bootID, PIDNamespace: id.pidNS, ProcStart: id.start}},
		{"own pid given", SessionInfo{PID: id.pid},
			SessionInfo{PID: id.pid, BootID: id.bootID, PIDNamespace: id.pidNS, ProcStart: id.start}},
		{"start given", SessionInfo{ProcStart: 7},
			SessionInfo{PID: id.pid, BootID: id.bootID, PIDNamespace: id.pidNS, ProcStart: 7}},
		{"another pid", SessionInfo{PID: id.pid + 1},
			SessionInfo{PID: id.pid + 1, BootID: id.bootID, PIDNamespace: id.pidNS}},
		{"another boot", SessionInfo{PID: 5, BootID: "b"}, SessionInfo{PID: 5, BootID: "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in
			id.describe(&got)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestProcStat reads the stat line of a process whose command name holds
// a space and a parenthesis, which a split on spaces would misread.
func TestProcStat(t *testing.T) {
	self(t)
	dir := t.TempDir()
	prog := dir + "/a b) c"
	if err := os.Symlink("/bin/sleep", prog); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, "10")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sleep: %v", err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	start, state, err := procStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if state != 'R' && state != 'S' {
		t.Errorf("state %c, want R or S", state)
	}
	if id := self(t); start < id.start {
		t.Errorf("child started at %d, before this process (%d)", start, id.start)
	}
}
