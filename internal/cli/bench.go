package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/sluicefs/sluice/internal/mountinfo"
)

// benchOptions are the settings of `sluice bench`.
type benchOptions struct {
	threads        int
	blockSize      int64
	bigFileSize    int64
	smallFileSize  int64
	smallFileCount int
	dropCaches     bool
	json           bool
	// dropFile is the file --drop-caches writes: dropCachesFile, or
	// another in tests.
	dropFile string
}

// benchDefaults returns the settings `sluice bench` runs with when no
// flag is given; they are those of `juicefs bench`.
func benchDefaults() benchOptions {
	return benchOptions{threads: 1, blockSize: 1 << 20, bigFileSize: 1 << 30,
		smallFileSize: 128 << 10, smallFileCount: 100, dropFile: dropCachesFile}
}

func newBench() *cobra.Command {
	o := benchDefaults()
	cmd := &cobra.Command{
		Use:   "bench [flags] PATH",
		Short: "Measure the performance of a mounted volume (or any directory)",
		Long: `Measure the performance of a mounted Sluice volume, or of any directory,
in a fresh directory PATH/__sluice_bench_* that it removes at the end, also
when interrupted. Each of --threads threads:

  - writes one file of --big-file-size in writes of --block-size, fsyncs and
    closes it, then reads it back in reads of --block-size;
  - writes --small-file-count files of --small-file-size, then reads them;
  - stats each of its small files.

Before each read, the page cache of the files to read is dropped with
posix_fadvise(POSIX_FADV_DONTNEED); --drop-caches (root only) also drops the
whole machine's page, dentry and inode caches. A mount's own block cache is
not dropped: reads measure what an application reading files just written
sees.

It prints throughput and latency per item and compares them with the
figures measured on a reference machine (docs/benchmarks.md), flagging any
item below half of its reference. --json prints one JSON object instead.`,
		Example: `  sluice bench /mnt/vol
  sluice bench /mnt/vol -p 4 --big-file-size 256M --small-file-count 1000
  sluice bench /mnt/vol --json > bench.json`,
		Args: exactArgs(1, "PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBench(cmd.Context(), cmd.OutOrStdout(), args[0], &o)
		},
	}
	fl := cmd.Flags()
	fl.IntVarP(&o.threads, "threads", "p", o.threads, "threads at a time, each with its own files")
	fl.Var(sizeValue{&o.blockSize, 1 << 20}, "block-size", "size of each write and read of the big files; a plain number is MiB")
	fl.Var(sizeValue{&o.bigFileSize, 1 << 20}, "big-file-size", "size of each thread's big file; a plain number is MiB")
	fl.Var(sizeValue{&o.smallFileSize, 1 << 10}, "small-file-size", "size of each small file; a plain number is KiB")
	fl.IntVar(&o.smallFileCount, "small-file-count", o.smallFileCount, "small files written by each thread")
	fl.BoolVar(&o.dropCaches, "drop-caches", false, "before each read, also drop the whole machine's caches (root only: writes /proc/sys/vm/drop_caches)")
	fl.BoolVar(&o.json, "json", false, "print one JSON object with every figure instead of the table")
	return cmd
}

// validate checks the options before anything is written.
func (o *benchOptions) validate() error {
	switch {
	case o.threads < 1:
		return fmt.Errorf("--threads %d: must be at least 1", o.threads)
	case o.blockSize < 1 || o.blockSize > 1<<30:
		return fmt.Errorf("--block-size %d: must be from 1 byte to 1G", o.blockSize)
	case o.bigFileSize < 1:
		return fmt.Errorf("--big-file-size %d: must be at least 1 byte", o.bigFileSize)
	case o.smallFileSize < 1:
		return fmt.Errorf("--small-file-size %d: must be at least 1 byte", o.smallFileSize)
	case o.smallFileCount < 1:
		return fmt.Errorf("--small-file-count %d: must be at least 1", o.smallFileCount)
	}
	return nil
}

