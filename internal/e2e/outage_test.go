package e2e

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// outageBound is the --meta-timeout of TestOutageEveryOperation (3 s, or
// SLUICE_OUTAGE_TIMEOUT seconds to measure another, such as the default
// 30), and outageSlack how much later than it an operation may fail: the
// kernel's and the mount's own work around the engine's wait.
var outageBound = func() time.Duration {
	if s, err := strconv.Atoi(os.Getenv("SLUICE_OUTAGE_TIMEOUT")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 3 * time.Second
}()

const outageSlack = 4 * time.Second

// TestOutageEveryOperation walks every FUSE operation that needs the
// metadata engine while the engine is down, on every engine with a
// server, both ways a server goes down: stopped (connections reset and
// refused) and stalled (connections open, nothing answered, as behind a
// partition). Each operation must fail with EIO, the errno of a local
// file system whose disk fails, never a network errno, and within
// --meta-timeout plus a few seconds, however the engine's driver waits.
// Operations that read may succeed, answered from what the mount holds
// (data it has cached; records an engine with a client-side cache, such
// as Redis, knows current within its lease), as a local file system
// answers from its caches when its disk fails. A change of owner, mode or
// times of a file held open is held back to commit with its writes
// (vfs.SetAttr), so the walk changes a file that is not open. Once
// the engine is back, the mount works again.
//
// The operations run at once, each from its own goroutine, so that the
// walk takes one bound, not one per operation; the log lists how long
// each took, the figure docs/engines.md gives per engine.
func TestOutageEveryOperation(t *testing.T) {
	for _, engine := range []string{"redis", "postgres", "mysql", "etcd", "sluice"} {
		for _, mode := range []string{"stopped", "stalled"} {
			t.Run(engine+"/"+mode, func(t *testing.T) {
				walkOutage(t, engine, mode)
			})
		}
	}
}

// earliest is how soon an operation may fail during an outage of engine
// in mode: half the bound (sooner, a short outage would not be ridden
// out), but on a stalled Redis its client library's read timeout, 3 s:
// go-redis ends a command then whatever its deadline, and a command
// without its own read timeout would not see a cancellation either (the
// mount could not be stopped while it waits); a commit that timed out is
// not run again, as it may have been applied. docs/engines.md says so.
func earliest(engine, mode string) time.Duration {
	if engine == "redis" && mode == "stalled" {
		return min(outageBound/2, 2*time.Second)
	}
	return outageBound / 2
}

// outageOp is an operation of the walk: run makes it on the mount while
// the engine is down; mayPass marks one the mount may answer itself, as
// it would with the engine up: with success, or with the errno upErr.
type outageOp struct {
	name    string
	mayPass bool
	run     func() error
	upErr   syscall.Errno
}

// op returns an operation of the walk.
func op(name string, mayPass bool, run func() error) outageOp {
	return outageOp{name: name, mayPass: mayPass, run: run}
}

// answers is op with mayPass set, and upErr.
func answers(name string, upErr syscall.Errno, run func() error) outageOp {
	return outageOp{name: name, mayPass: true, run: run, upErr: upErr}
}

func walkOutage(t *testing.T, engine, mode string) {
	t.Helper()
	v, proxy := proxiedVolume(t, engine)
	v.mount(t, "--attr-cache", "0", "--entry-cache", "0", "--dir-entry-cache", "0", "--negative-entry-cache", "0",
		"--open-cache", "0", "--meta-timeout", fmt.Sprint(outageBound.Seconds()))

	// What the operations work on, made while the engine answers.
	write(t, v.path("f"), []byte("kept"))
	for _, n := range []string{"g", "unlink", "rename", "src"} {
		write(t, v.path(n), []byte(n))
	}
	for _, d := range []string{"d", "rmdir"} {
		if err := os.Mkdir(v.path(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("f", v.path("l")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(v.path("f"), "user.k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	open := func(name string, flag int) *os.File {
		t.Helper()
		f, err := os.OpenFile(v.path(name), flag, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	rd, wr, cl, src, lk := open("f", os.O_RDONLY), open("w", os.O_RDWR|os.O_CREATE), open("c", os.O_RDWR|os.O_CREATE),
		open("src", os.O_RDONLY), open("lock", os.O_RDWR|os.O_CREATE)
	if _, err := cl.Write([]byte("committed")); err != nil {
		t.Fatal(err)
	}
	if err := cl.Sync(); err != nil {
		t.Fatal(err)
	}

	ops := []outageOp{
		op("getattr", true, func() error { _, err := os.Stat(v.path("f")); return err }),
		answers("lookup of a missing name", syscall.ENOENT, func() error { _, err := os.Lstat(v.path("missing")); return err }),
		op("readdir", true, func() error { _, err := os.ReadDir(v.path("d")); return err }),
		op("create", false, func() error { return os.WriteFile(v.path("new"), nil, 0o644) }),
		op("mkdir", false, func() error { return os.Mkdir(v.path("newdir"), 0o755) }),
		op("mknod", false, func() error { return syscall.Mkfifo(v.path("fifo"), 0o644) }),
		op("symlink", false, func() error { return os.Symlink("f", v.path("newlink")) }),
		op("link", false, func() error { return os.Link(v.path("f"), v.path("hard")) }),
		op("unlink", false, func() error { return os.Remove(v.path("unlink")) }),
		op("rmdir", false, func() error { return syscall.Rmdir(v.path("rmdir")) }),
		op("rename", false, func() error { return os.Rename(v.path("rename"), v.path("renamed")) }),
		op("chmod", false, func() error { return os.Chmod(v.path("g"), 0o600) }),
		op("chown", false, func() error { return os.Chown(v.path("g"), 1000, 1000) }),
		op("truncate", false, func() error { return os.Truncate(v.path("g"), 1) }),
		op("utimens", false, func() error { return os.Chtimes(v.path("g"), time.Unix(1, 0), time.Unix(1, 0)) }),
		op("access", true, func() error { return syscall.Access(v.path("f"), unix.W_OK) }),
		op("open", true, func() error {
			f, err := os.Open(v.path("f"))
			if err == nil {
				f.Close()
			}
			return err
		}),
		op("read of an open file", true, func() error { _, err := rd.ReadAt(make([]byte, 4), 0); return err }),
		op("write and fsync", false, func() error {
			if _, err := wr.Write([]byte("lost")); err != nil {
				return err
			}
			return wr.Sync()
		}),
		op("write and close", false, func() error {
			f, err := os.OpenFile(v.path("c"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			if _, err := f.Write([]byte("lost")); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		}),
		op("ftruncate", false, func() error { return cl.Truncate(2) }),
		op("fallocate", false, func() error { return unix.Fallocate(int(cl.Fd()), 0, 0, 1<<20) }),
		op("copy_file_range", false, func() error {
			var in, out int64
			_, err := unix.CopyFileRange(int(src.Fd()), &in, int(cl.Fd()), &out, 3, 0)
			if err == nil {
				err = cl.Sync() // a copy is held back until then
			}
			return err
		}),
		op("readlink", true, func() error { _, err := os.Readlink(v.path("l")); return err }),
		op("getxattr", true, func() error { _, err := unix.Getxattr(v.path("f"), "user.k", make([]byte, 16)); return err }),
		op("listxattr", true, func() error { _, err := unix.Listxattr(v.path("f"), make([]byte, 64)); return err }),
		op("setxattr", false, func() error { return unix.Setxattr(v.path("g"), "user.n", []byte("v"), 0) }),
		op("removexattr", false, func() error { return unix.Removexattr(v.path("f"), "user.k") }),
		op("statfs", true, func() error { var s unix.Statfs_t; return unix.Statfs(v.mnt, &s) }),
		op("flock", false, func() error { return unix.Flock(int(lk.Fd()), unix.LOCK_EX|unix.LOCK_NB) }),
		op("fcntl lock", false, func() error {
			return unix.FcntlFlock(lk.Fd(), unix.F_SETLK, &unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 1})
		}),
	}

	switch mode {
	case "stopped":
		proxy.Down(t, true)
	case "stalled":
		proxy.Stall(true)
	}
	type result struct {
		err  error
		took time.Duration
	}
	results := make([]result, len(ops))
	var wg sync.WaitGroup
	for i, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			err := op.run()
			results[i] = result{err, time.Since(start)}
		}()
	}
	wg.Wait()
	proxy.Stall(false)
	proxy.Down(t, false)

	var took []time.Duration
	var report strings.Builder
	for i, op := range ops {
		r := results[i]
		fmt.Fprintf(&report, "\n  %-26s %8v  %v", op.name, r.took.Round(10*time.Millisecond), r.err)
		switch {
		case op.mayPass && (r.err == nil || op.upErr != 0 && errors.Is(r.err, op.upErr)):
			continue
		case !errors.Is(r.err, syscall.EIO):
			t.Errorf("%s with the engine %s: %v, want EIO", op.name, mode, r.err)
		case r.took > outageBound+outageSlack:
			t.Errorf("%s with the engine %s failed after %v, want within --meta-timeout %v and a few seconds", op.name, mode, r.took, outageBound)
		case r.took < earliest(engine, mode):
			t.Errorf("%s with the engine %s failed after %v, before --meta-timeout %v: an outage shorter than the bound would fail it", op.name, mode, r.took, outageBound)
		}
		took = append(took, r.took)
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	if len(took) > 0 {
		t.Logf("engine %s, --meta-timeout %v: operations failed after %v (min) to %v (max), median %v; each:%s",
			mode, outageBound, took[0].Round(10*time.Millisecond), took[len(took)-1].Round(10*time.Millisecond),
			took[len(took)/2].Round(10*time.Millisecond), report.String())
	}

	// The engine is back: the mount works again, and what was there
	// before is whole.
	eventuallyWithin(t, 60*time.Second, "the mount works again", func() error {
		return os.WriteFile(v.path("after"), []byte("new"), 0o644)
	})
	if got, err := os.ReadFile(v.path("src")); err != nil || string(got) != "src" {
		t.Errorf("a file written before the outage: %q, %v", got, err)
	}
	names, err := readDirNames(v.mnt)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"f", "d", "l", "src", "after"} {
		if !slices.Contains(names, n) {
			t.Errorf("%s missing after the outage; the root lists %v", n, names)
		}
	}
}
