package e2e

import (
	"bytes"
	"os"
	"os/exec"
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
			cmd := exec.Command(sluiceBin, "mount", v.metaURL, v.mnt, "--cache-dir", filepath.Join(v.dir, "cache"))
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			deadline := time.Now().Add(20 * time.Second)
			for !mounted(v.mnt) {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("mount not ready; output:\n%s", out.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
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
