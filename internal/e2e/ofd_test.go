package e2e

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Open file description (OFD) locks, F_OFD_SETLK and friends of fcntl(2),
// as xfstests generic/478 (t_ofd_locks) uses them: they belong to the
// open file description, not to the process, so closing a dup of the
// descriptor or a fork child's copy keeps them, and only the last close
// of the description drops them; they conflict with POSIX record locks
// both ways; F_OFD_GETLK reports their holder's pid as -1. The kernel
// sends no unlock at that last close, only the RELEASE of the handle, so
// a file system that misses this keeps the lock for ever, and the next
// F_OFD_SETLKW on the file waits for ever: every lock call here is bound
// by lockCallTimeout, so that such a regression fails instead of hanging.

// ofdHelperEnv tells TestMain to run a clone scenario (runOFDHelper)
// instead of the tests.
const ofdHelperEnv = "SLUICE_E2E_OFD"

// lockCallTimeout bounds one lock call or close. A call still waiting
// then fails its test; the unmount at the end of the test aborts the
// request it waits for.
const lockCallTimeout = 20 * time.Second

// lockStart and lockLen make the byte range the tests lock, [0, 10), as
// generic/478 does.
const lockStart, lockLen = 0, 10

func TestOFDLocks(t *testing.T) {
	// sluice: the metadata server path, whose client sends the release
	// of a handle's locks over the wire.
	for _, engine := range []string{"sqlite3", "sluice"} {
		t.Run(engine, func(t *testing.T) {
			v := newVolumeOn(t, engine)
			v.mount(t)
			cases := []struct {
				name string
				fn   func(t *testing.T, path string)
			}{
				{"dup close keeps, last close drops", testOFDLastClose},
				{"conflicts with POSIX locks both ways", testOFDPosixConflict},
				{"SETLKW woken by the holder's last close", testOFDWait},
				// t_ofd_locks -F: the child shares the file table, so its
				// close is the description's last.
				{"CLONE_FILES child closes", ofdChildCase("files", "close", unix.F_UNLCK)},
				// t_ofd_locks without -F: the child's copy goes, the
				// description stays with the parent.
				{"fork child closes its copy", ofdChildCase("fork", "close", unix.F_WRLCK)},
				{"CLONE_FILES child locks", ofdChildCase("files", "setlk", unix.F_WRLCK)},
				{"fork child locks", ofdChildCase("fork", "setlk", unix.F_WRLCK)},
			}
			for i, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					path := v.path(fmt.Sprintf("ofd%d", i))
					write(t, path, make([]byte, 4096))
					c.fn(t, path)
				})
			}
		})
	}
}

// testOFDLastClose: an OFD lock outlives the close of a dup of its
// descriptor and of other descriptors of the file in the same process
// (each sends a FLUSH with the process's lock owner), and goes with the
// last close of its description.
func testOFDLastClose(t *testing.T, path string) {
	fd1, fd2 := openFD(t, path), openFD(t, path)
	wantLock(t, "OFD write lock", setLock(t, fd1, unix.F_OFD_SETLK, unix.F_WRLCK), 0)
	wantHolder(t, "another description", fd2, unix.F_OFD_GETLK, unix.F_WRLCK)
	wantLock(t, "OFD write lock through another description", setLock(t, fd2, unix.F_OFD_SETLK, unix.F_WRLCK), syscall.EAGAIN)
	dup, err := unix.Dup(fd1)
	if err != nil {
		t.Fatalf("dup: %v", err)
	}
	closeFD(t, dup)
	wantHolder(t, "after the close of a dup", fd2, unix.F_OFD_GETLK, unix.F_WRLCK)
	closeFD(t, openFD(t, path))
	wantHolder(t, "after the close of another descriptor of the file", fd2, unix.F_OFD_GETLK, unix.F_WRLCK)
	closeFD(t, fd1)
	wantHolder(t, "after the last close of the description", fd2, unix.F_OFD_GETLK, unix.F_UNLCK)
	wantLock(t, "OFD write lock after the holder's last close", setLock(t, fd2, unix.F_OFD_SETLK, unix.F_WRLCK), 0)
	closeFD(t, fd2)
}

