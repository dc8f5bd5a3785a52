package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSubdirMount mounts one directory of a volume with --subdir, beside
// a mount of the whole volume, and checks that the directory is the
// mount's root (inode 1, its files, the internal files at its top, the
// tools on its paths), that nothing above it can be named, and that
// changes on either mount are the other's.
func TestSubdirMount(t *testing.T) {
	v := newVolume(t)
	v.mount(t)
	if err := os.MkdirAll(filepath.Join(v.mnt, "projects", "alpha", "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"secret": "above", "projects/alpha/src/main.c": "int main;"} {
		if err := os.WriteFile(filepath.Join(v.mnt, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sub := filepath.Join(v.dir, "sub")
	v.mountAt(t, sub, "--subdir", "/projects/alpha")

	var st syscall.Stat_t
	if err := syscall.Stat(sub, &st); err != nil || st.Ino != 1 {
		t.Fatalf("the mount's root: inode %d, %v", st.Ino, err)
	}
	if got, err := os.ReadFile(filepath.Join(sub, "src", "main.c")); err != nil || string(got) != "int main;" {
		t.Fatalf("a file under the subdir: %q, %v", got, err)
	}
	entries, err := os.ReadDir(sub)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	if strings.Join(names, ",") != "src" {
		t.Fatalf("the mount's root lists %v", names)
	}
	// ".." at the mount's root is the host's directory above the mount
	// point, and the volume's names above the subdir are not found.
	if got, err := filepath.EvalSymlinks(filepath.Join(sub, "src", "..", "..")); err != nil || got != v.dir {
		t.Fatalf("../.. from the mount: %q, %v", got, err)
	}
	for _, name := range []string{"secret", "projects"} {
		if _, err := os.Stat(filepath.Join(sub, name)); !os.IsNotExist(err) {
			t.Errorf("the volume's /%s from the subdir mount: %v", name, err)
		}
	}
	// A symlink pointing above the subdir is a plain symlink: the kernel
	// resolves it in the host's tree, not in the volume's.
	if err := os.Symlink("../../secret", filepath.Join(sub, "up")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(filepath.Join(sub, "up")); err == nil {
		t.Error("a symlink to ../../secret read the volume's file above the subdir")
	}
	// The internal files and the tools work on the subdir mount.
	if _, err := os.ReadFile(filepath.Join(sub, ".stats")); err != nil {
		t.Fatalf(".stats at the subdir mount's root: %v", err)
	}
	if out := mustSluice(t, "info", filepath.Join(sub, "src", "main.c")); !strings.Contains(out, "main.c") {
		t.Fatalf("sluice info on the subdir mount:\n%s", out)
	}
	// Changes meet on both mounts.
	if err := os.WriteFile(filepath.Join(sub, "src", "new.c"), []byte("from the subdir"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(v.mnt, "projects", "alpha", "src", "new.c")); err != nil || string(got) != "from the subdir" {
		t.Fatalf("the whole volume reads the subdir mount's file: %q, %v", got, err)
	}
	if err := os.Rename(filepath.Join(sub, "src", "new.c"), filepath.Join(sub, "top.c")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(v.mnt, "projects", "alpha", "top.c")); err != nil {
		t.Fatalf("the whole volume after a rename on the subdir mount: %v", err)
	}
	// A subdir that is not a directory, or is missing, fails the mount.
	if err := os.Mkdir(filepath.Join(v.dir, "bad"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"/secret", "/nope"} {
		r := sluice(t, "mount", "-d", v.metaURL, filepath.Join(v.dir, "bad"), "--subdir", bad)
		if r.code == 0 || !strings.Contains(r.stderr, "subdir "+bad) {
			t.Errorf("mount --subdir %s: exit %d, %s", bad, r.code, r.stderr)
		}
	}
}
