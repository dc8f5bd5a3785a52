package bench

import (
	"fmt"
	"strings"
	"time"
)

// Cache says what was done about the page cache before reads.
type Cache struct {
	// Root is whether bench ran as root.
	Root bool `json:"root"`
	// DropCachesWritable is whether it could write /proc/sys/vm/drop_caches.
	DropCachesWritable bool `json:"drop_caches_writable"`
	// DroppedAll is whether it dropped the machine's caches (--drop-caches);
	// the files' own page cache is always dropped with posix_fadvise.
	DroppedAll bool `json:"dropped_all"`
}

// Item is the outcome of one measured item.
type Item struct {
	// Files is the number of files the item went through.
	Files int `json:"files"`
	// Ops counts the blocks (big files), files or stats measured.
	Ops int64 `json:"ops"`
	// Bytes is the data written or read; 0 for stats.
	Bytes int64 `json:"bytes"`
	// Seconds is the wall time of the item, all threads together.
	Seconds float64 `json:"seconds"`
	// Value is the throughput, in Unit.
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// LatencyMS is the mean time of one op as a thread saw it, in
	// milliseconds per LatencyPer.
	LatencyMS  float64 `json:"latency_ms"`
	LatencyPer string  `json:"latency_per"`
	// Reference is the value measured on the reference machine, and
	// Ratio is Value over it.
	Reference float64 `json:"reference"`
	Ratio     float64 `json:"ratio"`

	// Label names the item, as "Write big file"; Report.Items sets it.
	Label string `json:"-"`

	busy time.Duration // the threads' times, summed
}

// Report is everything a run measured. Its JSON form is what `sluice
// bench --json` prints.
type Report struct {
	Path       string `json:"path"`
	Sluice     bool   `json:"sluice_mount"`
	Volume     string `json:"volume,omitempty"`
	MountPoint string `json:"mount_point,omitempty"`
	FSType     string `json:"fs_type,omitempty"`
	Source     string `json:"source,omitempty"`

	Threads        int   `json:"threads"`
	BlockSize      int64 `json:"block_size"`
	BigFileSize    int64 `json:"big_file_size"`
	SmallFileSize  int64 `json:"small_file_size"`
	SmallFileCount int   `json:"small_file_count"`
	Cache          Cache `json:"page_cache"`

	BigWrite   Item `json:"big_write"`
	BigRead    Item `json:"big_read"`
	SmallWrite Item `json:"small_write"`
	SmallRead  Item `json:"small_read"`
	Stat       Item `json:"stat"`

	// Reference describes the figures compared with, and BelowHalf names
	// the items below half of theirs.
	Reference      string   `json:"reference"`
	BelowHalf      []string `json:"below_half"`
	ElapsedSeconds float64  `json:"elapsed_seconds"`
}

// Items returns the items in the order they run, with their labels set.
func (r *Report) Items() []*Item {
	set := func(it *Item, label string) *Item {
		it.Label = label
		return it
	}
	return []*Item{
		set(&r.BigWrite, "Write big file"),
		set(&r.BigRead, "Read big file"),
		set(&r.SmallWrite, "Write small file"),
		set(&r.SmallRead, "Read small file"),
		set(&r.Stat, "Stat file"),
	}
}

// record fills it from what a phase measured: ops of per ("block",
// "file" or "stat"), in files files. Blocks give a throughput in MiB/s,
// the others in files per second.
func (it *Item) record(files int, ops, bytes int64, wall, busy time.Duration, per string) {
	it.Files, it.Ops, it.Bytes, it.busy = files, ops, bytes, busy
	it.Seconds = wall.Seconds()
	secs := max(it.Seconds, 1e-9)
	if per == "block" {
		it.Value, it.Unit = float64(bytes)/(1<<20)/secs, "MiB/s"
	} else {
		it.Value, it.Unit = float64(files)/secs, "files/s"
	}
	if ops > 0 {
		it.LatencyMS = busy.Seconds() * 1000 / float64(ops)
	}
	it.LatencyPer = per
}

// Reference holds the figures of one `sluice bench` run in
// docs/benchmarks.md, section "`sluice bench`", with default sizes.
type Reference struct {
	Threads                     int
	BigWrite, BigRead           float64 // MiB/s
	SmallWrite, SmallRead, Stat float64 // files/s
}

// ReferenceSetup names the reference machine and volume.
const ReferenceSetup = "2 cores, local-directory bucket, SQLite"

// references are the medians measured on the reference machine (see
// docs/benchmarks.md, which must show the same figures).
var references = []Reference{
	{Threads: 1, BigWrite: 525.6, BigRead: 1234.8, SmallWrite: 779.0, SmallRead: 727.1, Stat: 14853.7},
	{Threads: 4, BigWrite: 449.9, BigRead: 1218.3, SmallWrite: 626.9, SmallRead: 1119.3, Stat: 16211.4},
}

// ReferenceFor returns the reference run whose thread count is closest
// to threads (the smaller one of two as close).
func ReferenceFor(threads int) Reference {
	best := references[0]
	dist := func(r Reference) int { return max(r.Threads-threads, threads-r.Threads) }
	for _, r := range references[1:] {
		if dist(r) < dist(best) {
			best = r
		}
	}
	return best
}

// Compare sets each item's Reference and Ratio from ref, describes ref
// in r.Reference, and names in r.BelowHalf the items below half of
// their reference, by their labels in lower case. Run compares with
// ReferenceFor(r.Threads).
func (r *Report) Compare(ref Reference) {
	refs := []float64{ref.BigWrite, ref.BigRead, ref.SmallWrite, ref.SmallRead, ref.Stat}
	r.Reference = fmt.Sprintf("-p %d, measured on %s", ref.Threads, ReferenceSetup)
	r.BelowHalf = []string{}
	for k, it := range r.Items() {
		it.Reference = refs[k]
		it.Ratio = 0
		if refs[k] > 0 {
			it.Ratio = it.Value / refs[k]
		}
		if it.Ratio < 0.5 {
			r.BelowHalf = append(r.BelowHalf, strings.ToLower(it.Label))
		}
	}
}
