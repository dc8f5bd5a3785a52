package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// leftovers fails t when dir still holds a bench directory.
func leftovers(t *testing.T, dir string) {
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

// tiny returns options small enough for a unit test: the big file is not
// a whole number of blocks, nor is a small file.
func tiny() Options {
	return Options{Threads: 3, BlockSize: 64 << 10, BigFileSize: 1<<20 + 12345, SmallFileSize: 70 << 10, SmallFileCount: 7}
}

func TestDefaults(t *testing.T) {
	d := Defaults()
	if d.Threads != 1 || d.BlockSize != 1<<20 || d.BigFileSize != 1<<30 || d.SmallFileSize != 128<<10 ||
		d.SmallFileCount != 100 || d.DropCaches || d.DropFile != DropCachesFile {
		t.Errorf("defaults = %+v, want those of juicefs bench", d)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		set  func(o *Options)
		want string
	}{
		{"no threads", func(o *Options) { o.Threads = 0 }, "--threads 0: must be at least 1"},
		{"negative threads", func(o *Options) { o.Threads = -2 }, "--threads -2: must be at least 1"},
		{"block size 0", func(o *Options) { o.BlockSize = 0 }, "--block-size 0: must be from 1 byte to 1G"},
		{"block size over 1G", func(o *Options) { o.BlockSize = 2 << 30 }, "--block-size 2147483648: must be from 1 byte to 1G"},
		{"block size 1G", func(o *Options) { o.BlockSize = 1 << 30 }, ""},
		{"block size 1", func(o *Options) { o.BlockSize = 1 }, ""},
		{"big file size 0", func(o *Options) { o.BigFileSize = 0 }, "--big-file-size 0: must be at least 1 byte"},
		{"small file size 0", func(o *Options) { o.SmallFileSize = 0 }, "--small-file-size 0: must be at least 1 byte"},
		{"small file count 0", func(o *Options) { o.SmallFileCount = 0 }, "--small-file-count 0: must be at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Defaults()
			tt.set(&o)
			err := o.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Validate = %v, want %q", err, tt.want)
			}
			// Run checks the options before it writes anything.
			dir := t.TempDir()
			if _, err := Run(context.Background(), dir, o); err == nil || err.Error() != tt.want {
				t.Errorf("Run = %v, want %q", err, tt.want)
			}
			leftovers(t, dir)
		})
	}
}

func TestRunBadPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, path, want string }{
		{"missing", filepath.Join(dir, "nope"), filepath.Join(dir, "nope") + " does not exist"},
		{"not a directory", file, file + " is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Run(context.Background(), tt.path, tiny())
			if err == nil || err.Error() != tt.want || r != nil {
				t.Fatalf("Run(%s) = %v, %v; want the error %q", tt.path, r, err, tt.want)
			}
			leftovers(t, dir)
		})
	}
}

// TestDropCachesNeedsRoot: DropCaches where the drop_caches file cannot
// be written fails before any work, saying which file.
func TestDropCachesNeedsRoot(t *testing.T) {
	dir := t.TempDir()
	o := Defaults()
	o.DropCaches = true
	o.DropFile = filepath.Join(dir, "no-such-dir", "drop_caches") // unwritable even for root
	_, err := Run(context.Background(), dir, o)
	if err == nil || !strings.Contains(err.Error(), "--drop-caches: cannot write "+o.DropFile) {
		t.Fatalf("DropCaches without the right: error %v", err)
	}
	leftovers(t, dir)
}

func TestRecord(t *testing.T) {
	tests := []struct {
		name                 string
		files                int
		ops, bytes           int64
		wall, busy           time.Duration
		per                  string
		value, latency       float64
		unit                 string
		wantFiles, wantBytes int64
	}{
		{"big write", 1, 1024, 1 << 30, 4 * time.Second, 4 * time.Second, "block", 256, 4000.0 / 1024, "MiB/s", 1, 1 << 30},
		{"two threads", 2, 2048, 2 << 30, 4 * time.Second, 8 * time.Second, "block", 512, 8000.0 / 2048, "MiB/s", 2, 2 << 30},
		{"small read", 100, 100, 100 * 128 << 10, 250 * time.Millisecond, 250 * time.Millisecond, "file", 400, 2.5, "files/s", 100, 100 * 128 << 10},
		{"stat", 100, 100, 0, 10 * time.Millisecond, 10 * time.Millisecond, "stat", 10000, 0.1, "files/s", 100, 0},
		{"no ops", 0, 0, 0, 0, 0, "stat", 0, 0, "files/s", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var it Item
			it.record(tt.files, tt.ops, tt.bytes, tt.wall, tt.busy, tt.per)
			near := func(a, b float64) bool { return a-b < 1e-9*max(1, b) && b-a < 1e-9*max(1, b) }
			if !near(it.Value, tt.value) || it.Unit != tt.unit || !near(it.LatencyMS, tt.latency) || it.LatencyPer != tt.per {
				t.Errorf("record = %v %s, %v ms/%s; want %v %s, %v ms/%s", it.Value, it.Unit, it.LatencyMS, it.LatencyPer,
					tt.value, tt.unit, tt.latency, tt.per)
			}
			if int64(it.Files) != tt.wantFiles || it.Bytes != tt.wantBytes || it.Ops != tt.ops || it.Seconds != tt.wall.Seconds() {
				t.Errorf("record: files %d, bytes %d, ops %d, seconds %v", it.Files, it.Bytes, it.Ops, it.Seconds)
			}
		})
	}
}

