package fuse

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// capFsetid is CAP_FSETID's bit in a capability set (capabilities(7)):
// a process with it keeps a file's setuid and setgid bits when it changes
// the file.
const capFsetid = 4

// keepsSetID reports whether process pid, running as uid, has CAP_FSETID.
// The kernel says so for a write (WRITE_KILL_SUIDGID) but not for an
// fallocate, whose request names only the process: this reads its
// effective capabilities from /proc (the kernel gives the pid as seen in
// this process's namespace). When they cannot be read (the process is
// gone, or the pid is 0 because it lives in a namespace this one cannot
// see), root is taken to have it and anyone else not to.
func keepsSetID(pid, uid uint32) bool {
	if pid != 0 {
		if caps, ok := effectiveCaps(pid); ok {
			return caps&(1<<capFsetid) != 0
		}
	}
	return uid == 0
}

// effectiveCaps returns the effective capability set of process pid.
func effectiveCaps(pid uint32) (uint64, bool) {
	f, err := os.Open("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return caps, err == nil
		}
	}
	return 0, false
}