// testOFDPosixConflict: an OFD lock and a POSIX lock of the same process
// conflict (their owners differ), whichever came first.
func testOFDPosixConflict(t *testing.T, path string) {
	fd1, fd2 := openFD(t, path), openFD(t, path)
	wantLock(t, "OFD write lock", setLock(t, fd1, unix.F_OFD_SETLK, unix.F_WRLCK), 0)
	wantHolder(t, "POSIX test under an OFD lock", fd2, unix.F_GETLK, unix.F_WRLCK)
	wantLock(t, "POSIX lock under an OFD lock", setLock(t, fd2, unix.F_SETLK, unix.F_WRLCK), syscall.EAGAIN)
	wantLock(t, "OFD unlock", setLock(t, fd1, unix.F_OFD_SETLK, unix.F_UNLCK), 0)
	wantLock(t, "POSIX lock once the OFD lock is gone", setLock(t, fd2, unix.F_SETLK, unix.F_WRLCK), 0)
	wantHolder(t, "OFD test under a POSIX lock", fd1, unix.F_OFD_GETLK, unix.F_WRLCK)
	wantLock(t, "OFD lock under a POSIX lock", setLock(t, fd1, unix.F_OFD_SETLK, unix.F_WRLCK), syscall.EAGAIN)
	closeFD(t, fd2) // drops this process's POSIX locks on the file
	wantLock(t, "OFD lock once the POSIX lock is gone", setLock(t, fd1, unix.F_OFD_SETLK, unix.F_WRLCK), 0)
	closeFD(t, fd1)
}

// testOFDWait: F_OFD_SETLKW waits while another description holds the
// range, and takes the lock once that description's last close drops it.
func testOFDWait(t *testing.T, path string) {
	fd1, fd2 := openFD(t, path), openFD(t, path)
	wantLock(t, "OFD write lock", setLock(t, fd1, unix.F_OFD_SETLK, unix.F_WRLCK), 0)
	done := make(chan error, 1)
	go func() {
		lk := flockOf(unix.F_WRLCK)
		done <- unix.FcntlFlock(uintptr(fd2), unix.F_OFD_SETLKW, &lk)
	}()
	select {
	case err := <-done:
		t.Fatalf("F_OFD_SETLKW under another description's lock returned at once: %v", err)
	default:
	}
	closeFD(t, fd1)
	select {
	case err := <-done:
		wantLock(t, "F_OFD_SETLKW after the holder's last close", err, 0)
	case <-time.After(lockCallTimeout):
		t.Fatalf("F_OFD_SETLKW still waits %v after the holder's last close", lockCallTimeout)
	}
	closeFD(t, fd2)
}

// ofdChildCase returns a case that runs a clone scenario of runOFDHelper
// in a helper process, then checks, from this process (another
// description, another lock owner), that the OFD lock is as whileHeld
// says while the helper holds its descriptor, and gone after the
// helper's last close.
func ofdChildCase(mode, action string, whileHeld int16) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe, mode, action, path)
		cmd.Env = append(os.Environ(), ofdHelperEnv+"=1")
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-exited
		})
		ready := make(chan string, 1)
		go func() {
			line, _ := bufio.NewReader(stdout).ReadString('\n')
			ready <- strings.TrimSpace(line)
			io.Copy(io.Discard, stdout)
			exited <- cmd.Wait()
		}()
		select {
		case line := <-ready:
			if line != "ready 0" {
				t.Fatalf("helper %s %s: %q, want \"ready 0\"", mode, action, line)
			}
		case <-time.After(lockCallTimeout):
			t.Fatalf("helper %s %s: not ready after %v", mode, action, lockCallTimeout)
		}
		fd := openFD(t, path)
		defer closeFD(t, fd)
		wantHolder(t, "while the helper holds its descriptor", fd, unix.F_OFD_GETLK, whileHeld)
		wantHolder(t, "POSIX test while the helper holds its descriptor", fd, unix.F_GETLK, whileHeld)
		stdin.Close() // the helper closes its descriptor and ends
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("helper %s %s: %v", mode, action, err)
			}
			exited <- nil // for the clean-up
		case <-time.After(lockCallTimeout):
			t.Fatalf("helper %s %s: still running %v after its stdin closed", mode, action, lockCallTimeout)
		}
		wantHolder(t, "after the helper's last close", fd, unix.F_OFD_GETLK, unix.F_UNLCK)
		wantLock(t, "OFD write lock after the helper's last close", setLock(t, fd, unix.F_OFD_SETLK, unix.F_WRLCK), 0)
	}
}

