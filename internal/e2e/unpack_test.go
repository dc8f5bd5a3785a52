package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestUnpackKeepsAttributes unpacks an archive whose files carry owners,
// modes (setuid and setgid among them) and old times onto a mount, as
// root with tar -p, and checks that every attribute and byte matches an
// unpacking onto local disk: on this mount at once, through a second
// mount, and after a remount. The mount holds tar's chown, chmod and
// utimes of each file back to commit them with its data, so this is the
// check that nothing is lost or reordered on the way.
func TestUnpackKeepsAttributes(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	for i, f := range []struct {
		name      string
		mode      uint32
		uid, gid  int
		size      int
		mtimeYear int
	}{
		{"a/plain", 0o644, 0, 0, 10000, 2001},
		{"a/b/exec", 0o755, 1000, 100, 30000, 2010},
		{"a/b/setuid", 0o4755, 0, 0, 5, 2015},
		{"a/setgid", 0o2750, 2, 3, 0, 1999},
		{"c/private", 0o600, 65534, 65534, 200000, 2020},
		{"c/big", 0o640, 7, 8, 5 << 20, 2022},
	} {
		p := filepath.Join(src, f.name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		data := make([]byte, f.size)
		for j := range data {
			data[j] = byte(i*31 + j*7)
		}
		write(t, p, data)
		if err := os.Chown(p, f.uid, f.gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, os.FileMode(f.mode&0o777)|modeBits(f.mode)); err != nil {
			t.Fatal(err)
		}
		mtime := time.Date(f.mtimeYear, 3, 4, 5, 6, 7, 0, time.UTC)
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	archive := filepath.Join(t.TempDir(), "tree.tar")
	mustRun(t, "tar", "-C", src, "-cf", archive, ".")
	local := filepath.Join(t.TempDir(), "local")
	if err := os.Mkdir(local, 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "tar", "-C", local, "-xpf", archive, "--same-owner")
	want := listing(t, local)

	v := newVolume(t)
	v.mount(t)
	second := filepath.Join(v.dir, "second")
	v.mountAt(t, second)
	dst := v.path("x")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "tar", "-C", dst, "-xpf", archive, "--same-owner")
	for _, c := range []struct{ what, dir string }{
		{"this mount", dst},
		{"a second mount", filepath.Join(second, "x")},
	} {
		if got := listing(t, c.dir); got != want {
			t.Errorf("%s differs from local disk:\n%s\nwant\n%s", c.what, got, want)
		}
	}
	mustRun(t, "diff", "-r", local, dst)
	mustSluice(t, "umount", second)
	v.umount(t)
	v.mount(t)
	if got := listing(t, dst); got != want {
		t.Errorf("after a remount:\n%s\nwant\n%s", got, want)
	}
}

// mustRun runs bin with args and fails t unless it succeeds.
func mustRun(t *testing.T, bin string, args ...string) {
	t.Helper()
	if r := run(t, bin, args...); r.code != 0 {
		t.Fatalf("%s %s: exit %d\n%s%s", bin, strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
}

// listing is find's view of the regular files under dir: path, mode,
// owner, mtime and size, one per line, sorted.
func listing(t *testing.T, dir string) string {
	t.Helper()
	out, err := exec.Command("find", dir, "-type", "f", "-printf", "%P %m %U %G %T@ %s\n").Output()
	if err != nil {
		t.Fatalf("find %s: %v", dir, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
