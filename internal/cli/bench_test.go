package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicefs/sluice/internal/bench"
)

// benchLeftovers fails t when dir still holds a bench directory.
func benchLeftovers(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "__sluice_bench_") {
			t.Errorf("bench left %s behind in %s", e.Name(), dir)
		}
	}
}

func TestBenchFlagErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no threads", []string{"-p", "0", dir}, "--threads 0: must be at least 1"},
		{"negative threads", []string{"--threads", "-2", dir}, "--threads -2: must be at least 1"},
		{"block size 0", []string{"--block-size", "0", dir}, "--block-size 0: must be from 1 byte to 1G"},
		{"block size over 1G", []string{"--block-size", "2G", dir}, "--block-size 2147483648: must be from 1 byte to 1G"},
		{"big file size 0", []string{"--big-file-size", "0", dir}, "--big-file-size 0: must be at least 1 byte"},
		{"small file size 0", []string{"--small-file-size", "0", dir}, "--small-file-size 0: must be at least 1 byte"},
		{"small file count 0", []string{"--small-file-count", "0", dir}, "--small-file-count 0: must be at least 1"},
		{"bad size", []string{"--big-file-size", "1X", dir}, `invalid size "1X"`},
		{"missing path", []string{filepath.Join(dir, "nope")}, filepath.Join(dir, "nope") + " does not exist"},
		{"not a directory", []string{file}, file + " is not a directory"},
		{"no path", nil, "bench expects PATH (got 0 arguments)"},
		{"two paths", []string{dir, dir}, "bench expects PATH (got 2 arguments)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := newBench()
			cmd.SilenceUsage, cmd.SilenceErrors = true, true // as under the root command
			cmd.SetArgs(tt.args)
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(io.Discard)
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("bench %v: error %v, want one containing %q", tt.args, err, tt.want)
			}
			if out.Len() != 0 {
				t.Errorf("bench %v printed %q before failing", tt.args, out.String())
			}
			benchLeftovers(t, dir)
		})
	}
}

func TestBenchSizeFlags(t *testing.T) {
	tests := []struct {
		flag, value string
		want        int64
	}{
		{"big-file-size", "1G", 1 << 30},
		{"big-file-size", "512M", 512 << 20},
		{"big-file-size", "16", 16 << 20}, // MiB, as juicefs bench counts it
		{"block-size", "4", 4 << 20},
		{"block-size", "256K", 256 << 10},
		{"small-file-size", "64", 64 << 10}, // KiB
		{"small-file-size", "1MiB", 1 << 20},
		{"small-file-size", "100B", 100},
	}
	for _, tt := range tests {
		t.Run(tt.flag+"="+tt.value, func(t *testing.T) {
			cmd := newBench()
			if err := cmd.ParseFlags([]string{"--" + tt.flag, tt.value}); err != nil {
				t.Fatal(err)
			}
			if got, want := cmd.Flags().Lookup(tt.flag).Value.String(), formatSize(tt.want); got != want {
				t.Errorf("--%s %s = %s, want %s", tt.flag, tt.value, got, want)
			}
		})
	}
}

// sampleBenchReport returns a report of given figures: big files at 256
// and 512 MiB/s, small files at 200 and 400 files/s, stats at 10,000/s.
func sampleBenchReport() *bench.Report {
	r := &bench.Report{Path: "/mnt/vol/sub", Sluice: true, Volume: "vol", MountPoint: "/mnt/vol", FSType: "fuse.sluice",
		Source: "sluice:vol", Threads: 1, BlockSize: 1 << 20, BigFileSize: 1 << 30, SmallFileSize: 128 << 10,
		SmallFileCount: 100, Cache: bench.Cache{Root: true, DropCachesWritable: false}, ElapsedSeconds: 8.04}
	r.BigWrite = bench.Item{Value: 256, Unit: "MiB/s", LatencyMS: 4000.0 / 1024, LatencyPer: "block"}
	r.BigRead = bench.Item{Value: 512, Unit: "MiB/s", LatencyMS: 2000.0 / 1024, LatencyPer: "block"}
	r.SmallWrite = bench.Item{Value: 200, Unit: "files/s", LatencyMS: 5, LatencyPer: "file"}
	r.SmallRead = bench.Item{Value: 400, Unit: "files/s", LatencyMS: 2.5, LatencyPer: "file"}
	r.Stat = bench.Item{Value: 10000, Unit: "files/s", LatencyMS: 0.1, LatencyPer: "stat"}
	return r
}