// runOFDHelper runs a clone scenario, as t_ofd_locks sets one up, and
// prints "ready STATUS" (STATUS is the clone child's exit status, 0 when
// all went as expected); it then holds its descriptor until its stdin
// ends, closes it and exits. args are MODE ACTION PATH:
//
//   - MODE "files" clones the child with CLONE_FILES (it shares the file
//     table), "fork" without (it gets a copy).
//   - ACTION "close": the helper takes an OFD write lock on [0, 10); the
//     child tests it with F_OFD_GETLK through the same description (it
//     must find no conflict) and closes its descriptor.
//     ACTION "setlk": the child takes the OFD write lock and exits
//     without closing anything.
func runOFDHelper(args []string) int {
	if len(args) != 3 {
		fmt.Fprintf(os.Stderr, "usage: MODE ACTION PATH, got %q\n", args)
		return 2
	}
	mode, action, path := args[0], args[1], args[2]
	fd, err := unix.Open(path, unix.O_RDWR, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "open %s: %v\n", path, err)
		return 1
	}
	if action == "close" {
		lk := flockOf(unix.F_WRLCK)
		if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk); err != nil {
			fmt.Fprintf(os.Stderr, "F_OFD_SETLK: %v\n", err)
			return 1
		}
	}
	status, err := cloneChild(mode == "files", fd, action == "close")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("ready %d\n", status)
	io.Copy(io.Discard, os.Stdin)
	unix.Close(fd) // EBADF when a CLONE_FILES child closed it already
	return 0
}

// cloneChild makes a child process with clone(2), sharing this process's
// file table when shareFiles is set, that makes one OFD lock call on fd
// and exits with its result: with probe, it tests a write lock
// (F_OFD_GETLK), which must find no conflict, and closes fd; without, it
// takes the write lock (F_OFD_SETLK). It returns the child's exit
// status: 0, the errno of the call, or 254 when the test found a
// conflict.
func cloneChild(shareFiles bool, fd int, probe bool) (int, error) {
	flags := uintptr(syscall.SIGCHLD)
	if shareFiles {
		flags |= syscall.CLONE_FILES
	}
	cmd := uintptr(unix.F_OFD_SETLK)
	if probe {
		cmd = unix.F_OFD_GETLK
	}
	lk := flockOf(unix.F_WRLCK)
	runtime.LockOSThread()
	pid, errno := rawCloneLock(flags, uintptr(fd), cmd, &lk, probe)
	runtime.UnlockOSThread()
	if errno != 0 {
		return 0, fmt.Errorf("clone: %w", errno)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(int(pid), &ws, 0, nil); err != nil {
		return 0, fmt.Errorf("wait for the clone child: %w", err)
	}
	if !ws.Exited() {
		return 0, fmt.Errorf("clone child ended with %v", ws)
	}
	return ws.ExitStatus(), nil
}

// rawCloneLock is the clone itself. The child is a copy of one thread of
// a Go program, so it must not enter the runtime (no allocation, no
// stack growth, no scheduler): it makes raw system calls only, as
// syscall's forkAndExecInChild does.
//
//go:norace
//go:nosplit
func rawCloneLock(flags, fd, cmd uintptr, lk *unix.Flock_t, probe bool) (uintptr, syscall.Errno) {
	pid, _, errno := syscall.RawSyscall6(syscall.SYS_CLONE, flags, 0, 0, 0, 0, 0)
	if errno != 0 || pid != 0 {
		return pid, errno
	}
	status := uintptr(0)
	if _, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, fd, cmd, uintptr(unsafe.Pointer(lk))); e != 0 {
		status = uintptr(e)
	} else if probe && lk.Type != unix.F_UNLCK {
		status = 254
	}
	if probe {
		syscall.RawSyscall(syscall.SYS_CLOSE, fd, 0, 0)
	}
	for {
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, status, 0, 0)
	}
}

