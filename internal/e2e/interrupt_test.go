package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A process killed while it waits in a FUSE request cannot die until the
// mount answers the request: the kernel sends INTERRUPT and then waits,
// uninterruptibly. These tests kill processes blocked in the mount and
// check that the mount ends the operation at the interrupt — not when
// the lock it waits for is released or the engine it waits on answers.

// startBlocked starts cmd and returns once it waits in a FUSE request.
func startBlocked(t *testing.T, cmd *exec.Cmd) <-chan error {
	t.Helper()
	var out strings.Builder
	if cmd.Stdout == nil {
		cmd.Stdout, cmd.Stderr = &out, &out
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	proc := fmt.Sprintf("/proc/%d/", cmd.Process.Pid)
	// inRequest reports where the process sleeps: its kernel stack, or
	// where that is not available, its wait channel.
	inRequest := func() (bool, string) {
		if b, err := os.ReadFile(proc + "stack"); err == nil && len(b) > 0 {
			return strings.Contains(string(b), "request_wait_answer"), string(b)
		}
		b, _ := os.ReadFile(proc + "wchan")
		w := string(b)
		return w == "request_wait_answer" || w == "fuse_simple_request", w
	}
	// A request the mount has not read yet also waits there, and a kill
	// would just withdraw it: ask for the wait twice, a poll apart, so
	// that the mount has most likely read the request.
	waits := 0
	eventuallyWithin(t, 20*time.Second, "the process waits in the mount", func() error {
		select {
		case err := <-done:
			t.Fatalf("%s ended before it blocked: %v\n%s", cmd.Path, err, out.String())
		default:
		}
		if ok, where := inRequest(); !ok {
			waits = 0
			return fmt.Errorf("not in a FUSE request:\n%s", where)
		}
		if waits++; waits < 2 {
			return fmt.Errorf("in a FUSE request once")
		}
		return nil
	})
	return done
}

// killAndWait kills the process of done with SIGKILL and waits for it to
// end. Nothing but the mount's answer can end it; when the mount does not
// answer, the test fails shortly before its own deadline, after unblock
// (which lets the process end, so that the mount can be unmounted).
func killAndWait(t *testing.T, what string, cmd *exec.Cmd, done <-chan error, unblock func()) {
	t.Helper()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	var limit <-chan time.Time
	if d, ok := t.Deadline(); ok {
		limit = time.After(time.Until(d) * 9 / 10)
	}
	select {
	case err := <-done:
		t.Logf("%s ended: %v", what, err)
	case <-limit:
		unblock()
		<-done
		t.Fatalf("%s, killed while it waited in the mount, ended only once the wait was over: the mount ignored the interrupt", what)
	}
}

// lockScript takes an exclusive lock of the file argv[2] with fcntl
// (F_SETLK or F_SETLKW) or flock, as argv[1] says, and prints "locked".
const lockScript = `
import fcntl, sys
how, path = sys.argv[1], sys.argv[2]
f = open(path, "r+")
if how == "fcntl-wait":
    fcntl.lockf(f, fcntl.LOCK_EX)
elif how == "fcntl-try":
    fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
elif how == "flock-wait":
    fcntl.flock(f, fcntl.LOCK_EX)
else:
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("locked")
`

// TestKilledLockWaiter: a process waiting for a lock (F_SETLKW, flock)
// that another holds is killed; it must end while the lock is still held,
// and once the holder releases it a third process takes it at once: no
// waiter is left behind in the mount to take it first.
func TestKilledLockWaiter(t *testing.T) {
	requireTools(t, "python3")
	v := newVolume(t)
	v.mount(t)
	for _, kind := range []string{"fcntl", "flock"} {
		t.Run(kind, func(t *testing.T) {
			path := v.path(kind)
			write(t, path, nil)
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			lock := func(typ int16) error {
				if kind == "flock" {
					how := unix.LOCK_EX
					if typ == unix.F_UNLCK {
						how = unix.LOCK_UN
					}
					return unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
				}
				return unix.FcntlFlock(f.Fd(), unix.F_SETLK, &unix.Flock_t{Type: typ})
			}
			if err := lock(unix.F_WRLCK); err != nil {
				t.Fatalf("holder locks: %v", err)
			}
			waiter := exec.Command("python3", "-c", lockScript, kind+"-wait", path)
			done := startBlocked(t, waiter)
			killAndWait(t, "the "+kind+" waiter", waiter, done, func() { lock(unix.F_UNLCK) })
			if err := lock(unix.F_UNLCK); err != nil {
				t.Fatalf("holder unlocks: %v", err)
			}
			out, err := exec.Command("python3", "-c", lockScript, kind+"-try", path).CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "locked" {
				t.Fatalf("a third process cannot take the lock the killed waiter waited for: %v\n%s", err, out)
			}
		})
	}
}

// TestKilledWhileEngineStalls: a process whose mkdir(2) waits on a
// metadata engine that does not answer is killed; the mount must end the
// request at once, not at --meta-timeout (an hour here), and work again
// once the engine answers. The engine's traffic is held by a proxy.
// (Whether the mkdir is applied is open: its request may already be on
// its way to the engine.)
func TestKilledWhileEngineStalls(t *testing.T) {
	for _, engine := range []string{"etcd", "postgres", "mysql", "redis"} {
		t.Run(engine, func(t *testing.T) { testKilledWhileEngineStalls(t, engine) })
	}
}

func testKilledWhileEngineStalls(t *testing.T, engine string) {
	v, proxy := proxiedVolume(t, engine)
	v.mount(t, "--attr-cache", "0", "--entry-cache", "0", "--dir-entry-cache", "0", "--meta-timeout", "3600")
	write(t, v.path("before"), []byte("kept"))

	proxy.Stall(true)
	mkdir := exec.Command("mkdir", v.path("during"))
	done := startBlocked(t, mkdir)
	killAndWait(t, "mkdir", mkdir, done, func() { proxy.Stall(false) })
	proxy.Stall(false)

	eventuallyWithin(t, 60*time.Second, "the mount works again", func() error {
		_, err := os.Stat(v.path("before"))
		return err
	})
	if got, err := os.ReadFile(v.path("before")); err != nil || string(got) != "kept" {
		t.Errorf("after the stall: %q, %v", got, err)
	}
	if log := readFile(t, v.log); strings.Contains(log, "operation failed") {
		t.Errorf("the interrupted operation was logged as a failure:\n%s", log)
	}
}

// mkdirScript calls mkdir(2) through libc, which, unlike Python's own
// os.mkdir, does not retry EINTR, with a handler for SIGUSR1 installed,
// and prints the result and errno.
const mkdirScript = `
import ctypes, signal, sys
signal.signal(signal.SIGUSR1, lambda *a: None)
libc = ctypes.CDLL(None, use_errno=True)
r = libc.mkdir(sys.argv[1].encode(), 0o755)
print(r, ctypes.get_errno())
`

// TestSignalledWhileEngineStalls: a process whose mkdir(2) waits on a
// stalled engine gets signals it handles (as make gets SIGCHLD). The
// kernel interrupts the request for each, but the program did not ask to
// stop: the mkdir must succeed once the engine answers, not fail with an
// EINTR the kernel would not restart.
func TestSignalledWhileEngineStalls(t *testing.T) {
	requireTools(t, "python3")
	v, proxy := proxiedVolume(t, "postgres")
	v.mount(t, "--attr-cache", "0", "--entry-cache", "0", "--dir-entry-cache", "0")

	proxy.Stall(true)
	var out strings.Builder
	mkdir := exec.Command("python3", "-c", mkdirScript, v.path("during"))
	mkdir.Stdout, mkdir.Stderr = &out, &out
	done := startBlocked(t, mkdir)
	for range 5 {
		if mkdir.Process.Signal(unix.SIGUSR1) != nil {
			break // it ended: what it printed says how
		}
		time.Sleep(50 * time.Millisecond)
	}
	proxy.Stall(false)
	if err := <-done; err != nil {
		t.Fatalf("mkdir: %v\n%s", err, out.String())
	}
	got := strings.TrimSpace(out.String())
	if got != "0 0" {
		t.Fatalf("mkdir(2) with handled signals during the stall returned %q (result, errno), want \"0 0\"", got)
	}
	if fi, err := os.Stat(v.path("during")); err != nil || !fi.IsDir() {
		t.Fatalf("the directory is not there: %v", err)
	}
}
