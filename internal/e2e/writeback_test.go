package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startMount runs a foreground mount process of v at v.mnt with env added
// to its environment, waits until it is mounted, and returns the process.
func startMount(t *testing.T, v *volume, env []string, args ...string) *mountProcess {
	t.Helper()
	cmd := exec.Command(sluiceBin, append([]string{"mount", v.metaURL, v.mnt}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if mounted(v.mnt) {
			sluice(t, "umount", "--force", v.mnt)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for !mounted(v.mnt) {
		select {
		case <-done:
			t.Fatalf("mount exited:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("mount not ready; output:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &mountProcess{Cmd: cmd, done: done}
}

// mountProcess is a mount started by startMount. Its exit is awaited by
// startMount's goroutine alone (exec.Cmd.Wait must be called once): wait
// for done, not with Wait.
type mountProcess struct {
	*exec.Cmd
	done <-chan struct{}
}

// countStaged counts the blocks staged for upload in a cache directory.
func countStaged(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && strings.Contains(path, "/rawstaging/") {
			n++
		}
		return nil
	})
	return n
}

// TestWritebackSurvivesKill writes fsync'd files through a --writeback
// mount whose uploads are slowed down, kills the mount with SIGKILL while
// blocks are still staged, and checks that the next mount of the cache
// directory uploads them: every fsync'd file reads back byte-identical,
// fsck is clean, and gc removes what the killed writes leaked.
func TestWritebackSurvivesKill(t *testing.T) {
	v := newVolume(t)
	cache := filepath.Join(v.dir, "cache")
	m := startMount(t, v, []string{"SLUICE_FAULTS=put:delay=400ms"},
		"--writeback", "--cache-dir", cache, "--max-uploads", "2")

	want := map[string][]byte{}
	for i := range 4 {
		name := fmt.Sprintf("synced%d", i)
		want[name] = randomData(6<<20+i*1000, uint64(100+i))
		write(t, v.path(name), want[name]) // write closes and fsyncs
	}
	// A writer that never syncs is cut off by the kill.
	stop := make(chan struct{})
	go func() {
		f, err := os.Create(v.path("unsynced"))
		if err != nil {
			return
		}
		defer f.Close()
		p := randomData(1<<20, 9)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := f.Write(p); err != nil {
				return
			}
		}
	}()
	time.Sleep(500 * time.Millisecond)
	staged := countStaged(t, cache)
	if err := m.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-m.done
	close(stop)
	sluice(t, "umount", "--force", v.mnt)
	if staged == 0 {
		t.Fatal("no block was staged before the kill; the test proves nothing")
	}

	// The next mount of the cache directory uploads what was staged.
	v.mount(t, "--cache-dir", cache)
	for name, data := range want {
		if got, err := os.ReadFile(v.path(name)); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s after the kill: %d bytes (%v), want %d identical bytes", name, len(got), err, len(data))
		}
	}
	mustSluice(t, "umount", "--flush", v.mnt)
	v.wantFsckClean(t)
	mustSluice(t, "gc", v.metaURL, "--min-age", "0", "--delete")
	if out := mustSluice(t, "gc", v.metaURL, "--min-age", "0"); leakedCount(t, out) != "0" {
		t.Fatalf("leaks left after gc --delete:\n%s", out)
	}
	// Read from the bucket alone: a fresh cache directory.
	v.mount(t, "--cache-dir", filepath.Join(v.dir, "cache2"))
	for name, data := range want {
		if got, err := os.ReadFile(v.path(name)); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s from the bucket: %d bytes (%v), want %d identical bytes", name, len(got), err, len(data))
		}
	}
}