// flockOf is a lock of typ over [0, 10), with l_pid 0, as OFD requests
// need.
func flockOf(typ int16) unix.Flock_t {
	return unix.Flock_t{Type: typ, Whence: io.SeekStart, Start: lockStart, Len: lockLen}
}

// lockCall makes one fcntl(2) lock call (cmd) of typ over [0, 10) on fd
// and returns the lock as the call left it (what F_GETLK and F_OFD_GETLK
// report). It fails t when the call has not returned within
// lockCallTimeout.
func lockCall(t *testing.T, fd int, cmd int, typ int16) (unix.Flock_t, error) {
	t.Helper()
	type result struct {
		lk  unix.Flock_t
		err error
	}
	done := make(chan result, 1)
	go func() {
		lk := flockOf(typ)
		err := unix.FcntlFlock(uintptr(fd), cmd, &lk)
		done <- result{lk, err}
	}()
	select {
	case r := <-done:
		return r.lk, r.err
	case <-time.After(lockCallTimeout):
		t.Fatalf("fcntl(%d, %s, type %d): no answer after %v", fd, lockCmdName(cmd), typ, lockCallTimeout)
		panic("unreachable")
	}
}

// setLock makes a lock call that sets a lock and returns its error.
func setLock(t *testing.T, fd int, cmd int, typ int16) error {
	t.Helper()
	_, err := lockCall(t, fd, cmd, typ)
	return err
}

// wantLock checks the error of a lock call: nil for want 0, else want.
func wantLock(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if want == 0 && err != nil {
		t.Errorf("%s: %v, want success", what, err)
	} else if want != 0 {
		wantErrno(t, what, err, want)
	}
}

// wantHolder tests a write lock over [0, 10) through fd with cmd
// (F_GETLK or F_OFD_GETLK) and checks the type of the conflicting lock
// it reports, F_UNLCK for none. F_OFD_GETLK must report the pid of a
// holder as -1. (F_GETLK reports the pid that took an OFD lock through
// FUSE, where Linux's own file systems report -1: the FUSE reply has no
// way to say that a lock is an OFD one. Not checked.)
func wantHolder(t *testing.T, what string, fd int, cmd int, want int16) {
	t.Helper()
	lk, err := lockCall(t, fd, cmd, unix.F_WRLCK)
	if err != nil {
		t.Errorf("%s: %s: %v", what, lockCmdName(cmd), err)
		return
	}
	if lk.Type != want {
		t.Errorf("%s: %s reports lock type %d, want %d", what, lockCmdName(cmd), lk.Type, want)
		return
	}
	if want != unix.F_UNLCK && cmd == unix.F_OFD_GETLK && lk.Pid != -1 {
		t.Errorf("%s: F_OFD_GETLK reports l_pid %d, want -1", what, lk.Pid)
	}
}

func lockCmdName(cmd int) string {
	switch cmd {
	case unix.F_GETLK:
		return "F_GETLK"
	case unix.F_SETLK:
		return "F_SETLK"
	case unix.F_OFD_GETLK:
		return "F_OFD_GETLK"
	case unix.F_OFD_SETLK:
		return "F_OFD_SETLK"
	case unix.F_OFD_SETLKW:
		return "F_OFD_SETLKW"
	}
	return fmt.Sprintf("cmd %d", cmd)
}

func openFD(t *testing.T, path string) int {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDWR, 0)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return fd
}

// closeFD closes fd, failing t when close(2) (its FLUSH) has not
// returned within lockCallTimeout.
func closeFD(t *testing.T, fd int) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- unix.Close(fd) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("close %d: %v", fd, err)
		}
	case <-time.After(lockCallTimeout):
		t.Fatalf("close %d: no answer after %v", fd, lockCallTimeout)
	}
}
