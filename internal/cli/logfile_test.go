package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// logFiles returns the contents of the files in dir by name.
func logFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// logLines returns n lines of 100 bytes, numbered from first.
func logLines(first, n int) []string {
	var out []string
	for i := first; i < first+n; i++ {
		line := fmt.Sprintf("line %04d ", i)
		out = append(out, line+strings.Repeat("x", 99-len(line))+"\n")
	}
	return out
}

// TestRotatingLog writes past a tiny maximum size: the file is rotated
// once, the backup holds the records before the rotation and the file
// those after, none is split, and onRotate is told.
func TestRotatingLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mount.log")
	// A file left by an earlier run counts towards the size.
	old := strings.Join(logLines(0, 3), "")
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	rotations := 0
	w := newRotatingLog(path, logRotation{maxSize: 1050, backups: 2}, func() error { rotations++; return nil })
	defer w.Close()
	lines := logLines(3, 15)
	for _, l := range lines {
		if n, err := w.Write([]byte(l)); err != nil || n != len(l) {
			t.Fatalf("write: %d, %v", n, err)
		}
	}
	if rotations != 1 {
		t.Fatalf("%d rotations, want 1", rotations)
	}
	files := logFiles(t, dir)
	if files["mount.log"] != strings.Join(lines[7:], "") {
		t.Errorf("mount.log holds %q\nwant the last 8 records", files["mount.log"])
	}
	delete(files, "mount.log")
	if len(files) != 1 {
		t.Fatalf("files besides mount.log: %v, want one backup", files)
	}
	for name, content := range files {
		if !strings.HasPrefix(name, "mount-") || !strings.HasSuffix(name, ".log") {
			t.Errorf("backup named %s, want mount-<time>.log", name)
		}
		if want := old + strings.Join(lines[:7], ""); content != want {
			t.Errorf("backup %s holds %d bytes, want the first 10 records (%d bytes)", name, len(content), len(want))
		}
	}
}

// TestRotatingLogStderr: after a rotation, a descriptor redirectFds
// pointed at the new file (as a background mount's stderr is) writes
// there, and the log's next records append after it instead of
// overwriting it.
func TestRotatingLogStderr(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mount.log")
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	w := newRotatingLog(path, logRotation{maxSize: 250}, func() error { return redirectFds(path, int(stderr.Fd())) })
	defer w.Close()
	lines := logLines(0, 3) // the third one rotates
	for _, l := range lines {
		if _, err := w.Write([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stderr.WriteString("panic: oops\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("after\n")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := lines[2] + "panic: oops\nafter\n"; string(got) != want {
		t.Errorf("mount.log holds %q\nwant %q", got, want)
	}
	if b, _ := os.ReadFile(stderr.Name()); len(b) != 0 {
		t.Errorf("the original stderr file got %q after the redirect", b)
	}
}

// TestRotatingLogLargeRecord: a record larger than the maximum goes
// whole into a file of its own.
func TestRotatingLogLargeRecord(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mount.log")
	w := newRotatingLog(path, logRotation{maxSize: 100}, nil)
	defer w.Close()
	big := bytes.Repeat([]byte("y"), 300)
	for _, p := range [][]byte{[]byte("small\n"), big} {
		if n, err := w.Write(p); err != nil || n != len(p) {
			t.Fatalf("write %d bytes: %d, %v", len(p), n, err)
		}
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, big) {
		t.Errorf("mount.log holds %d bytes (%v), want the large record alone", len(got), err)
	}
}

// TestLogRotationFlags binds the rotation flags and parses them.
func TestLogRotationFlags(t *testing.T) {
	cases := []struct {
		args []string
		want logRotation
	}{
		{nil, logRotation{maxSize: 100 << 20, backups: 5, compress: true}},
		{[]string{"--log-max-size", "64K", "--log-backups", "2", "--log-compress=false"}, logRotation{maxSize: 64 << 10, backups: 2}},
		{[]string{"--log-max-size", "1"}, logRotation{maxSize: 1 << 20, backups: 5, compress: true}},
		{[]string{"--log-max-size", "0"}, logRotation{backups: 5, compress: true}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var r logRotation
			fl := pflag.NewFlagSet("mount", pflag.ContinueOnError)
			r.addFlags(fl)
			if err := fl.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r, c.want) {
				t.Errorf("got %+v, want %+v", r, c.want)
			}
		})
	}
}
