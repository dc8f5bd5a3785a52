package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestForegroundMountStopsOnSignal mounts in the foreground and checks
// that SIGINT and SIGTERM unmount cleanly, commit what was written and end
// the session.
func TestForegroundMountStopsOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			v := newVolume(t)
			cmd, out, done := v.mountForeground(t, "--cache-dir", filepath.Join(v.dir, "cache"))
			write(t, v.path("f"), []byte("kept"))
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("mount exited with %v; output:\n%s", err, out.String())
				}
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("mount did not exit after %v; output:\n%s", sig, out.String())
			}
			if mounted(v.mnt) {
				t.Fatal("still mounted after the process exited")
			}
			if strings.Contains(mustSluice(t, "status", v.metaURL), `"Sid"`) {
				t.Error("session still registered after a clean exit")
			}
			v.mount(t)
			if got, err := os.ReadFile(v.path("f")); err != nil || string(got) != "kept" {
				t.Fatalf("after remount: %q, %v", got, err)
			}
		})
	}
}
