package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchItem is one item of `sluice bench --json`.
type benchItem struct {
	Files      int     `json:"files"`
	Ops        int64   `json:"ops"`
	Bytes      int64   `json:"bytes"`
	Seconds    float64 `json:"seconds"`
	Value      float64 `json:"value"`
	Unit       string  `json:"unit"`
	LatencyMS  float64 `json:"latency_ms"`
	LatencyPer string  `json:"latency_per"`
	Reference  float64 `json:"reference"`
	Ratio      float64 `json:"ratio"`
}

// benchLeftovers fails t when the root of the mount still holds a bench
// directory.
func benchLeftovers(t *testing.T, mnt string) {
	t.Helper()
	entries, err := os.ReadDir(mnt)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "__sluice_bench_") {
			t.Errorf("sluice bench left %s behind", e.Name())
		}
	}
}

func TestBench(t *testing.T) {
	v := newVolume(t)
	v.mount(t)

	out := mustSluice(t, "bench", v.mnt, "--big-file-size", "16M", "--small-file-count", "20", "-p", "2", "--json")
	var r struct {
		SluiceMount    bool      `json:"sluice_mount"`
		Volume         string    `json:"volume"`
		MountPoint     string    `json:"mount_point"`
		Threads        int       `json:"threads"`
		BlockSize      int64     `json:"block_size"`
		BigFileSize    int64     `json:"big_file_size"`
		SmallFileSize  int64     `json:"small_file_size"`
		SmallFileCount int       `json:"small_file_count"`
		ElapsedSeconds float64   `json:"elapsed_seconds"`
		BelowHalf      []string  `json:"below_half"`
		BigWrite       benchItem `json:"big_write"`
		BigRead        benchItem `json:"big_read"`
		SmallWrite     benchItem `json:"small_write"`
		SmallRead      benchItem `json:"small_read"`
		Stat           benchItem `json:"stat"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench --json printed no JSON object: %v\n%s", err, out)
	}
	items := map[string]benchItem{"big_write": r.BigWrite, "big_read": r.BigRead,
		"small_write": r.SmallWrite, "small_read": r.SmallRead, "stat": r.Stat}
	if !r.SluiceMount || r.Volume != "vol" || r.MountPoint != v.mnt {
		t.Errorf("bench did not see Sluice volume vol mounted at %s:\n%s", v.mnt, out)
	}
	if r.Threads != 2 || r.BlockSize != 1<<20 || r.BigFileSize != 16<<20 || r.SmallFileSize != 128<<10 || r.SmallFileCount != 20 {
		t.Errorf("bench settings differ from those asked:\n%s", out)
	}
	want := map[string]struct {
		files      int
		ops, bytes int64
		unit, per  string
	}{
		"big_write":   {2, 32, 32 << 20, "MiB/s", "block"},
		"big_read":    {2, 32, 32 << 20, "MiB/s", "block"},
		"small_write": {40, 40, 40 * 128 << 10, "files/s", "file"},
		"small_read":  {40, 40, 40 * 128 << 10, "files/s", "file"},
		"stat":        {40, 40, 0, "files/s", "stat"},
	}
	for name, w := range want {
		it := items[name]
		if it.Files != w.files || it.Ops != w.ops || it.Bytes != w.bytes || it.Unit != w.unit || it.LatencyPer != w.per {
			t.Errorf("%s = %+v; want %d files, %d ops, %d bytes, %s, per %s", name, it, w.files, w.ops, w.bytes, w.unit, w.per)
		}
		for k, x := range map[string]float64{"seconds": it.Seconds, "value": it.Value, "latency_ms": it.LatencyMS,
			"reference": it.Reference, "ratio": it.Ratio} {
			if !(x > 0) {
				t.Errorf("%s: %s = %v, want it positive", name, k, x)
			}
		}
	}
	if !(r.ElapsedSeconds > 0) || r.BelowHalf == nil {
		t.Errorf("bench --json lacks its elapsed time or its list of items below half:\n%s", out)
	}
	benchLeftovers(t, v.mnt)

	out = mustSluice(t, "bench", v.mnt, "--big-file-size", "4M", "--small-file-count", "5")
	for _, re := range []string{
		`(?m)^Benchmark of ` + regexp.QuoteMeta(v.mnt) + `: Sluice volume "vol"`,
		`(?m)^\| ITEM +\| +VALUE \| +LATENCY \|$`,
		`(?m)^\| Write big file +\| +[0-9.]+ MiB/s \| +[0-9.]+ ms/block \|$`,
		`(?m)^\| Read big file +\| +[0-9.]+ MiB/s \| +[0-9.]+ ms/block \|$`,
		`(?m)^\| Write small file +\| +[0-9.]+ files/s \| +[0-9.]+ ms/file \|$`,
		`(?m)^\| Read small file +\| +[0-9.]+ files/s \| +[0-9.]+ ms/file \|$`,
		`(?m)^\| Stat file +\| +[0-9.]+ files/s \| +[0-9.]+ ms/stat \|$`,
		`(?m)^Verdict: big-file write [0-9.]+x, read [0-9.]+x; small-file write [0-9.]+x, read [0-9.]+x; stat [0-9.]+x ` +
			`of the figures in docs/benchmarks.md \(-p 1, measured on .*\); (none below half|BELOW HALF: .*)\.$`,
		`(?m)^Took [0-9.]+s overall on Sluice volume vol`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("bench output does not match %s:\n%s", re, out)
		}
	}
	benchLeftovers(t, v.mnt)
}

// TestBenchInterrupt interrupts a bench in the middle of writing its big
// file, as Ctrl-C does, and checks that it removes its files.
func TestBenchInterrupt(t *testing.T) {
	v := newVolume(t)
	v.mount(t)
	cmd := exec.Command(sluiceBin, "bench", v.mnt, "--big-file-size", "2G")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })

	// Wait until the big file is being written.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m, _ := filepath.Glob(filepath.Join(v.mnt, "__sluice_bench_*", "big.0")); len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bench did not start writing its big file; output:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("interrupted bench exited 0; output:\n%s", out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("bench did not end within 60 s of SIGINT; output:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "bench interrupted; removed "+filepath.Join(v.mnt, "__sluice_bench_")) {
		t.Errorf("interrupted bench output:\n%s", out.String())
	}
	benchLeftovers(t, v.mnt)
}