// benchDir checks that path is an existing directory and returns it
// absolute, with symbolic links resolved.
func benchDir(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%s does not exist", path)
	}
	if err != nil {
		return "", fmt.Errorf("bench %s: %w", path, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("bench %s: %w", path, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", path)
	}
	return abs, nil
}

// dropCachesFile is where root drops the machine's caches.
const dropCachesFile = "/proc/sys/vm/drop_caches"

// canWrite reports whether this process may write the file at path
// (dropCachesFile); opening it for writing drops nothing.
func canWrite(path string) bool {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

func runBench(ctx context.Context, out io.Writer, path string, o *benchOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := o.validate(); err != nil {
		return err
	}
	dir, err := benchDir(path)
	if err != nil {
		return err
	}
	cache := benchCache{Root: os.Geteuid() == 0, DropCachesWritable: canWrite(o.dropFile), DroppedAll: o.dropCaches}
	if o.dropCaches && !cache.DropCachesWritable {
		return fmt.Errorf("--drop-caches: cannot write %s (it needs root, and a /proc/sys that is not read-only)", o.dropFile)
	}
	r := &benchReport{Path: dir, Threads: o.threads, BlockSize: o.blockSize, BigFileSize: o.bigFileSize,
		SmallFileSize: o.smallFileSize, SmallFileCount: o.smallFileCount, Cache: cache}
	if m, ok := mountinfo.Containing(dir); ok {
		r.MountPoint, r.FSType, r.Source = m.Point, m.FSType, m.Source
		r.Volume, r.Sluice = m.SluiceVolume()
	}

	// Ctrl-C and SIGTERM stop the work; the directory is removed either
	// way, with the signals still caught so that removing is not cut short.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	tmp, err := os.MkdirTemp(dir, "__sluice_bench_")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	runErr := benchRun(ctx, tmp, o, r)
	rmErr := os.RemoveAll(tmp)
	r.ElapsedSeconds = time.Since(start).Seconds()
	switch {
	case runErr != nil && ctx.Err() != nil:
		return fmt.Errorf("bench interrupted; removed %s: %w", tmp, errors.Join(ctx.Err(), rmErr))
	case runErr != nil:
		return errors.Join(runErr, rmErr)
	case rmErr != nil:
		return fmt.Errorf("bench: remove %s: %w", tmp, rmErr)
	}
	r.compare(benchReferenceFor(o.threads))
	if o.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	r.write(out)
	return nil
}

// benchCache says what was done about the page cache before reads.
type benchCache struct {
	// Root is whether bench ran as root.
	Root bool `json:"root"`
	// DropCachesWritable is whether it could write /proc/sys/vm/drop_caches.
	DropCachesWritable bool `json:"drop_caches_writable"`
	// DroppedAll is whether it dropped the machine's caches (--drop-caches);
	// the files' own page cache is always dropped with posix_fadvise.
	DroppedAll bool `json:"dropped_all"`
}

// benchItem is the outcome of one measured item.
type benchItem struct {
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

	label, short string
	busy         time.Duration // the threads' times, summed
}

// benchReport is everything `sluice bench` measured.
type benchReport struct {
	Path       string `json:"path"`
	Sluice     bool   `json:"sluice_mount"`
	Volume     string `json:"volume,omitempty"`
	MountPoint string `json:"mount_point,omitempty"`
	FSType     string `json:"fs_type,omitempty"`
	Source     string `json:"source,omitempty"`

	Threads        int        `json:"threads"`
	BlockSize      int64      `json:"block_size"`
	BigFileSize    int64      `json:"big_file_size"`
	SmallFileSize  int64      `json:"small_file_size"`
	SmallFileCount int        `json:"small_file_count"`
	Cache          benchCache `json:"page_cache"`

	BigWrite   benchItem `json:"big_write"`
	BigRead    benchItem `json:"big_read"`
	SmallWrite benchItem `json:"small_write"`
	SmallRead  benchItem `json:"small_read"`
	Stat       benchItem `json:"stat"`

	// Reference describes the figures compared with, and BelowHalf names
	// the items below half of theirs.
	Reference      string   `json:"reference"`
	BelowHalf      []string `json:"below_half"`
	ElapsedSeconds float64  `json:"elapsed_seconds"`
}

// items returns the items in the order they run, labelled.
func (r *benchReport) items() []*benchItem {
	set := func(it *benchItem, label, short string) *benchItem {
		it.label, it.short = label, short
		return it
	}
	return []*benchItem{
		set(&r.BigWrite, "Write big file", "big-file write"),
		set(&r.BigRead, "Read big file", "read"),
		set(&r.SmallWrite, "Write small file", "small-file write"),
		set(&r.SmallRead, "Read small file", "read"),
		set(&r.Stat, "Stat file", "stat"),
	}
}

// record fills it from what a phase measured: ops of per ("block",
// "file" or "stat"), in files files. Blocks give a throughput in MiB/s,
// the others in files per second.
func (it *benchItem) record(files int, ops, bytes int64, wall, busy time.Duration, per string) {
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

// benchRun runs the five items in dir and records them in r.
func benchRun(ctx context.Context, dir string, o *benchOptions, r *benchReport) error {
	n := o.threads
	bigBlocks := (o.bigFileSize + o.blockSize - 1) / o.blockSize
	bigName := func(t int) string { return filepath.Join(dir, fmt.Sprintf("big.%d", t)) }
	smallName := func(t, i int) string { return filepath.Join(dir, fmt.Sprintf("small.%d.%d", t, i)) }
	smallNames := func() []string {
		var names []string
		for t := range n {
			for i := range o.smallFileCount {
				names = append(names, smallName(t, i))
			}
		}
		return names
	}
	bigNames := func() []string {
		var names []string
		for t := range n {
			names = append(names, bigName(t))
		}
		return names
	}
	// Each thread writes its own content, which does not compress.
	data := make([][]byte, n)
	for t := range data {
		data[t] = pattern(byte(t+1), int(o.blockSize))
	}
	small := int64(n) * int64(o.smallFileCount)

	phases := []struct {
		it    *benchItem
		ops   int64
		drop  func() []string // files whose cache to drop first
		per   string
		files int
		bytes int64
		fn    func(ctx context.Context, t int, tick func()) error
	}{
		{it: &r.BigWrite, ops: int64(n) * bigBlocks, per: "block", files: n, bytes: int64(n) * o.bigFileSize,
			fn: func(ctx context.Context, t int, tick func()) error {
				return benchWrite(ctx, bigName(t), data[t], o.bigFileSize, true, tick)
			}},
		{it: &r.BigRead, ops: int64(n) * bigBlocks, drop: bigNames, per: "block", files: n, bytes: int64(n) * o.bigFileSize,
			fn: func(ctx context.Context, t int, tick func()) error {
				return benchRead(ctx, bigName(t), data[t], o.bigFileSize, tick)
			}},
		{it: &r.SmallWrite, ops: small, per: "file", files: int(small), bytes: small * o.smallFileSize,
			fn: func(ctx context.Context, t int, tick func()) error {
				for i := range o.smallFileCount {
					if err := benchWrite(ctx, smallName(t, i), data[t], o.smallFileSize, false, nil); err != nil {
						return err
					}
					tick()
				}
				return nil
			}},
		{it: &r.SmallRead, ops: small, drop: smallNames, per: "file", files: int(small), bytes: small * o.smallFileSize,
			fn: func(ctx context.Context, t int, tick func()) error {
				for i := range o.smallFileCount {
					if err := benchRead(ctx, smallName(t, i), data[t], o.smallFileSize, nil); err != nil {
						return err
					}
					tick()
				}
				return nil
			}},
		{it: &r.Stat, ops: small, per: "stat", files: int(small),
			fn: func(ctx context.Context, t int, tick func()) error {
				for i := range o.smallFileCount {
					if err := ctx.Err(); err != nil {
						return err
					}
					if _, err := os.Lstat(smallName(t, i)); err != nil {
						return err
					}
					tick()
				}
				return nil
			}},
	}
	labels := r.items()
	for k, p := range phases {
		if p.drop != nil {
			all := ""
			if o.dropCaches {
				all = o.dropFile
			}
			if err := dropCache(p.drop(), all); err != nil {
				return err
			}
		}
		bar := newCountBar(labels[k].label, p.ops)
		wall, busy, err := benchPhase(ctx, n, func(ctx context.Context, t int) error {
			return p.fn(ctx, t, bar.add)
		})
		bar.finish()
		if err != nil {
			return fmt.Errorf("%s: %w", strings.ToLower(labels[k].label), err)
		}
		p.it.record(p.files, p.ops, p.bytes, wall, busy, p.per)
	}
	return nil
}

// benchPhase runs fn(t) for t in [0, threads) at once and returns the wall
// time and the threads' times summed.
func benchPhase(ctx context.Context, threads int, fn func(ctx context.Context, t int) error) (wall, busy time.Duration, err error) {
	times := make([]time.Duration, threads)
	g, gctx := errgroup.WithContext(ctx)
	start := time.Now()
	for t := range threads {
		g.Go(func() error {
			s := time.Now()
			err := fn(gctx, t)
			times[t] = time.Since(s)
			return err
		})
	}
	err = g.Wait()
	wall = time.Since(start)
	for _, d := range times {
		busy += d
	}
	return wall, busy, err
}

// benchWrite creates name and writes size bytes to it, cycling through
// block, one write per block; tick, when not nil, is called after each.
// With sync it fsyncs the file before closing it.
func benchWrite(ctx context.Context, name string, block []byte, size int64, sync bool, tick func()) error {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	for off := int64(0); off < size; off += int64(len(block)) {
		if err := ctx.Err(); err != nil {
			f.Close()
			return err
		}
		if _, err := f.Write(block[:min(int64(len(block)), size-off)]); err != nil {
			f.Close()
			return err
		}
		if tick != nil {
			tick()
		}
	}
	if sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// benchRead reads name back in reads of len(block) bytes and checks that
// it holds what benchWrite wrote.
func benchRead(ctx context.Context, name string, block []byte, size int64, tick func()) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, len(block))
	for off := int64(0); off < size; off += int64(len(block)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		want := block[:min(int64(len(block)), size-off)]
		if _, err := io.ReadFull(f, buf[:len(want)]); err != nil {
			return fmt.Errorf("read %s at %d: %w", name, off, err)
		}
		if !bytes.Equal(buf[:len(want)], want) {
			return fmt.Errorf("read %s at %d: the data differs from what was written", name, off)
		}
		if tick != nil {
			tick()
		}
	}
	return nil
}

// dropCache drops the page cache of the named files with
// posix_fadvise(POSIX_FADV_DONTNEED), and, when all names the
// drop_caches file, all the machine's caches.
func dropCache(names []string, all string) error {
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
		if err != nil {
			return fmt.Errorf("posix_fadvise %s: %w", name, err)
		}
	}
	if all == "" {
		return nil
	}
	unix.Sync()
	if err := os.WriteFile(all, []byte("3\n"), 0); err != nil {
		return fmt.Errorf("--drop-caches: %w", err)
	}
	return nil
}

// benchReference holds the figures of one `sluice bench` run in
// docs/benchmarks.md, section "`sluice bench`", with default sizes.
type benchReference struct {
	threads                     int
	bigWrite, bigRead           float64 // MiB/s
	smallWrite, smallRead, stat float64 // files/s
}

// benchSetup names the reference machine and volume.
const benchSetup = "2 cores, local-directory bucket, SQLite"

// benchReferences are the medians measured on the reference machine (see
// docs/benchmarks.md, which must show the same figures).
var benchReferences = []benchReference{
	{threads: 1, bigWrite: 525.6, bigRead: 1234.8, smallWrite: 779.0, smallRead: 727.1, stat: 14853.7},
	{threads: 4, bigWrite: 449.9, bigRead: 1218.3, smallWrite: 626.9, smallRead: 1119.3, stat: 16211.4},
}

// benchReferenceFor returns the reference run whose thread count is
// closest to threads (the smaller one of two as close).
func benchReferenceFor(threads int) benchReference {
	best := benchReferences[0]
	dist := func(r benchReference) int { return max(r.threads-threads, threads-r.threads) }
	for _, r := range benchReferences[1:] {
		if dist(r) < dist(best) {
			best = r
		}
	}
	return best
}

// compare sets each item's reference and ratio, and notes the items
// below half of their reference.
func (r *benchReport) compare(ref benchReference) {
	refs := []float64{ref.bigWrite, ref.bigRead, ref.smallWrite, ref.smallRead, ref.stat}
	r.Reference = fmt.Sprintf("-p %d, measured on %s", ref.threads, benchSetup)
	r.BelowHalf = []string{}
	for k, it := range r.items() {
		it.Reference = refs[k]
		it.Ratio = 0
		if refs[k] > 0 {
			it.Ratio = it.Value / refs[k]
		}
		if it.Ratio < 0.5 {
			r.BelowHalf = append(r.BelowHalf, strings.ToLower(it.label))
		}
	}
}

// verdict is the one-line comparison with the reference figures; compare
// must have run.
func (r *benchReport) verdict() string {
	var b strings.Builder
	b.WriteString("Verdict: ")
	for k, it := range r.items() {
		switch k {
		case 0:
		case 2, 4:
			b.WriteString("; ")
		default:
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.1fx", it.short, it.Ratio)
	}
	fmt.Fprintf(&b, " of the figures in docs/benchmarks.md (%s)", r.Reference)
	if len(r.BelowHalf) == 0 {
		b.WriteString("; none below half.")
	} else {
		fmt.Fprintf(&b, "; BELOW HALF: %s.", strings.Join(r.BelowHalf, ", "))
	}
	return b.String()
}

// header describes what was measured where.
func (r *benchReport) header() string {
	var b strings.Builder
	switch {
	case r.Sluice:
		fmt.Fprintf(&b, "Benchmark of %s: Sluice volume %q (mounted at %s)\n", r.Path, r.Volume, r.MountPoint)
	case r.FSType != "":
		fmt.Fprintf(&b, "Benchmark of %s: not a Sluice mount (%s file system %s mounted at %s)\n", r.Path, r.FSType, r.Source, r.MountPoint)
	default:
		fmt.Fprintf(&b, "Benchmark of %s: not a Sluice mount\n", r.Path)
	}
	threads := "threads"
	if r.Threads == 1 {
		threads = "thread"
	}
	fmt.Fprintf(&b, "%d %s; big files: %d x %s in %s blocks; small files: %d x %d x %s\n", r.Threads, threads,
		r.Threads, formatSize(r.BigFileSize), formatSize(r.BlockSize), r.Threads, r.SmallFileCount, formatSize(r.SmallFileSize))
	yes := map[bool]string{true: "yes", false: "no"}
	if r.Cache.DroppedAll {
		b.WriteString("Page cache: dropped for the files read (posix_fadvise) and the machine's (" + dropCachesFile + ")\n")
	} else {
		fmt.Fprintf(&b, "Page cache: dropped for the files read (posix_fadvise), not the machine's (--drop-caches; root: %s, %s writable: %s)\n",
			yes[r.Cache.Root], dropCachesFile, yes[r.Cache.DropCachesWritable])
	}
	return b.String()
}

// table is the figures in the shape of `juicefs bench`'s summary.
func (r *benchReport) table() string {
	rows := [][3]string{{"ITEM", "VALUE", "LATENCY"}}
	for _, it := range r.items() {
		rows = append(rows, [3]string{it.label, fmt.Sprintf("%.2f %s", it.Value, it.Unit),
			benchMS(it.LatencyMS) + " ms/" + it.LatencyPer})
	}
	var w [3]int
	for _, row := range rows {
		for c, s := range row {
			w[c] = max(w[c], len(s))
		}
	}
	line := fmt.Sprintf("+-%s-+-%s-+-%s-+\n", strings.Repeat("-", w[0]), strings.Repeat("-", w[1]), strings.Repeat("-", w[2]))
	var b strings.Builder
	b.WriteString(line)
	for k, row := range rows {
		fmt.Fprintf(&b, "| %-*s | %*s | %*s |\n", w[0], row[0], w[1], row[1], w[2], row[2])
		if k == 0 {
			b.WriteString(line)
		}
	}
	b.WriteString(line)
	return b.String()
}

// benchMS formats milliseconds with three significant digits or more.
func benchMS(ms float64) string {
	switch {
	case ms >= 1:
		return fmt.Sprintf("%.2f", ms)
	case ms >= 0.1:
		return fmt.Sprintf("%.3f", ms)
	default:
		return fmt.Sprintf("%.4f", ms)
	}
}

// write prints the report for people: header, table, verdict and time.
func (r *benchReport) write(out io.Writer) {
	fmt.Fprint(out, r.header(), r.table())
	fmt.Fprintln(out, r.verdict())
	where := "this directory"
	if r.Sluice {
		where = "Sluice volume " + r.Volume
	}
	fmt.Fprintf(out, "Took %.1fs overall on %s, removing the files included.\n", r.ElapsedSeconds, where)
}
