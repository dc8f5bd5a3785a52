package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// inode returns the inode number of path.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// TestTrash removes a file through a mount, finds it under .trash with its
// data, moves it back with rename(2), and then deletes it for good from
// the trash, after which its blocks leave the bucket.
// TestTrashReplacedWhileOpen: a file a rename replaced while open shows
// no link through its descriptor with the trash on too, where its one
// name is in the trash.
func TestTrashReplacedWhileOpen(t *testing.T) {
	v := newVolume(t, "--trash-days", "1")
	v.mount(t)
	dir := v.path("case")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	replacedWhileOpenCase(t, dir)
}

func TestTrash(t *testing.T) {
	v := newVolume(t, "--trash-days", "1", "--block-size", "1M")
	v.mount(t)
	baseline := countObjects(t, v.bucket)
	if !slices.Contains(dirNames(t, v.mnt), ".trash") {
		t.Fatalf("root lists %q, want .trash among them", dirNames(t, v.mnt))
	}
	if err := os.Mkdir(v.path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := newRand(11).bytes(3<<20 + 17)
	write(t, v.path("d/f"), data)
	fino, dino := inode(t, v.path("d/f")), inode(t, v.path("d"))
	stored := countObjects(t, v.bucket)
	if stored <= baseline {
		t.Fatalf("writing 3 MiB stored no objects (%d, before %d)", stored, baseline)
	}

	if err := os.Remove(v.path("d/f")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(v.path("d/f")); !os.IsNotExist(err) {
		t.Fatalf("stat of a removed file: %v", err)
	}
	hours := dirNames(t, v.path(".trash"))
	if len(hours) != 1 {
		t.Fatalf(".trash holds %q, want one hour directory", hours)
	}
	if tm, err := time.Parse("2006-01-02-15", hours[0]); err != nil || time.Since(tm) > 2*time.Hour || time.Since(tm) < 0 {
		t.Fatalf("hour directory %q is not this hour (UTC): %v", hours[0], err)
	}
	name := fmt.Sprintf("%d-%d-f", dino, fino)
	trashed := filepath.Join(v.path(".trash"), hours[0], name)
	if got := dirNames(t, filepath.Dir(trashed)); !slices.Equal(got, []string{name}) {
		t.Fatalf("hour directory holds %q, want %q", got, name)
	}
	if got, err := os.ReadFile(trashed); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("trashed file differs from what was written (%v)", err)
	}
	wantErrno(t, "mkdir in .trash", os.Mkdir(v.path(".trash/x"), 0o755), syscall.EPERM)
	wantErrno(t, "rmdir .trash", syscall.Rmdir(v.path(".trash")), syscall.EPERM)
	wantErrno(t, "rename .trash", os.Rename(v.path(".trash"), v.path("t")), syscall.EPERM)
	if n := countObjects(t, v.bucket); n != stored {
		t.Fatalf("bucket holds %d objects after the file went to the trash, want %d", n, stored)
	}

	// Restore with mv.
	if err := os.Rename(trashed, v.path("d/f")); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got, err := os.ReadFile(v.path("d/f")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("restored file differs from what was written (%v)", err)
	}
	if ino := inode(t, v.path("d/f")); ino != fino {
		t.Fatalf("restored file has inode %d, want %d", ino, fino)
	}

	// Remove it again and delete it from the trash: its blocks go.
	if err := os.Remove(v.path("d/f")); err != nil {
		t.Fatal(err)
	}
	again, err := filepath.Glob(v.path(".trash/*/" + name)) // the hour may have turned
	if err != nil || len(again) != 1 {
		t.Fatalf("removed file in the trash: %q, %v", again, err)
	}
	if err := os.Remove(again[0]); err != nil {
		t.Fatalf("rm from the trash: %v", err)
	}
	eventuallyWithin(t, 20*time.Second, "blocks of a file deleted from the trash", func() error {
		if n := countObjects(t, v.bucket); n != baseline {
			return fmt.Errorf("bucket holds %d objects, want %d", n, baseline)
		}
		return nil
	})
}

// TestTrashDaysFormat checks the --trash-days default and that a
// re-format keeps the stored value unless the flag is given.
func TestTrashDaysFormat(t *testing.T) {
	dir := t.TempDir()
	metaURL := "sqlite3://" + filepath.Join(dir, "meta.db")
	format := func(args ...string) string {
		t.Helper()
		return mustSluice(t, append([]string{"format", metaURL, "vol", "--bucket", filepath.Join(dir, "bucket")}, args...)...)
	}
	for _, step := range []struct {
		args []string
		want string
	}{
		{nil, `"TrashDays": 1`},
		{[]string{"--trash-days", "0"}, `"TrashDays": 0`},
		{[]string{"--capacity", "10"}, `"TrashDays": 0`},
		{[]string{"--trash-days", "7"}, `"TrashDays": 7`},
		{nil, `"TrashDays": 7`},
	} {
		if out := format(step.args...); !strings.Contains(out, step.want) {
			t.Fatalf("format %q: output lacks %s:\n%s", step.args, step.want, out)
		}
	}
	r := sluice(t, "format", metaURL, "vol", "--bucket", filepath.Join(dir, "bucket"), "--trash-days", "-1")
	if r.code == 0 || !strings.Contains(r.stderr, "--trash-days -1") {
		t.Fatalf("format with --trash-days -1: exit %d, stderr %q", r.code, r.stderr)
	}
}
