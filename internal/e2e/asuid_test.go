package e2e

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// The permission tests run single system calls as other users, each in a
// fresh process of this test binary started with those credentials (as
// the C pjdfstest does with its -u and -g), and compare the errno.

// syscallHelperEnv tells TestMain to run one system call instead of the
// tests; see runSyscallHelper.
const syscallHelperEnv = "SLUICE_E2E_SYSCALL"

var helperOnce struct {
	sync.Once
	path string
	err  error
}

// helperBinary returns a copy of this test binary that other users may
// run (the go tool builds it in a directory only root may enter).
func helperBinary(t *testing.T) string {
	t.Helper()
	helperOnce.Do(func() {
		helperOnce.path, helperOnce.err = copyExecutable(filepath.Join(filepath.Dir(sluiceBin), "e2e.test"))
	})
	if helperOnce.err != nil {
		t.Fatalf("copy the test binary for other users: %v", helperOnce.err)
	}
	return helperOnce.path
}

func copyExecutable(dst string) (string, error) {
	src, err := os.Executable()
	if err != nil {
		return "", err
	}
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	return dst, os.Chmod(filepath.Dir(dst), 0o755)
}

// asUID runs one system call (see runSyscallHelper for the list) as uid
// and gid with no supplementary groups, and returns its errno (0 when it
// succeeded).
func asUID(t *testing.T, uid, gid uint32, args ...string) syscall.Errno {
	t.Helper()
	cmd := exec.Command(helperBinary(t), args...)
	cmd.Env = append(os.Environ(), syscallHelperEnv+"=1")
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as %d:%d %s: %v\n%s", uid, gid, strings.Join(args, " "), err, out)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("as %d:%d %s: unexpected output %q", uid, gid, strings.Join(args, " "), out)
	}
	return syscall.Errno(n)
}

// runSyscallHelper makes the system call args name and prints its errno
// (0 for success). It is what asUID runs:
//
//	stat PATH | chmod PATH MODE | chown PATH UID GID | truncate PATH SIZE |
//	ftruncate PATH SIZE | open PATH FLAGS | write PATH DATA | link OLD NEW |
//	create PATH MODE
//
// FLAGS are O_ names joined by commas; MODE is octal.
func runSyscallHelper(args []string) int {
	err := syscallOf(args)
	var errno syscall.Errno
	if err != nil && !errors.As(err, &errno) {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println(int(errno))
	return 0
}

var openFlags = map[string]int{
	"O_RDONLY": syscall.O_RDONLY, "O_WRONLY": syscall.O_WRONLY, "O_RDWR": syscall.O_RDWR,
	"O_NONBLOCK": syscall.O_NONBLOCK, "O_TRUNC": syscall.O_TRUNC, "O_CREAT": syscall.O_CREAT,
}

func syscallOf(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("usage: OP PATH [ARG...], got %q", args)
	}
	op, path, rest := args[0], args[1], args[2:]
	num := func(i int, base int) (uint64, error) {
		if i >= len(rest) {
			return 0, fmt.Errorf("%s: missing argument %d", op, i+1)
		}
		return strconv.ParseUint(rest[i], base, 64)
	}
	switch op {
	case "stat":
		var st syscall.Stat_t
		return syscall.Stat(path, &st)
	case "chmod":
		mode, err := num(0, 8)
		if err != nil {
			return err
		}
		return syscall.Chmod(path, uint32(mode))
	case "chown":
		uid, err := num(0, 10)
		if err != nil {
			return err
		}
		gid, err := num(1, 10)
		if err != nil {
			return err
		}
		return syscall.Chown(path, int(uid), int(gid))
	case "truncate":
		size, err := num(0, 10)
		if err != nil {
			return err
		}
		return syscall.Truncate(path, int64(size))
	case "ftruncate":
		size, err := num(0, 10)
		if err != nil {
			return err
		}
		fd, err := syscall.Open(path, syscall.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer syscall.Close(fd)
		return syscall.Ftruncate(fd, int64(size))
	case "open":
		flags := 0
		if len(rest) > 0 {
			for _, name := range strings.Split(rest[0], ",") {
				f, ok := openFlags[name]
				if !ok {
					return fmt.Errorf("open: unknown flag %s", name)
				}
				flags |= f
			}
		}
		fd, err := syscall.Open(path, flags, 0o644)
		if err != nil {
			return err
		}
		return syscall.Close(fd)
	case "create":
		mode, err := num(0, 8)
		if err != nil {
			return err
		}
		fd, err := syscall.Open(path, syscall.O_CREAT|syscall.O_EXCL|syscall.O_WRONLY, uint32(mode))
		if err != nil {
			return err
		}
		return syscall.Close(fd)
	case "write":
		if len(rest) < 1 {
			return fmt.Errorf("write: missing data")
		}
		fd, err := syscall.Open(path, syscall.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if _, err := syscall.Write(fd, []byte(rest[0])); err != nil {
			syscall.Close(fd)
			return err
		}
		return syscall.Close(fd)
	case "link":
		if len(rest) < 1 {
			return fmt.Errorf("link: missing new name")
		}
		return syscall.Link(path, rest[0])
	case "removexattr":
		if len(rest) < 1 {
			return fmt.Errorf("removexattr: missing name")
		}
		return syscall.Removexattr(path, rest[0])
	}
	return fmt.Errorf("unknown operation %s", op)
}
