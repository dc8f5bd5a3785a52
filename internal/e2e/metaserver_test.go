package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestMetaServerKilledUnderAMount writes files, and makes, renames and
// removes directories, through a mount on the in-memory metadata server
// while the server is killed (SIGKILL) and started again on its
// directory: the applications never see an error (a mkdir or a rename
// whose reply a kill lost is answered as done, not failed with EEXIST or
// ENOENT), every file closed is whole afterwards and every directory
// where it was moved, fsck finds nothing wrong, status shows the
// server's figures, and a SIGTERM leaves a final checkpoint.
func TestMetaServerKilledUnderAMount(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		os.Chmod(d, 0o755)
	}
	addr := freeAddr(t)
	msDir := filepath.Join(dir, "metaserver")
	ms := runMetaServer(t, msDir, addr)
	t.Cleanup(func() { ms.stop(t, syscall.SIGKILL) })
	v := &volume{dir: dir, metaURL: "sluice://" + addr + "/vol", bucket: filepath.Join(dir, "bucket"),
		mnt: filepath.Join(dir, "mnt"), log: filepath.Join(dir, "mount.log")}
	os.Mkdir(v.mnt, 0o755)
	mustSluice(t, "format", v.metaURL, "vol", "--bucket", v.bucket, "--trash-days", "0")
	metrics := freeAddr(t)
	v.mount(t, "--metrics", metrics)

	content := func(i int) []byte { return []byte(fmt.Sprintf("file %d %s\n", i, time.Now().Format(time.RFC3339Nano))) }
	written := map[int][]byte{}
	done, dirsDone := make(chan error, 1), make(chan error, 1)
	stop := make(chan struct{})
	dirs := map[string]bool{} // the directories there should be
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				dirsDone <- nil
				return
			default:
			}
			d, r := filepath.Join(v.mnt, fmt.Sprintf("d%05d", i)), filepath.Join(v.mnt, fmt.Sprintf("r%05d", i))
			if err := os.Mkdir(d, 0o755); err != nil {
				dirsDone <- err
				return
			}
			if err := os.Rename(d, r); err != nil {
				dirsDone <- err
				return
			}
			if i%2 == 1 {
				dirs[filepath.Base(r)] = true
				continue
			}
			if err := os.Remove(r); err != nil {
				dirsDone <- err
				return
			}
		}
	}()
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			c := content(i)
			if err := os.WriteFile(filepath.Join(v.mnt, fmt.Sprintf("f%05d", i)), c, 0o644); err != nil {
				done <- fmt.Errorf("write f%05d: %w", i, err)
				return
			}
			written[i] = c
		}
	}()
	for round := 0; round < 3; round++ {
		time.Sleep(700 * time.Millisecond)
		ms.stop(t, syscall.SIGKILL)
		time.Sleep(200 * time.Millisecond)
		ms = runMetaServer(t, msDir, addr)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-dirsDone; err != nil {
		t.Fatal(err)
	}
	if len(written) < 20 {
		t.Fatalf("only %d files written", len(written))
	}
	for i, want := range written {
		got, err := os.ReadFile(filepath.Join(v.mnt, fmt.Sprintf("f%05d", i)))
		if err != nil || string(got) != string(want) {
			t.Fatalf("f%05d after the kills: %q, %v; want %q", i, got, err, want)
		}
	}
	ents, err := os.ReadDir(v.mnt)
	if err != nil {
		t.Fatal(err)
	}
	files, kept := 0, len(dirs)
	for _, e := range ents {
		switch e.Name()[0] {
		case 'f':
			files++
		case 'r':
			if !dirs[e.Name()] {
				t.Errorf("directory %s is there; it was removed", e.Name())
			}
			delete(dirs, e.Name())
		case 'd':
			t.Errorf("directory %s is there; it was renamed", e.Name())
		}
	}
	if files != len(written) {
		t.Fatalf("%d files in the root, %d written", files, len(written))
	}
	if len(dirs) > 0 {
		t.Fatalf("%d directories made are missing", len(dirs))
	}
	// The mount sent its operations whole: each create was one call.
	m := scrapeFamilies(t, metrics)
	for _, name := range serverOnlyFamilies {
		if _, ok := m[name]; !ok {
			t.Errorf("/metrics of the mount has no %s", name)
		}
	}
	if n, _ := m.value("sluice_meta_calls_duration_seconds", "method", "create"); n < float64(len(written)) {
		t.Errorf("the mount made %v create calls for %d files", n, len(written))
	}
	var st struct {
		Server struct {
			Keys, Inodes int
			Index        uint64
		}
	}
	if err := json.Unmarshal([]byte(mustSluice(t, "status", v.metaURL)), &st); err != nil {
		t.Fatal(err)
	}
	// The files, the root and the mount's own few (trash).
	if st.Server.Keys < len(written) || st.Server.Index == 0 || st.Server.Inodes < len(written)+1 || st.Server.Inodes > len(written)+kept+3 {
		t.Fatalf("status shows the server with %d keys and %d inodes at index %d, after %d files", st.Server.Keys, st.Server.Inodes, st.Server.Index, len(written))
	}
	if r := sluice(t, "umount", v.mnt); r.code != 0 {
		t.Fatalf("umount: %s", r.stderr)
	}
	mustSluice(t, "fsck", v.metaURL)
	ms.stop(t, syscall.SIGTERM)
	cps, _ := filepath.Glob(filepath.Join(msDir, "checkpoint-*.ckpt"))
	if len(cps) != 1 {
		t.Fatalf("checkpoints after SIGTERM: %v", cps)
	}
	t.Logf("%d files written and %d directories kept through 3 kills of the server", len(written), kept)
}
