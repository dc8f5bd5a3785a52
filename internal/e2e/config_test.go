package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// volumeSetting reads the settings `sluice config` prints.
func volumeSetting(t *testing.T, metaURL string) map[string]any {
	t.Helper()
	var f map[string]any
	out := mustSluice(t, "config", metaURL)
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		t.Fatalf("config output is not JSON: %v\n%s", err, out)
	}
	return f
}

// TestConfig shows a volume's settings, changes its capacity and inode
// limit under a live mount, which applies them within a couple of
// heartbeats (df shows them, and writes past them fail), and refuses
// risky changes in a script without --yes and changes of what the data
// depends on.
func TestConfig(t *testing.T) {
	v := newVolume(t, "--trash-days", "1", "--block-size", "1M")
	f := volumeSetting(t, v.metaURL)
	if f["Name"] != "vol" || f["TrashDays"] != 1.0 || f["BlockSize"] != 1024.0 || f["UUID"] == "" {
		t.Fatalf("config shows %v", f)
	}
	if help := mustSluice(t, "config", "--help"); !strings.Contains(help, "mount them again") && !strings.Contains(help, "mounted again") {
		t.Errorf("config --help does not say that a new bucket needs a remount:\n%s", help)
	}

	v.mount(t, "--heartbeat", "1s")
	if st := statfs(t, v.mnt); uint64(st.Blocks)*uint64(st.Bsize) < 1<<40 {
		t.Fatalf("df of an unlimited volume: %d blocks of %d", st.Blocks, st.Bsize)
	}
	out := mustSluice(t, "config", v.metaURL, "--capacity", "1", "--inodes", "50")
	for _, want := range []string{"Capacity: unlimited → 1G", "Inodes: unlimited → 50"} {
		if !strings.Contains(out, want) {
			t.Errorf("config output lacks %q:\n%s", want, out)
		}
	}
	// A heartbeat every second, checked by a background loop that ticks
	// every second: the mount applies the change within about 2 s.
	eventuallyWithin(t, 30*time.Second, "df shows the new capacity", func() error {
		st := statfs(t, v.mnt)
		if total := uint64(st.Blocks) * uint64(st.Bsize); total != 1<<30 || st.Files != 50 {
			return fmt.Errorf("df shows %d bytes and %d inodes, want %d and 50", total, st.Files, 1<<30)
		}
		return nil
	})

	// A capacity under what a write needs is enforced at once too.
	mustSluice(t, "config", v.metaURL, "--capacity", "1M")
	eventuallyWithin(t, 30*time.Second, "df shows 1M", func() error {
		if st := statfs(t, v.mnt); uint64(st.Blocks)*uint64(st.Bsize) != 1<<20 {
			return fmt.Errorf("df shows %d bytes", uint64(st.Blocks)*uint64(st.Bsize))
		}
		return nil
	})
	if err := os.WriteFile(v.path("big"), make([]byte, 3<<20), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("writing 3 MiB on a 1 MiB volume: %v, want ENOSPC", err)
	}

	refused := []struct {
		name string
		args []string
		want string
	}{
		{"trash off in a script", []string{"--trash-days", "0"}, "pass --yes"},
		{"name", []string{"--name", "other"}, "refusing to change"},
		{"block size", []string{"--block-size", "4M"}, "refusing to change"},
		{"block size with --yes", []string{"--block-size", "4M", "--yes"}, "refusing to change"},
		{"compression", []string{"--compress", "lz4"}, "refusing to change"},
	}
	before := volumeSetting(t, v.metaURL)
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			r := sluice(t, append([]string{"config", v.metaURL}, tc.args...)...)
			if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("config %v: exit %d, stderr %q; want it refused with %q", tc.args, r.code, r.stderr, tc.want)
			}
		})
	}
	if after := volumeSetting(t, v.metaURL); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("refused changes changed the settings:\n%v\n%v", before, after)
	}

	// With --yes the trash goes, and the mount deletes at once. The
	// limits go too: until the mount reloads the settings, each try
	// below leaves a file behind (refused by the 1M capacity, or sent
	// to the trash), and with the 50-inode limit kept, a mount slow to
	// reload (a loaded machine) reached it and refused every later try
	// with ENOSPC.
	mustSluice(t, "config", v.metaURL, "--trash-days", "0", "--yes", "--capacity", "0", "--inodes", "0")
	if f := volumeSetting(t, v.metaURL); f["TrashDays"] != 0.0 {
		t.Fatalf("trash days after --yes: %v", f["TrashDays"])
	}
	eventuallyWithin(t, 30*time.Second, "the mount stops trashing deleted files", func() error {
		name := fmt.Sprintf("f%d", time.Now().UnixNano())
		// Until the mount reloads the settings, the 1M capacity or the
		// inode limit may still refuse the write: try again.
		if err := os.WriteFile(v.path(name), []byte("x"), 0o644); err != nil {
			return err
		}
		if err := os.Remove(v.path(name)); err != nil {
			return err
		}
		for _, hour := range dirNames(t, v.path(".trash")) {
			for _, trashed := range dirNames(t, v.path(".trash/"+hour)) {
				if strings.HasSuffix(trashed, "-"+name) {
					return fmt.Errorf("%s went to the trash", name)
				}
			}
		}
		return nil
	})
}
