package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/mountinfo"
	"github.com/sluicefs/sluice/internal/testserver"
)

// findCargoTool returns the path of a tool installed with `cargo install`
// (on PATH or in ~/.cargo/bin). It skips the test when the tool is
// missing, and fails under CI=true.
func findCargoTool(t *testing.T, name, crate string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cargo", "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	testserver.Missing(t, name+" is not installed", "cargo install --locked "+crate)
	return ""
}

// fsxConfig enables every operation fsx-rs knows on a file of up to 4 MiB,
// which spans 64 blocks of a 64 KiB-block volume.
const fsxConfig = `flen = 4194304
[opsize]
max = 262144
[weights]
close_open = 1
read = 10
write = 10
mapread = 5
mapwrite = 5
invalidate = 1
truncate = 2
fsync = 1
fdatasync = 1
posix_fallocate = 1
punch_hole = 1
sendfile = 1
posix_fadvise = 1
copy_file_range = 1
`

// fsxOps is the number of fsx operations per mount: SLUICE_FSX_OPS, or
// 100,000.
func fsxOps(t *testing.T) int {
	t.Helper()
	s := os.Getenv("SLUICE_FSX_OPS")
	if s == "" {
		return 100_000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("SLUICE_FSX_OPS=%q is not a positive number", s)
	}
	return n
}

// TestFsx runs fsx-rs through a mount: random writes, truncates,
// fallocate, hole punches, copy_file_range, mmap reads and writes, each
// read checked against fsx's in-memory image of the file.
func TestFsx(t *testing.T) {
	bin := findCargoTool(t, "fsx", "fsx")
	ops := fsxOps(t)
	for _, tt := range []struct {
		name      string
		mountArgs []string
	}{
		{"plain", nil},
		{"writeback", []string{"--writeback"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // fsx waits on fsyncs much of the time: two runs share the cores well
			v := newVolume(t, "--block-size", "64K")
			v.mount(t, tt.mountArgs...)
			cfg := filepath.Join(v.dir, "fsx.toml")
			if err := os.WriteFile(cfg, []byte(fsxConfig), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "-N", strconv.Itoa(ops), "-S", "20261122", "-f", cfg, "-P", v.dir, v.path("fsx.data"))
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "All operations completed A-OK!") {
				t.Fatalf("fsx failed (%v) after:\n%s\nmount log:\n%s", err, tail(string(out), 40), tail(readFile(t, v.log), 40))
			}
			t.Logf("fsx: %d operations A-OK", ops)
		})
	}
}

// TestStressNG runs stress-ng's file-system class on a mount, one
// instance of each stressor for a second each, verifying results.
func TestStressNG(t *testing.T) {
	requireTool(t, "stress-ng")
	v := newVolume(t)
	v.mount(t)
	dir := v.path("stress")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// About 40 stressors of a second each; a hang (the fanotify
	// stressor marks every mount on the host, so a hung mount anywhere
	// stops it) fails here with the output instead of at go test's
	// -timeout.
	const limit = 10 * time.Minute
	cmd := exec.Command("stress-ng", "--temp-path", dir, "--class", "filesystem", "--seq", "1", "-t", "1",
		"--verify", "--exclude", "binderfs,verity,bind-mount")
	cmd.Dir = v.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	expired, err := runWithin(cmd, limit)
	s := out.String()
	if expired {
		t.Fatalf("stress-ng still ran after %v, killed; FUSE mounts on the host:\n%s\noutput:\n%s", limit, fuseMounts(t), tail(s, 60))
	}
	if err != nil || !strings.Contains(s, "successful run completed") || strings.Contains(s, "fail") {
		t.Fatalf("stress-ng failed (%v):\n%s\nmount log:\n%s", err, tail(s, 60), tail(readFile(t, v.log), 40))
	}
}

// fuseMounts lists the FUSE mounts in the mount table, for a failure
// that a hung mount elsewhere may explain.
func fuseMounts(t *testing.T) string {
	t.Helper()
	ms, err := mountinfo.Read()
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, m := range ms {
		if strings.HasPrefix(m.FSType, "fuse") {
			fmt.Fprintf(&b, "%s on %s (%s)\n", m.Source, m.Point, m.FSType)
		}
	}
	return b.String()
}
