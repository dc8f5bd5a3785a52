package meta

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
)

// The process behind a session, on its host.
//
// A session record names the process that registered it: the kernel's
// boot id (/proc/sys/kernel/random/boot_id, new at every boot, shared by
// the containers of one kernel), the pid namespace it runs in (a pid
// means nothing outside its namespace), its pid, and its start time in
// clock ticks after boot (a pid is reused; the pair is not). A new client
// on the same host, boot and pid namespace can then see at once that the
// process of an older session is gone, killed with SIGKILL or crashed,
// and clean up after it (Client.cleanDeadLocalSessions) instead of
// waiting the session timeout for its heartbeats to stop: its POSIX locks
// would block every program on the volume that needs them till then
// (SQLite in WAL mode reads a lock left on its -shm file as another live
// connection, and trusts a shared-memory index nobody maintains).
//
// Only an absence is evidence: a record without these fields (written
// before they existed, or on a system without /proc), of another host,
// boot or namespace, or naming a process that runs, is never taken for
// dead here; it expires by heartbeat as before.

// procIdentity names one process of one running kernel.
type procIdentity struct {
	bootID string // the kernel's boot id
	pidNS  string // the pid namespace, as /proc/PID/ns/pid reads ("pid:[4026531836]")
	pid    int
	start  uint64 // start time of the process, clock ticks after boot
}

// thisProcess is the identity of the calling process; ok is false where
// /proc does not tell it: not Linux, or a /proc of another pid namespace
// than the process's own, whose pids would name other processes.
var thisProcess = sync.OnceValues(func() (procIdentity, bool) {
	id, err := readThisProcess()
	return id, err == nil
})

func readThisProcess() (procIdentity, error) {
	pid := os.Getpid()
	if self, err := os.Readlink("/proc/self"); err != nil || self != strconv.Itoa(pid) {
		return procIdentity{}, fmt.Errorf("/proc does not show this process as pid %d (%q, %v)", pid, self, err) //lint:nowrap err may be nil here
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return procIdentity{}, fmt.Errorf("boot id: %w", err)
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return procIdentity{}, fmt.Errorf("pid namespace: %w", err)
	}
	start, _, err := procStat(pid)
	if err != nil {
		return procIdentity{}, err
	}
	id := procIdentity{bootID: strings.TrimSpace(string(boot)), pidNS: ns, pid: pid, start: start}
	if id.bootID == "" || id.start == 0 {
		return procIdentity{}, errors.New("no boot id or start time")
	}
	return id, nil
}

// procStat reads the start time (clock ticks after boot) and the state
// (R, S, D, Z, ...) of process pid from /proc/PID/stat. A process that
// does not exist gives an error wrapping fs.ErrNotExist.
func procStat(pid int) (start uint64, state byte, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses,
	// the last ')' ends it. STATE is field 3, the start time field 22.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name", pid, len(f))
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: start time: %w", pid, err)
	}
	return start, f[0][0], nil
}

// describe fills the host identity of info and, when info names this
// process (or no process yet), the process's own, for the record of a
// session this process registers. Fields already set are kept.
func (id procIdentity) describe(info *SessionInfo) {
	if info.PID == 0 {
		info.PID = id.pid
	}
	if info.BootID != "" || info.PIDNamespace != "" {
		return // the caller speaks for another process
	}
	info.BootID, info.PIDNamespace = id.bootID, id.pidNS
	if info.PID == id.pid && info.ProcStart == 0 {
		info.ProcStart = id.start
	}
}

// gone reports whether the process that registered a session described
// by info certainly no longer runs, as this process sees it: the record
// names this host (host, this client's host name), this boot and this
// pid namespace, and its pid is free, or taken by a process that started
// at another time (the pid was reused, possibly by this very process),
// or held by a zombie that has exited already. Anything it cannot tell
// counts as alive.
func (id procIdentity) gone(host string, info SessionInfo) bool {
	if info.BootID == "" || info.PIDNamespace == "" || info.PID <= 0 {
		return false // a record from before these fields, or from elsewhere
	}
	if info.BootID != id.bootID || info.PIDNamespace != id.pidNS || info.Host != host {
		return false
	}
	start, state, err := procStat(info.PID)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	if info.ProcStart != 0 && start != info.ProcStart {
		return true
	}
	// A zombie has exited and holds nothing; only its exit status waits
	// for its parent. (Only the whole thread group, not just its leader,
	// when no other task of it is left.)
	if state == 'Z' || state == 'X' {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", info.PID))
		return err == nil && len(tasks) <= 1
	}
	return false
}
