package e2e

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pjdfstestConfig enables the features Sluice supports. Remounts are not
// allowed (the erofs cases need them), see docs/pjdfstest.md.
const pjdfstestConfig = `[features]
posix_fallocate = {}
rename_ctime = {}
utime_now = {}
utimensat = {}

[settings]
naptime = 0.05
allow_remount = false

[dummy_auth]
entries = [["nobody", "nogroup"], ["daemon", "daemon"]]
`

// knownSkips are the cases pjdfstest itself skips on a Sluice mount, with
// the reason documented in docs/pjdfstest.md. Any other skip fails.
var knownSkips = regexp.MustCompile(`^(\w+::)*erofs_\w+$|^link::link_count_max$`)

func findPjdfstest(t *testing.T) string {
	t.Helper()
	return findCargoTool(t, "pjdfstest", "pjdfstest")
}

// TestPjdfstest runs the Rust pjdfstest POSIX suite on a mount of a
// volume on each metadata engine, and on a replicated group of metadata
// servers, with reads from the leader and from followers.
func TestPjdfstest(t *testing.T) {
	bin := findPjdfstest(t)
	for _, engine := range append(metaEngines, "sluice3", "sluice3f") {
		t.Run(engine, func(t *testing.T) {
			v := newVolumeOn(t, engine)
			runPjdfstest(t, bin, v)
			if engine == "sluice3f" {
				var followers uint64
				for _, st := range groupStates(t, v.metaURL, false) {
					if st != nil && st.Raft.State == "Follower" {
						followers += st.AnyMemberReads
					}
				}
				if followers == 0 {
					t.Error("no follower answered a read of the mount (read=follower)")
				}
				t.Logf("reads answered by followers: %d", followers)
			}
		})
	}
	t.Run("sqlite3-acl", func(t *testing.T) { runPjdfstest(t, bin, newVolumeOn(t, "sqlite3", "--enable-acl")) })
	t.Run("subdir", func(t *testing.T) { // a short name: see metaURL
		// The suite in a directory of the volume mounted as the root.
		v := newVolumeOn(t, "sqlite3")
		v.mount(t)
		if err := os.Mkdir(filepath.Join(v.mnt, "sub"), 0o777); err != nil {
			t.Fatal(err)
		}
		v.umount(t)
		runPjdfstest(t, bin, v, "--subdir", "/sub")
	})
}

func runPjdfstest(t *testing.T, bin string, v *volume, mountArgs ...string) {
	v.mount(t, mountArgs...)
	conf := filepath.Join(v.dir, "pjdfstest.toml")
	if err := os.WriteFile(conf, []byte(pjdfstestConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	secondary := filepath.Join(v.dir, "secondary") // another file system, for EXDEV cases
	if err := os.Mkdir(secondary, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", conf, "-p", v.mnt, "-s", secondary)
	cmd.Dir = v.mnt
	out, err := cmd.CombinedOutput()
	passed, failed, skipped := 0, 0, 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	var last string
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) != 2 {
			if strings.HasPrefix(line, "\t") && last != "" {
				t.Logf("  %s: %s", last, strings.TrimSpace(line))
			}
			continue
		}
		last = ""
		switch f[1] {
		case "ok":
			passed++
		case "skipped":
			skipped++
			last = f[0]
			if !knownSkips.MatchString(f[0]) {
				failed++
				t.Errorf("pjdfstest %s skipped for a reason not documented", f[0])
			}
		case "FAILED", "failed":
			failed++
			last = f[0]
			t.Errorf("pjdfstest %s failed", f[0])
		}
	}
	t.Logf("pjdfstest: %d passed, %d failed, %d skipped", passed, failed, skipped)
	if err != nil {
		t.Errorf("pjdfstest exited with %v; output tail:\n%s", err, tail(string(out), 40))
	}
	if passed < 350 {
		t.Errorf("only %d pjdfstest cases passed; output tail:\n%s", passed, tail(string(out), 40))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
