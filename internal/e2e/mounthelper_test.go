package e2e

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// installHelper links /sbin/mount.sluice to the binary under test, where
// mount(8) looks for the helper of type sluice, for the rest of the test;
// a helper already there is put back afterwards.
func installHelper(t *testing.T) {
	t.Helper()
	const helper = "/sbin/mount.sluice"
	saved := ""
	if _, err := os.Lstat(helper); err == nil {
		saved = helper + ".e2e-saved"
		if err := os.Rename(helper, saved); err != nil {
			t.Fatal(err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.Symlink(sluiceBin, helper); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Remove(helper)
		if saved != "" {
			os.Rename(saved, helper)
		}
	})
}

// TestMountHelper mounts a volume the way a system does: `mount -t
// sluice` and an fstab line, through mount(8), which runs the helper
// /sbin/mount.sluice; and unmounts it with umount(8), which ends the
// mount's process.
func TestMountHelper(t *testing.T) {
	requireFUSE(t)
	installHelper(t)
	v := newVolume(t)
	opts := "_netdev,noatime,cache-dir=" + filepath.Join(v.dir, "cache") + ",log=" + v.log
	t.Cleanup(func() {
		if mounted(v.mnt) {
			sluice(t, "umount", "--force", v.mnt)
		}
	})
	check := func(how string, args ...string) {
		t.Helper()
		if r := run(t, "mount", args...); r.code != 0 {
			t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", how, r.code, r.stdout, r.stderr)
		}
		if !mounted(v.mnt) {
			t.Fatalf("%s: nothing mounted at %s", how, v.mnt)
		}
		name := filepath.Join(v.mnt, strings.ReplaceAll(how, " ", "-"))
		if err := os.WriteFile(name, []byte(how), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(name); err != nil || string(got) != how {
			t.Fatalf("%s: read back %q, %v", how, got, err)
		}
		if r := run(t, "umount", v.mnt); r.code != 0 {
			t.Fatalf("umount after %s: exit %d\nstderr: %s", how, r.code, r.stderr)
		}
		// The mount's process ends with its session.
		deadline := time.Now().Add(20 * time.Second)
		for len(mountProcesses(t, v.mnt)) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the mount's process still runs 20s after umount", how)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	check("mount -t", "-t", "sluice", v.metaURL, v.mnt, "-o", opts)
	fstab := filepath.Join(v.dir, "fstab")
	line := v.metaURL + " " + v.mnt + " sluice " + opts + ",noauto,nofail 0 0\n"
	if err := os.WriteFile(fstab, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	check("fstab", "-T", fstab, v.mnt)

	// A wrong option fails the mount, naming it.
	r := run(t, "mount", "-t", "sluice", v.metaURL, v.mnt, "-o", opts+",cache-sise=1")
	if r.code == 0 || !strings.Contains(r.stderr, `"cache-sise=1" is not a flag of sluice mount`) {
		t.Errorf("mount with a misspelt option: exit %d\nstderr: %s", r.code, r.stderr)
	}
	if mounted(v.mnt) {
		t.Error("mounted with a misspelt option")
	}
}

// mountProcesses returns the pids of processes whose command line mounts
// at mnt.
func mountProcesses(t *testing.T, mnt string) []string {
	t.Helper()
	procs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range procs {
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 2 && args[1] == "mount" && slices.Contains(args, mnt) {
			out = append(out, p.Name())
		}
	}
	return out
}
