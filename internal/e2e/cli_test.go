package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadInput checks that mistakes give a one-line error naming the
// problem and a non-zero exit, never a panic, and leave no half-created
// volume behind.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "corrupt.db")
	if err := os.WriteFile(corrupt, []byte(strings.Repeat("this is not sqlite ", 300)), 0o644); err != nil {
		t.Fatal(err)
	}
	notDir := filepath.Join(dir, "plainfile")
	if err := os.WriteFile(notDir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := "sqlite3://" + filepath.Join(dir, "good.db")
	mustSluice(t, "format", good, "good", "--bucket", filepath.Join(dir, "goodbucket"))
	nonEmpty := filepath.Join(dir, "nonempty")
	if err := os.MkdirAll(filepath.Join(nonEmpty, "other", "chunks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(nonEmpty, "other", "chunks", "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	missingDB := filepath.Join(dir, "missing.db")

	cases := []struct {
		name string
		args []string
		want string // substring of the error line
		gone string // a path that must not exist afterwards
	}{
		{"unknown scheme", []string{"format", "foo://x", "vol"}, `unknown metadata engine "foo"`, ""},
		{"malformed URL", []string{"status", "not-a-url"}, "malformed metadata URL", ""},
		{"corrupt sqlite", []string{"status", "sqlite3://" + corrupt}, "not a SQLite database or corrupt", ""},
		{"unreadable sqlite", []string{"status", "sqlite3://" + dir}, "cannot open", ""},
		{"not formatted", []string{"status", "sqlite3://" + missingDB}, "volume not formatted", missingDB},
		{"empty sqlite", []string{"mount", "sqlite3://" + filepath.Join(dir, "empty.db"), dir}, "does not exist", ""},
		{"invalid block size", []string{"format", "sqlite3://" + filepath.Join(dir, "bs.db"), "vol", "--bucket", filepath.Join(dir, "b1"), "--block-size", "3M"}, "invalid block size", filepath.Join(dir, "bs.db")},
		{"block size too small", []string{"format", "sqlite3://" + filepath.Join(dir, "bs2.db"), "vol", "--bucket", filepath.Join(dir, "b1"), "--block-size", "4K"}, "invalid block size", filepath.Join(dir, "bs2.db")},
		{"bad size syntax", []string{"format", "sqlite3://" + filepath.Join(dir, "bs3.db"), "vol", "--block-size", "lots"}, "invalid size", filepath.Join(dir, "bs3.db")},
		{"bad name", []string{"format", "sqlite3://" + filepath.Join(dir, "n.db"), "Bad_Name", "--bucket", filepath.Join(dir, "b2")}, "invalid volume name", filepath.Join(dir, "n.db")},
		{"bucket not writable", []string{"format", "sqlite3://" + filepath.Join(dir, "nw.db"), "vol", "--bucket", filepath.Join(notDir, "sub")}, "bucket", filepath.Join(dir, "nw.db")},
		{"non-empty bucket", []string{"format", "sqlite3://" + filepath.Join(dir, "ne.db"), "other", "--bucket", nonEmpty}, "already holds objects", filepath.Join(dir, "ne.db")},
		{"unknown storage", []string{"format", "sqlite3://" + filepath.Join(dir, "us.db"), "vol", "--storage", "tape"}, `unknown storage "tape"`, filepath.Join(dir, "us.db")},
		{"immutable change", []string{"format", good, "good", "--bucket", filepath.Join(dir, "goodbucket"), "--block-size", "1M"}, "refusing to change", ""},
		{"mount point missing", []string{"mount", good, filepath.Join(dir, "nope")}, "does not exist", ""},
		{"mount point is a file", []string{"mount", good, notDir}, "not a directory", ""},
		{"umount not mounted", []string{"umount", dir}, "is not mounted", ""},
		{"missing args", []string{"format", good}, "expects META-URL and NAME", ""},
		{"unknown flag", []string{"mount", "--frobnicate", good, dir}, "unknown flag", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := sluice(t, tc.args...)
			if r.code == 0 {
				t.Fatalf("exit 0, want failure; stdout: %s", r.stdout)
			}
			msg := strings.TrimSpace(r.stderr)
			if strings.Count(msg, "\n") != 0 {
				t.Errorf("error is not one line:\n%s", msg)
			}
			if strings.Contains(msg, "panic") || strings.Contains(msg, "goroutine ") {
				t.Errorf("error shows a panic or stack trace:\n%s", msg)
			}
			if !strings.HasPrefix(msg, "sluice: ") || !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not contain %q", msg, tc.want)
			}
			if tc.gone != "" {
				if _, err := os.Stat(tc.gone); err == nil {
					t.Errorf("%s was left behind by the failed command", tc.gone)
				}
			}
		})
	}
}

func TestAlreadyMounted(t *testing.T) {
	v := newVolume(t)
	v.mount(t)
	r := sluice(t, "mount", v.metaURL, v.mnt)
	if r.code == 0 || !strings.Contains(r.stderr, "already mounted") {
		t.Fatalf("second mount: exit %d, stderr %q; want 'already mounted'", r.code, r.stderr)
	}
	r = sluice(t, "mount", "-d", v.metaURL, v.mnt)
	if r.code == 0 || !strings.Contains(r.stderr, "already mounted") {
		t.Fatalf("second background mount: exit %d, stderr %q; want 'already mounted'", r.code, r.stderr)
	}
}

func TestStatusShowsSessionAndHidesNothingSecret(t *testing.T) {
	v := newVolume(t)
	v.mount(t)
	out := mustSluice(t, "status", v.metaURL)
	for _, want := range []string{`"Name": "vol"`, `"MountPoint": "` + v.mnt + `"`, `"PID"`, `"Heartbeat"`} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %s:\n%s", want, out)
		}
	}
	v.umount(t)
}

func TestFormatAgainKeepsVolume(t *testing.T) {
	v := newVolume(t)
	out := mustSluice(t, "format", v.metaURL, "vol", "--bucket", v.bucket, "--capacity", "10")
	if !strings.Contains(out, "updated") || !strings.Contains(out, `"Capacity": 10737418240`) {
		t.Fatalf("re-format did not update capacity:\n%s", out)
	}
	v.mount(t)
	var st = statfs(t, v.mnt)
	if total := st.Blocks * uint64(st.Bsize); total != 10<<30 {
		t.Errorf("statfs total = %d, want %d", total, uint64(10<<30))
	}
}
