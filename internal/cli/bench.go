package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/bench"
)

// benchOptions are the settings of `sluice bench`: those of the
// measurement, and how to print it.
type benchOptions struct {
	bench.Options
	json bool
}

// benchDefaults returns the settings `sluice bench` runs with when no
// flag is given; they are those of `juicefs bench`.
func benchDefaults() benchOptions {
	return benchOptions{Options: bench.Defaults()}
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
	fl.IntVarP(&o.Threads, "threads", "p", o.Threads, "threads at a time, each with its own files")
	fl.Var(sizeValue{&o.BlockSize, 1 << 20}, "block-size", "size of each write and read of the big files; a plain number is MiB")
	fl.Var(sizeValue{&o.BigFileSize, 1 << 20}, "big-file-size", "size of each thread's big file; a plain number is MiB")
	fl.Var(sizeValue{&o.SmallFileSize, 1 << 10}, "small-file-size", "size of each small file; a plain number is KiB")
	fl.IntVar(&o.SmallFileCount, "small-file-count", o.SmallFileCount, "small files written by each thread")
	fl.BoolVar(&o.DropCaches, "drop-caches", false, "before each read, also drop the whole machine's caches (root only: writes /proc/sys/vm/drop_caches)")
	fl.BoolVar(&o.json, "json", false, "print one JSON object with every figure instead of the table")
	return cmd
}

// runBench measures path with the options o and prints the report.
func runBench(ctx context.Context, out io.Writer, path string, o *benchOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	// Ctrl-C and SIGTERM stop the work; bench.Run removes its directory
	// either way, with the signals still caught so that removing is not
	// cut short.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := o.Options
	opts.Progress = func(label string, ops int64) (op, done func()) {
		bar := newCountBar(label, ops)
		return bar.add, bar.finish
	}
	r, err := bench.Run(ctx, path, opts)
	if err != nil {
		return err
	}
	if o.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	writeBenchReport(out, r)
	return nil
}

// benchShort are the items' names in the verdict, in the order of
// bench.Report.Items.
var benchShort = []string{"big-file write", "read", "small-file write", "read", "stat"}

// benchVerdict is the one-line comparison with the reference figures;
// r.Compare must have run.
func benchVerdict(r *bench.Report) string {
	var b strings.Builder
	b.WriteString("Verdict: ")
	for k, it := range r.Items() {
		switch k {
		case 0:
		case 2, 4:
			b.WriteString("; ")
		default:
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.1fx", benchShort[k], it.Ratio)
	}
	fmt.Fprintf(&b, " of the figures in docs/benchmarks.md (%s)", r.Reference)
	if len(r.BelowHalf) == 0 {
		b.WriteString("; none below half.")
	} else {
		fmt.Fprintf(&b, "; BELOW HALF: %s.", strings.Join(r.BelowHalf, ", "))
	}
	return b.String()
}

// benchHeader describes what was measured where.
func benchHeader(r *bench.Report) string {
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
		b.WriteString("Page cache: dropped for the files read (posix_fadvise) and the machine's (" + bench.DropCachesFile + ")\n")
	} else {
		fmt.Fprintf(&b, "Page cache: dropped for the files read (posix_fadvise), not the machine's (--drop-caches; root: %s, %s writable: %s)\n",
			yes[r.Cache.Root], bench.DropCachesFile, yes[r.Cache.DropCachesWritable])
	}
	return b.String()
}

// benchTable is the figures in the shape of `juicefs bench`'s summary.
func benchTable(r *bench.Report) string {
	rows := [][3]string{{"ITEM", "VALUE", "LATENCY"}}
	for _, it := range r.Items() {
		rows = append(rows, [3]string{it.Label, fmt.Sprintf("%.2f %s", it.Value, it.Unit),
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

// writeBenchReport prints the report for people: header, table, verdict
// and time.
func writeBenchReport(out io.Writer, r *bench.Report) {
	fmt.Fprint(out, benchHeader(r), benchTable(r))
	fmt.Fprintln(out, benchVerdict(r))
	where := "this directory"
	if r.Sluice {
		where = "Sluice volume " + r.Volume
	}
	fmt.Fprintf(out, "Took %.1fs overall on %s, removing the files included.\n", r.ElapsedSeconds, where)
}
