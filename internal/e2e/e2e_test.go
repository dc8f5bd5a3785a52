// Package e2e holds end-to-end tests: they build the sluice binary, format
// volumes on SQLite and a local directory, mount them with FUSE in
// temporary directories and check what applications see, across
// unmounts and new mount processes. They need root and /dev/fuse; without
// them they skip loudly, and under CI=true they fail instead.
package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/mountinfo"
	"github.com/sluicefs/sluice/internal/testserver"
)

// sluiceBin is the binary built once by TestMain.
var sluiceBin string

func TestMain(m *testing.M) {
	if os.Getenv(syscallHelperEnv) != "" {
		os.Exit(runSyscallHelper(os.Args[1:]))
	}
	if os.Getenv(ofdHelperEnv) != "" {
		os.Exit(runOFDHelper(os.Args[1:]))
	}
	dir, err := os.MkdirTemp("", "sluice-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sluiceBin = filepath.Join(dir, "sluice")
	// The faultinject tag lets mounts inject the object storage faults
	// that SLUICE_FAULTS asks for (objfault_test.go); release builds
	// never do.
	build := exec.Command("go", "build", "-tags", "faultinject", "-o", sluiceBin, "github.com/sluicefs/sluice/cmd/sluice")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build sluice:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// requireFUSE skips (or fails under CI=true) when mounts are impossible.
func requireFUSE(t *testing.T) {
	t.Helper()
	reason := ""
	if os.Geteuid() != 0 {
		reason = "not running as root"
	} else if _, err := os.Stat("/dev/fuse"); err != nil {
		reason = "no /dev/fuse"
	}
	if reason == "" {
		return
	}
	testserver.Missing(t, "FUSE mounts are impossible: "+reason, "run as root on a machine with /dev/fuse")
}

// result is the outcome of one sluice command.
type result struct {
	stdout, stderr string
	code           int
}

func sluice(t *testing.T, args ...string) result {
	t.Helper()
	return run(t, sluiceBin, args...)
}

// commandTimeout bounds one command that run runs. None takes a minute on
// a healthy machine; one that hangs fails its own test, naming itself and
// what it printed, instead of holding the package until go test's
// -timeout ends it with a goroutine dump.
const commandTimeout = 5 * time.Minute

// run runs the program bin with args and returns its output and exit
// code; it fails t when bin does not run at all or runs longer than
// commandTimeout.
func run(t *testing.T, bin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	expired, err := runWithin(cmd, commandTimeout)
	r := result{stdout: out.String(), stderr: errb.String()}
	if expired {
		t.Fatalf("run %s %v: still running after %v, killed\nstdout: %s\nstderr: %s",
			filepath.Base(bin), args, commandTimeout, r.stdout, r.stderr)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %s %v: %v", filepath.Base(bin), args, err)
	}
	return r
}

func mustSluice(t *testing.T, args ...string) string {
	t.Helper()
	r := sluice(t, args...)
	if r.code != 0 {
		t.Fatalf("sluice %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// volume is a formatted volume in a temporary directory.
type volume struct {
	dir, metaURL, bucket, mnt, log string
}

func newVolume(t *testing.T, formatArgs ...string) *volume {
	t.Helper()
	return newVolumeOn(t, "sqlite3", formatArgs...)
}

// metaEngines are the engines the e2e tests that run per engine use.
var metaEngines = []string{"sqlite3", "redis", "postgres", "mysql", "etcd", "sluice"}

// metaURL returns a metadata URL of a fresh, empty namespace on engine.
func metaURL(t *testing.T, engine, dir string) string {
	t.Helper()
	switch engine {
	case "sqlite3":
		return "sqlite3://" + filepath.Join(dir, "meta.db")
	case "sluice":
		return "sluice://" + startMetaServer(t, filepath.Join(dir, "metaserver")) + "/vol"
	case "sluice3": // a replicated group of three (the name is short: pjdfstest binds sockets under the mount, and a socket's path has at most 108 bytes)
		return startMetaGroup(t, filepath.Join(dir, "metagroup"))
	case "sluice3f": // the same, the mount reading from followers (one mount only: another mount's changes may be seen up to a second late)
		return startMetaGroup(t, filepath.Join(dir, "metagroup")) + "?read=follower"
	}
	return testserver.MetaURL(t, engine, fmt.Sprintf("e2e%d", time.Now().UnixNano()))
}

// startMetaServer runs `sluice meta-server` on dir until the test ends
// (then stops it with SIGTERM, which must end it cleanly) and returns
// its address.
func startMetaServer(t *testing.T, dir string) string {
	t.Helper()
	addr := freeAddr(t)
	ms := runMetaServer(t, dir, addr)
	t.Cleanup(func() { ms.stop(t, syscall.SIGTERM) })
	return addr
}

// metaServer is a `sluice meta-server` process.
type metaServer struct {
	cmd      *exec.Cmd
	dir, log string
	stopped  bool
}

// runMetaServer starts a meta-server on dir and addr, with more flags,
// and waits until it serves.
func runMetaServer(t *testing.T, dir, addr string, flags ...string) *metaServer {
	t.Helper()
	ms := &metaServer{dir: dir, log: dir + ".log"}
	ms.cmd = exec.Command(sluiceBin, append([]string{"meta-server", "--dir", dir, "--listen", addr, "--log", ms.log}, flags...)...)
	if err := ms.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		nc, err := net.Dial("tcp", addr)
		if err == nil {
			nc.Close()
			return ms
		}
		if i > 1000 {
			ms.cmd.Process.Kill()
			log, _ := os.ReadFile(ms.log)
			t.Fatalf("meta-server did not start: %v; log:\n%s", err, log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop signals the server and waits for it; after SIGTERM it must have
// ended cleanly.
func (ms *metaServer) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if ms.stopped {
		return
	}
	ms.stopped = true
	ms.cmd.Process.Signal(sig)
	err := ms.cmd.Wait()
	if sig == syscall.SIGTERM && err != nil {
		log, _ := os.ReadFile(ms.log)
		t.Errorf("meta-server stopped with %v; log:\n%s", err, log)
	}
}

// newVolumeOn formats a volume whose metadata lives on engine.
func newVolumeOn(t *testing.T, engine string, formatArgs ...string) *volume {
	t.Helper()
	requireFUSE(t)
	dir := t.TempDir()
	// Other users (pjdfstest's, permission tests) must reach the mount.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	v := &volume{dir: dir, metaURL: metaURL(t, engine, dir), bucket: filepath.Join(dir, "bucket"),
		mnt: filepath.Join(dir, "mnt"), log: filepath.Join(dir, "mount.log")}
	if err := os.Mkdir(v.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(formatArgs, "--trash-days") {
		// These tests check deletions and whole listings of the root;
		// trash_test.go covers the trash.
		formatArgs = append(formatArgs, "--trash-days", "0")
	}
	mustSluice(t, append([]string{"format", v.metaURL, "vol", "--bucket", v.bucket}, formatArgs...)...)
	return v
}

// mount mounts the volume in a background process and unmounts it when
// the test ends.
func (v *volume) mount(t *testing.T, args ...string) {
	t.Helper()
	v.mountAt(t, v.mnt, args...)
}

// mountForeground mounts the volume in a foreground process of its own,
// for tests that kill or signal it, and waits until it is mounted. out
// collects the process's output and done reports its end; the end of the
// test kills it and unmounts what it left.
func (v *volume) mountForeground(t *testing.T, args ...string) (cmd *exec.Cmd, out *bytes.Buffer, done <-chan error) {
	t.Helper()
	cmd = exec.Command(sluiceBin, append([]string{"mount", v.metaURL, v.mnt}, args...)...)
	out = new(bytes.Buffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if mounted(v.mnt) {
			sluice(t, "umount", "--force", v.mnt)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for !mounted(v.mnt) {
		if time.Now().After(deadline) {
			t.Fatalf("mount not ready; output:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cmd, out, ended
}

// mountAt mounts the volume at another mount point, in another process.
func (v *volume) mountAt(t *testing.T, mnt string, args ...string) {
	t.Helper()
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(args, "--cache-dir") {
		// Each mount gets its own cache, kept with the test's files.
		args = append(args, "--cache-dir", filepath.Join(v.dir, "cache-"+filepath.Base(mnt)))
	}
	out := mustSluice(t, append([]string{"mount", "-d", v.metaURL, mnt, "--log", v.log}, args...)...)
	pid := printedPID(out)
	t.Cleanup(func() {
		if mounted(mnt) {
			if r := sluice(t, "umount", mnt); r.code != 0 {
				sluice(t, "umount", "--force", mnt)
			}
		}
		endMountProcess(t, pid)
	})
}

// printedPID reads the process id that `sluice mount -d` printed, or 0.
func printedPID(out string) int {
	pid := 0
	if _, rest, ok := strings.Cut(out, "(pid "); ok {
		fmt.Sscanf(rest, "%d", &pid)
	}
	return pid
}

// endMountProcess waits for the background mount process pid to end
// after its unmount. One that still runs after 10 s (ending its session
// with an engine that no longer answers, as a test that stopped it
// leaves it, for up to --meta-timeout) is sent SIGTERM, which gives the
// session up, then killed: so no test leaves a mount process behind.
func endMountProcess(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		return
	}
	alive := func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		return err == nil && strings.Contains(string(b), "sluice")
	}
	waitGone := func(d time.Duration) bool {
		for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if !alive() {
				return true
			}
		}
		return !alive()
	}
	if waitGone(10 * time.Second) {
		return
	}
	t.Logf("mount process %d still runs 10 s after its unmount: sending SIGTERM", pid)
	syscall.Kill(pid, syscall.SIGTERM)
	if !waitGone(20 * time.Second) {
		t.Logf("mount process %d still runs 20 s after SIGTERM: killing it", pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// umount unmounts and waits until the mount process has finished its
// session, so that a following mount is a fresh process.
func (v *volume) umount(t *testing.T) {
	t.Helper()
	mustSluice(t, "umount", v.mnt)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if !strings.Contains(mustSluice(t, "status", v.metaURL), `"Sid"`) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("mount process did not end its session after umount; log:\n%s", readFile(t, v.log))
}

func (v *volume) path(name string) string { return filepath.Join(v.mnt, name) }

func mounted(path string) bool {
	_, ok := mountinfo.At(path)
	return ok
}

// runWithin runs cmd, killing it once it has run for limit, and reports
// whether it was killed so. A child of cmd that keeps its output open
// holds Wait at most 10 s after cmd ends.
func runWithin(cmd *exec.Cmd, limit time.Duration) (expired bool, err error) {
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		return false, err
	}
	var killed atomic.Bool
	timer := time.AfterFunc(limit, func() {
		killed.Store(true)
		cmd.Process.Kill()
	})
	err = cmd.Wait()
	timer.Stop()
	return killed.Load(), err
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	return string(b)
}