// sample returns a report of given figures: big files at 256 and 512
// MiB/s, small files at 200 and 400 files/s, stats at 10,000/s.
func sample() *Report {
	r := &Report{Threads: 1}
	r.BigWrite.record(1, 1024, 1<<30, 4*time.Second, 4*time.Second, "block")
	r.BigRead.record(1, 1024, 1<<30, 2*time.Second, 2*time.Second, "block")
	r.SmallWrite.record(100, 100, 100*128<<10, 500*time.Millisecond, 500*time.Millisecond, "file")
	r.SmallRead.record(100, 100, 100*128<<10, 250*time.Millisecond, 250*time.Millisecond, "file")
	r.Stat.record(100, 100, 0, 10*time.Millisecond, 10*time.Millisecond, "stat")
	return r
}

func TestCompare(t *testing.T) {
	tests := []struct {
		name      string
		ref       Reference
		ratios    []float64
		belowHalf []string
	}{
		{"one below half", Reference{Threads: 1, BigWrite: 512, BigRead: 512, SmallWrite: 100, SmallRead: 1000, Stat: 10000},
			[]float64{0.5, 1, 2, 0.4, 1}, []string{"read small file"}},
		{"none below half", Reference{Threads: 1, BigWrite: 256, BigRead: 256, SmallWrite: 200, SmallRead: 200, Stat: 7000},
			[]float64{1, 2, 1, 2, 10000.0 / 7000}, []string{}},
		{"all below half", Reference{Threads: 4, BigWrite: 1000, BigRead: 2000, SmallWrite: 1000, SmallRead: 1000, Stat: 100000},
			[]float64{0.256, 0.256, 0.2, 0.4, 0.1},
			[]string{"write big file", "read big file", "write small file", "read small file", "stat file"}},
		{"no reference figure", Reference{Threads: 1, BigRead: 512, SmallWrite: 200, SmallRead: 400, Stat: 10000},
			[]float64{0, 1, 1, 1, 1}, []string{"write big file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sample()
			r.Compare(tt.ref)
			if want := fmt.Sprintf("-p %d, measured on %s", tt.ref.Threads, ReferenceSetup); r.Reference != want {
				t.Errorf("Reference = %q, want %q", r.Reference, want)
			}
			refs := []float64{tt.ref.BigWrite, tt.ref.BigRead, tt.ref.SmallWrite, tt.ref.SmallRead, tt.ref.Stat}
			for k, it := range r.Items() {
				if it.Reference != refs[k] || it.Ratio-tt.ratios[k] > 1e-9 || tt.ratios[k]-it.Ratio > 1e-9 {
					t.Errorf("%s: reference %v, ratio %v; want %v, %v", it.Label, it.Reference, it.Ratio, refs[k], tt.ratios[k])
				}
			}
			if fmt.Sprint(r.BelowHalf) != fmt.Sprint(tt.belowHalf) || r.BelowHalf == nil {
				t.Errorf("BelowHalf = %q, want %q", r.BelowHalf, tt.belowHalf)
			}
		})
	}
}

func TestReferenceFor(t *testing.T) {
	for _, tt := range []struct{ threads, want int }{{1, 1}, {2, 1}, {3, 4}, {4, 4}, {64, 4}} {
		if got := ReferenceFor(tt.threads).Threads; got != tt.want {
			t.Errorf("reference for -p %d is that of -p %d, want -p %d", tt.threads, got, tt.want)
		}
	}
}

// TestReferencesDocumented checks that docs/benchmarks.md shows the
// reference figures the verdict compares with.
func TestReferencesDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## `sluice bench`\n")
	if !ok {
		t.Fatal("docs/benchmarks.md has no section \"`sluice bench`\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	if !strings.Contains(section, ReferenceSetup) {
		t.Errorf("the section does not name the setup %q", ReferenceSetup)
	}
	for _, ref := range references {
		for _, v := range []float64{ref.BigWrite, ref.BigRead, ref.SmallWrite, ref.SmallRead, ref.Stat} {
			if v <= 0 {
				t.Errorf("reference -p %d has a figure %v", ref.Threads, v)
			}
		}
		row := fmt.Sprintf("| -p %d | %.1f | %.1f | %.1f | %.1f | %.1f |", ref.Threads,
			ref.BigWrite, ref.BigRead, ref.SmallWrite, ref.SmallRead, ref.Stat)
		if !strings.Contains(section, row) {
			t.Errorf("the section lacks the row %q", row)
		}
	}
}

