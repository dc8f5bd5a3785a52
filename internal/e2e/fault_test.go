package e2e

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/testserver"
)

// startRedis starts a private redis-server on a free loopback port, so the
// test may stop and resume it; it is killed when the test ends.
func startRedis(t *testing.T) (*exec.Cmd, string) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testserver.Missing(t, "redis-server is not installed", "apt-get install redis-server")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--dir", dir,
		"--save", "", "--appendonly", "no")
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	eventually(t, "redis-server accepts connections", func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	})
	return cmd, "redis://" + addr + "/0"
}

// redisVolume formats a volume on a private Redis server (startRedis),
// so that the test may stop or kill it, and returns both.
func redisVolume(t *testing.T) (*exec.Cmd, *volume) {
	t.Helper()
	requireFUSE(t)
	server, url := startRedis(t)
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		os.Chmod(d, 0o755)
	}
	v := &volume{dir: dir, metaURL: url, bucket: filepath.Join(dir, "bucket"), mnt: filepath.Join(dir, "mnt"),
		log: filepath.Join(dir, "mount.log")}
	os.Mkdir(v.mnt, 0o755)
	mustSluice(t, "format", v.metaURL, "vol", "--bucket", v.bucket)
	return server, v
}

// TestEngineOutage stops the metadata engine under a mount: operations
// fail with EIO within a bounded time instead of hanging, nothing is half
// applied, and the mount works again once the engine is back.
func TestEngineOutage(t *testing.T) {
	server, v := redisVolume(t)
	v.mount(t, "--attr-cache", "0", "--entry-cache", "0", "--dir-entry-cache", "0")
	write(t, v.path("before"), []byte("kept"))

	if err := server.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := os.WriteFile(v.path("during"), []byte("x"), 0o644)
	took := time.Since(start)
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("create while the engine is stopped: %v, want EIO", err)
	}
	if took > 60*time.Second {
		t.Errorf("create while the engine is stopped took %v; it must fail within a bounded time", took)
	}
	if err := server.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	checkAfterOutage(t, v)
	t.Logf("create during the outage failed after %v", took.Round(time.Millisecond))
}

// TestEngineGone kills the metadata engine under a mount (connections
// are refused, not left hanging): stat, create, and a write made durable
// with fsync each fail with EIO, the errno of a local file system whose
// disk fails, never the network's ECONNREFUSED or ECONNRESET.
func TestEngineGone(t *testing.T) {
	server, v := redisVolume(t)
	v.mount(t, "--attr-cache", "0", "--entry-cache", "0", "--dir-entry-cache", "0", "--meta-timeout", "5")
	write(t, v.path("before"), []byte("kept"))
	f, err := os.OpenFile(v.path("before"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	if err := server.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	server.Wait()
	for _, op := range []struct {
		name string
		run  func() error
	}{
		{"stat", func() error { _, err := os.Stat(v.path("before")); return err }},
		{"create", func() error { return os.WriteFile(v.path("during"), []byte("x"), 0o644) }},
		{"write and fsync", func() error {
			if _, err := f.Write([]byte("more")); err != nil {
				return err
			}
			return f.Sync()
		}},
	} {
		start := time.Now()
		err := op.run()
		if !errors.Is(err, syscall.EIO) {
			t.Errorf("%s with the engine gone: %v, want EIO", op.name, err)
		}
		t.Logf("%s with the engine gone failed after %v", op.name, time.Since(start).Round(time.Millisecond))
	}
}

// checkAfterOutage checks a mount once its engine answers again after an
// outage during which a create of "during" failed: the mount works again,
// "before" (written before the outage) is intact, and "during" is either
// absent or whole (its transaction may have committed after the
// application was told it failed, never in part).
func checkAfterOutage(t *testing.T, v *volume) {
	t.Helper()
	eventuallyWithin(t, 60*time.Second, "the mount works again", func() error {
		return os.WriteFile(v.path("after"), []byte("new"), 0o644)
	})
	if got, err := os.ReadFile(v.path("before")); err != nil || string(got) != "kept" {
		t.Errorf("file written before the outage: %q, %v", got, err)
	}
	names, err := readDirNames(v.mnt)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == "during" {
			if _, err := os.Stat(v.path("during")); err != nil {
				t.Errorf("half-applied create: listed but %v", err)
			}
		}
	}
}
