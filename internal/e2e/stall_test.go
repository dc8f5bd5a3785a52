package e2e

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/testserver"
)

// TestEngineOutageEveryServer: on every engine with a server, a metadata
// operation made while the engine does not answer fails with EIO within
// the mount's --meta-timeout, applies nothing, and the mount works again
// once the engine answers. (TestEngineOutage stops a Redis server of its
// own; here the engine's traffic is held by a proxy.)
func TestEngineOutageEveryServer(t *testing.T) {
	for _, engine := range []string{"postgres", "mysql", "etcd", "redis"} {
		t.Run(engine, func(t *testing.T) {
			v, proxy := proxiedVolume(t, engine)
			const bound = 3 * time.Second
			v.mount(t, "--attr-cache", "0", "--entry-cache", "0", "--dir-entry-cache", "0", "--meta-timeout", "3")
			write(t, v.path("before"), []byte("kept"))

			proxy.Stall(true)
			start := time.Now()
			err := os.WriteFile(v.path("during"), []byte("x"), 0o644)
			took := time.Since(start)
			proxy.Stall(false)
			if !errors.Is(err, syscall.EIO) {
				t.Errorf("create while the engine does not answer: %v, want EIO", err)
			}
			if took > bound+30*time.Second {
				t.Errorf("create while the engine does not answer failed after %v, want about %v", took, bound)
			}
			checkAfterOutage(t, v)
			t.Logf("create during the outage failed after %v", took.Round(time.Millisecond))
		})
	}
}

// TestEngineOutageBufferedWrites: writes a mount holds when the engine
// stops answering are not kept for later: the commit of their slice fails
// within --meta-timeout and close(2) reports EIO. Once the engine answers,
// the file holds what was committed before and, of the failed writes,
// nothing when their commit was lost with the connection (a server
// restart), or all of them when it was only held up and arrived after its
// deadline; never a part. The mount then takes new writes.
func TestEngineOutageBufferedWrites(t *testing.T) {
	committed, buffered := bytes.Repeat([]byte("c"), 4096), bytes.Repeat([]byte("b"), 4096)
	whole := append(bytes.Clone(committed), buffered...)
	for _, tc := range []struct {
		name string
		cut  bool     // drop the connections, and the commit they hold
		want [][]byte // the file's possible contents after the outage
	}{
		{"connections cut", true, [][]byte{committed}},
		{"commit held up", false, [][]byte{committed, whole}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, proxy := proxiedVolume(t, "redis")
			const bound = 2 * time.Second
			v.mount(t, "--attr-cache", "0", "--entry-cache", "0", "--dir-entry-cache", "0", "--meta-timeout", "2")

			f, err := os.Create(v.path("file"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write(committed); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil { // commits, and reserves slice ids for the next writes
				t.Fatal(err)
			}

			proxy.Stall(true)
			if _, err := f.Write(buffered); err != nil {
				t.Fatalf("a buffered write while the engine does not answer: %v", err)
			}
			start := time.Now()
			err = f.Close()
			took := time.Since(start)
			if tc.cut {
				proxy.Cut()
			}
			proxy.Stall(false)
			if !errors.Is(err, syscall.EIO) {
				t.Errorf("close with writes buffered while the engine does not answer: %v, want EIO", err)
			}
			if took > bound+30*time.Second {
				t.Errorf("close while the engine does not answer failed after %v, want about %v", took, bound)
			}
			eventuallyWithin(t, 60*time.Second, "the mount works again", func() error {
				return os.WriteFile(v.path("after"), []byte("new"), 0o644)
			})
			got, err := os.ReadFile(v.path("file"))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(tc.want, func(w []byte) bool { return bytes.Equal(got, w) }) {
				t.Errorf("after the outage the file holds %d bytes %.8q..., want one of %d possible contents", len(got), got, len(tc.want))
			}
			write(t, v.path("file"), []byte("new"))
			if got, err := os.ReadFile(v.path("file")); err != nil || string(got) != "new" {
				t.Errorf("a write after the outage: %q, %v", got, err)
			}
			t.Logf("close during the outage failed after %v; the file then held %d bytes", took.Round(time.Millisecond), len(got))
		})
	}
}

// proxiedVolume formats a volume on the test server of engine whose
// traffic goes through a stall proxy, so that a test can make the engine
// stop answering without disturbing the server other tests share.
func proxiedVolume(t *testing.T, engine string) (*volume, *testserver.StallProxy) {
	t.Helper()
	requireFUSE(t)
	dir := t.TempDir()
	for _, d := range []string{dir, dir + "/.."} {
		os.Chmod(d, 0o755)
	}
	url, proxy := testserver.Proxied(t, metaURL(t, engine, dir))
	v := &volume{dir: dir, metaURL: url, bucket: dir + "/bucket", mnt: dir + "/mnt", log: dir + "/mount.log"}
	os.Mkdir(v.mnt, 0o755)
	mustSluice(t, "format", v.metaURL, "vol", "--bucket", v.bucket)
	return v, proxy
}

// TestSignalEndsCloseOnStalledEngine unmounts a mount whose engine has
// stopped answering: the process then waits to end its session, up to
// --meta-timeout (an hour here), and a SIGTERM must end that wait and the
// process, rather than leave it behind for the hour.
func TestSignalEndsCloseOnStalledEngine(t *testing.T) {
	v, proxy := proxiedVolume(t, "redis")
	cmd, out, done := v.mountForeground(t, "--meta-timeout", "3600")
	write(t, v.path("f"), []byte("kept"))
	proxy.Stall(true)
	defer proxy.Stall(false)
	sluice(t, "umount", "--force", v.mnt)
	select {
	case err := <-done:
		t.Fatalf("the mount ended before the signal, with the engine stalled: %v; output:\n%s", err, out.String())
	case <-time.After(time.Second):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		// SIGQUIT makes the Go runtime print every goroutine's stack, which
		// shows where the shutdown hangs.
		cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		t.Fatalf("the mount still runs 30 s after SIGTERM; output and stacks:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "giving up closing the volume") {
		t.Errorf("the mount does not say it gave up closing the volume; output:\n%s", out.String())
	}
}