func TestBenchTable(t *testing.T) {
	r := sampleBenchReport()
	want := `+------------------+------------------+---------------+
| ITEM             |            VALUE |       LATENCY |
+------------------+------------------+---------------+
| Write big file   |     256.00 MiB/s | 3.91 ms/block |
| Read big file    |     512.00 MiB/s | 1.95 ms/block |
| Write small file |   200.00 files/s |  5.00 ms/file |
| Read small file  |   400.00 files/s |  2.50 ms/file |
| Stat file        | 10000.00 files/s | 0.100 ms/stat |
+------------------+------------------+---------------+
`
	if got := benchTable(r); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
	header := benchHeader(r)
	for _, s := range []string{
		`Benchmark of /mnt/vol/sub: Sluice volume "vol" (mounted at /mnt/vol)`,
		"1 thread; big files: 1 x 1G in 1M blocks; small files: 1 x 100 x 128K",
		"not the machine's (--drop-caches; root: yes, /proc/sys/vm/drop_caches writable: no)",
	} {
		if !strings.Contains(header, s) {
			t.Errorf("header lacks %q:\n%s", s, header)
		}
	}
	r.Sluice, r.Volume, r.FSType, r.Source, r.MountPoint = false, "", "ext4", "/dev/vda", "/"
	if h := benchHeader(r); !strings.Contains(h, "not a Sluice mount (ext4 file system /dev/vda mounted at /)") {
		t.Errorf("header of a directory on ext4:\n%s", h)
	}
}

func TestBenchVerdict(t *testing.T) {
	setup := "(-p 1, measured on " + bench.ReferenceSetup + ")"
	tests := []struct {
		name      string
		ref       bench.Reference
		want      string
		belowHalf []string
	}{
		{"one below half", bench.Reference{Threads: 1, BigWrite: 512, BigRead: 512, SmallWrite: 100, SmallRead: 1000, Stat: 10000},
			"Verdict: big-file write 0.5x, read 1.0x; small-file write 2.0x, read 0.4x; stat 1.0x of the figures in docs/benchmarks.md " +
				setup + "; BELOW HALF: read small file.",
			[]string{"read small file"}},
		{"none below half", bench.Reference{Threads: 1, BigWrite: 256, BigRead: 256, SmallWrite: 200, SmallRead: 200, Stat: 7000},
			"Verdict: big-file write 1.0x, read 2.0x; small-file write 1.0x, read 2.0x; stat 1.4x of the figures in docs/benchmarks.md " +
				setup + "; none below half.",
			[]string{}},
		{"all below half", bench.Reference{Threads: 4, BigWrite: 1000, BigRead: 2000, SmallWrite: 1000, SmallRead: 1000, Stat: 100000},
			"Verdict: big-file write 0.3x, read 0.3x; small-file write 0.2x, read 0.4x; stat 0.1x of the figures in docs/benchmarks.md " +
				"(-p 4, measured on " + bench.ReferenceSetup + "); BELOW HALF: write big file, read big file, write small file, read small file, stat file.",
			[]string{"write big file", "read big file", "write small file", "read small file", "stat file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sampleBenchReport()
			r.Compare(tt.ref)
			if got := benchVerdict(r); got != tt.want {
				t.Errorf("verdict:\n%s\nwant:\n%s", got, tt.want)
			}
			if fmt.Sprint(r.BelowHalf) != fmt.Sprint(tt.belowHalf) {
				t.Errorf("below half = %q, want %q", r.BelowHalf, tt.belowHalf)
			}
		})
	}
}