// progressLog records what Run tells Options.Progress.
type progressLog struct {
	mu    sync.Mutex
	items []string // "label ops"
	ticks []int64  // per item
	done  int
}

func (l *progressLog) progress(label string, ops int64) (op, done func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = append(l.items, fmt.Sprintf("%s %d", label, ops))
	l.ticks = append(l.ticks, 0)
	k := len(l.ticks) - 1
	return func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.ticks[k]++
		}, func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.done++
		}
}

func TestRunDirectory(t *testing.T) {
	dir := t.TempDir()
	o := tiny()
	var log progressLog
	o.Progress = log.progress
	r, err := Run(context.Background(), dir, o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	abs, _ := filepath.EvalSymlinks(dir)
	if r.Path != abs || r.Sluice || r.Volume != "" || r.Threads != 3 || r.SmallFileCount != 7 ||
		r.BlockSize != 64<<10 || r.BigFileSize != 1<<20+12345 || r.SmallFileSize != 70<<10 {
		t.Errorf("report of a plain directory: %+v", r)
	}
	const bigBlocks, small = 3 * 17, 21 // 1M+12345 is 17 blocks of 64K
	tests := []struct {
		it                *Item
		label             string
		files, ops, bytes int64
		unit, per         string
	}{
		{&r.BigWrite, "Write big file", 3, bigBlocks, 3 * (1<<20 + 12345), "MiB/s", "block"},
		{&r.BigRead, "Read big file", 3, bigBlocks, 3 * (1<<20 + 12345), "MiB/s", "block"},
		{&r.SmallWrite, "Write small file", small, small, small * (70 << 10), "files/s", "file"},
		{&r.SmallRead, "Read small file", small, small, small * (70 << 10), "files/s", "file"},
		{&r.Stat, "Stat file", small, small, 0, "files/s", "stat"},
	}
	var wantLog []string
	for k, tt := range tests {
		it := tt.it
		if it.Label != tt.label || int64(it.Files) != tt.files || it.Ops != tt.ops || it.Bytes != tt.bytes ||
			it.Unit != tt.unit || it.LatencyPer != tt.per {
			t.Errorf("%s: %+v; want files %d, ops %d, bytes %d in %s per %s", tt.label, *it, tt.files, tt.ops, tt.bytes, tt.unit, tt.per)
		}
		for name, v := range map[string]float64{"seconds": it.Seconds, "value": it.Value, "latency": it.LatencyMS,
			"reference": it.Reference, "ratio": it.Ratio} {
			if v <= 0 {
				t.Errorf("%s: %s = %v, want it positive", tt.label, name, v)
			}
		}
		wantLog = append(wantLog, fmt.Sprintf("%s %d", tt.label, tt.ops))
		if k < len(log.ticks) && log.ticks[k] != tt.ops {
			t.Errorf("%s: %d progress ticks, want %d", tt.label, log.ticks[k], tt.ops)
		}
	}
	if fmt.Sprint(log.items) != fmt.Sprint(wantLog) || log.done != len(wantLog) {
		t.Errorf("progress of %q, %d done; want %q, all done", log.items, log.done, wantLog)
	}
	if r.Reference == "" || r.BelowHalf == nil || r.ElapsedSeconds <= 0 {
		t.Errorf("not compared: reference %q, below half %v, elapsed %v", r.Reference, r.BelowHalf, r.ElapsedSeconds)
	}
	leftovers(t, dir)
}

func TestRunInterrupted(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // as Ctrl-C does, before the first write
	r, err := Run(ctx, dir, tiny())
	if err == nil || !strings.Contains(err.Error(), "bench interrupted; removed "+filepath.Join(dir, "__sluice_bench_")) {
		t.Fatalf("interrupted Run: error %v", err)
	}
	if r != nil {
		t.Errorf("interrupted Run returned a report: %+v", r)
	}
	leftovers(t, dir)
}

// TestPattern: each thread's content differs and does not repeat within
// a block.
func TestPattern(t *testing.T) {
	a, b := pattern(1, 4096), pattern(2, 4096)
	if string(a) == string(b) {
		t.Error("two seeds give the same pattern")
	}
	if string(a[:2048]) == string(a[2048:]) {
		t.Error("the pattern repeats within 4 KiB")
	}
	if string(pattern(1, 100)) != string(a[:100]) {
		t.Error("the pattern is not deterministic")
	}
}
