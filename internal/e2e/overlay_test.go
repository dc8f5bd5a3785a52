package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sluicefs/sluice/internal/testserver"
)

// TestOverlayUpper mounts overlayfs with its upper and work directories
// on a Sluice mount, on each engine of overlayEngines (overlayfs needs
// RENAME_WHITEOUT and trusted.* extended attributes, and copies up
// through O_TMPFILE when it can) over a lower directory on the
// local disk, then creates, changes, renames and removes files in the
// overlay: the overlay shows each change, and the lower directory stays
// as it was. When the kernel refuses Sluice as an upper file system the
// test fails under CI=true (skips loudly elsewhere), saying what the
// kernel logged.
func TestOverlayUpper(t *testing.T) {
	for _, engine := range overlayEngines {
		t.Run(engine, func(t *testing.T) { overlayUpper(t, newVolumeOn(t, engine)) })
	}
}

func overlayUpper(t *testing.T, v *volume) {
	v.mount(t)
	lower, merged := filepath.Join(v.dir, "lower"), filepath.Join(v.dir, "merged")
	upper, work := v.path("upper"), v.path("work")
	for _, d := range []string{lower, merged, upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	lowerFiles := map[string]string{"keep": "kept", "change": "old", "rename": "moved", "remove": "removed"}
	for name, content := range lowerFiles {
		write(t, filepath.Join(lower, name), []byte(content))
	}
	if err := os.Mkdir(filepath.Join(lower, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(lower, "dir", "inner"), []byte("inner"))

	opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		testserver.Missing(t, fmt.Sprintf("overlayfs refuses a Sluice mount as its upper file system: mount: %v; kernel: %s",
			err, overlayKernelLog()), "a kernel with overlayfs, which Sluice's whiteouts, O_TMPFILE and trusted.* attributes satisfy")
	}
	t.Cleanup(func() {
		if err := unix.Unmount(merged, 0); err != nil {
			t.Errorf("unmount the overlay: %v", err)
		}
	})
	m := func(name string) string { return filepath.Join(merged, name) }
	write(t, m("new"), []byte("new"))
	f, err := os.OpenFile(m("change"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatalf("open a lower file for writing (copy-up): %v", err)
	}
	if _, err := f.WriteString("+appended"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Rename(m("rename"), m("renamed")); err != nil {
		t.Fatalf("rename a lower file: %v", err)
	}
	if err := os.Remove(m("remove")); err != nil {
		t.Fatalf("remove a lower file: %v", err)
	}
	if err := os.Rename(m("dir"), m("dir2")); err != nil && !errors.Is(err, unix.EXDEV) {
		t.Fatalf("rename a lower directory: %v", err)
	}
	if err := os.RemoveAll(m("dir")); err != nil {
		t.Fatalf("remove a lower directory: %v", err)
	}

	want := map[string]string{"keep": "kept", "change": "old+appended", "renamed": "moved", "new": "new"}
	names, err := readDirNames(merged)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	if got := strings.Join(names, " "); got != "change keep new renamed" && got != "change dir2 keep new renamed" {
		t.Errorf("the overlay lists %q", got)
	}
	for name, content := range want {
		if got := readFile(t, m(name)); got != content {
			t.Errorf("overlay %s reads %q, want %q", name, got, content)
		}
	}
	// The lower directory is untouched.
	for name, content := range lowerFiles {
		if got := readFile(t, filepath.Join(lower, name)); got != content {
			t.Errorf("lower %s reads %q, want %q", name, got, content)
		}
	}
	if got := readFile(t, filepath.Join(lower, "dir", "inner")); got != "inner" {
		t.Errorf("lower dir/inner reads %q", got)
	}
	// The upper directory holds the changes, with whiteouts for what
	// went from the lower.
	for _, name := range []string{"remove", "rename", "dir"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(upper, name), &st); err != nil {
			t.Errorf("no whiteout for %s in the upper directory: %v", name, err)
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
			t.Errorf("upper %s: mode %o rdev %d, want a whiteout", name, st.Mode, st.Rdev)
		}
	}
}

// overlayKernelLog returns the kernel's last overlayfs messages, which
// say why a mount was refused.
func overlayKernelLog() string {
	out, err := exec.Command("dmesg").Output()
	if err != nil {
		return "(dmesg: " + err.Error() + ")"
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "overlayfs") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(len(lines)-3, 0):], "; ")
}