// tinyBench returns bench options small enough for a unit test: the big
// file is not a whole number of blocks, nor is a small file.
func tinyBench() *benchOptions {
	return &benchOptions{Options: bench.Options{Threads: 3, BlockSize: 64 << 10, BigFileSize: 1<<20 + 12345,
		SmallFileSize: 70 << 10, SmallFileCount: 7}}
}

func TestBenchDirectoryJSON(t *testing.T) {
	dir := t.TempDir()
	o := tinyBench()
	o.json = true
	var out bytes.Buffer
	if err := runBench(context.Background(), &out, dir, o); err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	var r map[string]any
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("bench --json printed no JSON object: %v\n%s", err, out.String())
	}
	if r["sluice_mount"] != false || r["threads"] != 3.0 || r["small_file_count"] != 7.0 {
		t.Errorf("bench --json of a plain directory: %s", out.String())
	}
	bigBlocks, small := 3*17.0, 21.0 // 1M+12345 is 17 blocks of 64K
	want := map[string][3]float64{   // files, ops, bytes
		"big_write":   {3, bigBlocks, 3 * (1<<20 + 12345)},
		"big_read":    {3, bigBlocks, 3 * (1<<20 + 12345)},
		"small_write": {small, small, small * (70 << 10)},
		"small_read":  {small, small, small * (70 << 10)},
		"stat":        {small, small, 0},
	}
	for name, w := range want {
		it, ok := r[name].(map[string]any)
		if !ok {
			t.Errorf("no item %s in %s", name, out.String())
			continue
		}
		if it["files"] != w[0] || it["ops"] != w[1] || it["bytes"] != w[2] {
			t.Errorf("%s: files, ops, bytes = %v, %v, %v; want %v", name, it["files"], it["ops"], it["bytes"], w)
		}
		for _, k := range []string{"seconds", "value", "latency_ms", "reference", "ratio"} {
			if v, _ := it[k].(float64); v <= 0 {
				t.Errorf("%s: %s = %v, want it positive", name, k, it[k])
			}
		}
	}
	benchLeftovers(t, dir)
}

func TestBenchDirectoryTable(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := runBench(context.Background(), &out, dir, tinyBench()); err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	for _, re := range []string{
		`(?m)^Benchmark of .*: not a Sluice mount`,
		`(?m)^\| Write big file +\| +[0-9.]+ MiB/s \| +[0-9.]+ ms/block \|$`,
		`(?m)^\| Read big file +\| +[0-9.]+ MiB/s \| +[0-9.]+ ms/block \|$`,
		`(?m)^\| Write small file +\| +[0-9.]+ files/s \| +[0-9.]+ ms/file \|$`,
		`(?m)^\| Read small file +\| +[0-9.]+ files/s \| +[0-9.]+ ms/file \|$`,
		`(?m)^\| Stat file +\| +[0-9.]+ files/s \| +[0-9.]+ ms/stat \|$`,
		`(?m)^Verdict: big-file write [0-9.]+x, read [0-9.]+x; small-file write [0-9.]+x, read [0-9.]+x; stat [0-9.]+x of the figures`,
		`(?m)^Took [0-9.]+s overall`,
	} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("output does not match %s:\n%s", re, out.String())
		}
	}
	benchLeftovers(t, dir)
}

func TestBenchInterrupted(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // as Ctrl-C does, before the first write
	var out bytes.Buffer
	err := runBench(ctx, &out, dir, tinyBench())
	if err == nil || !strings.Contains(err.Error(), "bench interrupted; removed "+filepath.Join(dir, "__sluice_bench_")) {
		t.Fatalf("interrupted bench: error %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("interrupted bench printed %q", out.String())
	}
	benchLeftovers(t, dir)
}
