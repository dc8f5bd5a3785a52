package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/control"
	"github.com/sluicefs/sluice/internal/telemetry/stats"
	"github.com/sluicefs/sluice/internal/vfs"
)

type statsOptions struct {
	interval  time.Duration
	schema    string
	verbosity int
	count     int
}

// statsHeaderEvery is how many lines pass between two headers, as in
// dstat.
const statsHeaderEvery = 20

func newStats() *cobra.Command {
	o := statsOptions{interval: time.Second, schema: "ufmco"}
	cmd := &cobra.Command{
		Use:   "stats MOUNTPOINT",
		Short: "Show a mount's live figures, one line per interval",
		Long: `Read the metrics of the mount MOUNTPOINT (a Sluice mount, or any path in
one) from its internal file .stats every --interval seconds and print one
line per interval with the rates of that interval, dstat-style, under a
header repeated every 20 lines. --count N stops after N lines; otherwise
Ctrl-C stops. It is how to find which layer a slow workload waits on:
compare the FUSE latency with the metadata and object storage latencies.

--schema picks the column groups, in the order given:

  u  usage:    cpu (% of one core the mount process used), mem (its
               resident memory), buf (bytes the write buffers of open
               files hold; --buffer-size bounds them); with --verbosity 1
               also cache (bytes in the block cache, memory and disk)
  f  fuse:     ops (requests/s), lat (their average latency, ms), read and
               write (bytes/s applications read and wrote); with
               --verbosity 1 also rdops and wrops (read and write
               requests/s), err (requests/s that failed, ENOENT aside),
               rdlat and wrlat (ms)
  m  meta:     txn (metadata transactions/s), lat (ms), rtry (transactions
               run again after a conflict /s); with --verbosity 1 also wtxn
               (write transactions/s) and wlat (ms)
  c  cache:    hit and miss (block reads/s of applications served by
               the block cache, memory or disk, and those that waited for
               the object store), hit% (hit/(hit+miss)),
               evict (blocks evicted/s); with --verbosity 1 also mem and
               disk (bytes cached in each tier)
  o  object:   get and put (requests/s to object storage), getB and putB
               (bytes/s downloaded and uploaded), err (failed requests/s),
               lat (average latency of all requests, ms); with --verbosity
               1 also head, list and del (requests/s)
  s  staging:  blks and bytes, the blocks staged by --writeback and not
               yet uploaded

Counts and rates are shown with K, M, G (powers of 1000), bytes with K, M,
G (powers of 1024). A figure the mount does not report shows "-": an
older version, a feature it lacks, or a figure that has no event yet (the
mount starts reporting most of them at their first event).`,
		Example: `  sluice stats /mnt/vol                       # usage, fuse, meta, cache, object every second
  sluice stats /mnt/vol --schema fo -v 1      # FUSE and object storage in detail
  sluice stats /mnt/vol --interval 5 --count 12 > stats.txt   # a minute, for a script`,
		Args: exactArgs(1, "MOUNTPOINT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			groups, err := stats.Schema(o.schema, o.verbosity)
			if err != nil {
				return err
			}
			if o.interval <= 0 {
				return fmt.Errorf("stats: --interval must be above 0")
			}
			if o.count < 0 {
				return fmt.Errorf("stats: --count must not be negative")
			}
			m, err := control.Find(args[0])
			if err != nil {
				return fmt.Errorf("stats: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runStats(ctx, cmd.OutOrStdout(), filepath.Join(m.Root, vfs.StatsName), groups, o)
		},
	}
	cmd.Flags().Var(secondsValue{&o.interval}, "interval", "seconds between lines")
	cmd.Flags().StringVar(&o.schema, "schema", o.schema, "column groups: u usage, f fuse, m meta, c cache, o object, s staging")
	cmd.Flags().IntVarP(&o.verbosity, "verbosity", "v", 0, "0 or 1: 1 adds more columns to each group")
	cmd.Flags().IntVar(&o.count, "count", 0, "stop after this many lines (0: run until Ctrl-C)")
	return cmd
}

// runStats prints a line every interval from the metrics file path.
func runStats(ctx context.Context, out io.Writer, path string, groups []stats.Group, o statsOptions) error {
	prev, err := stats.ReadFile(path)
	if err != nil {
		return err
	}
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	for n := 0; o.count == 0 || n < o.count; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		cur, err := stats.ReadFile(path)
		if err != nil {
			return err
		}
		var b bytes.Buffer
		if n%statsHeaderEvery == 0 {
			writeStatsHeader(&b, groups)
		}
		b.WriteString(statsLine(groups, prev, cur))
		b.WriteByte('\n')
		if _, err := out.Write(b.Bytes()); err != nil {
			return err
		}
		prev = cur
	}
	return nil
}

// statsColumnWidth is the width of every column.
const statsColumnWidth = 5

// writeStatsHeader writes the two header lines: the group names over
// dashes, and the column names.
func writeStatsHeader(w io.Writer, groups []stats.Group) {
	var top, names []string
	for _, g := range groups {
		width := len(g.Columns)*(statsColumnWidth+1) - 1
		title := g.Name
		if len(title) > width {
			title = title[:width]
		}
		left := (width - len(title)) / 2
		top = append(top, strings.Repeat("-", left)+title+strings.Repeat("-", width-left-len(title)))
		cells := make([]string, len(g.Columns))
		for i, c := range g.Columns {
			cells[i] = fmt.Sprintf("%*s", statsColumnWidth, c.Name)
		}
		names = append(names, strings.Join(cells, " "))
	}
	fmt.Fprintln(w, strings.Join(top, " "))
	fmt.Fprintln(w, strings.Join(names, "|"))
}

// statsLine formats the figures between two samples.
func statsLine(groups []stats.Group, prev, cur *stats.Sample) string {
	parts := make([]string, len(groups))
	for i, g := range groups {
		cells := make([]string, len(g.Columns))
		for j, c := range g.Columns {
			s := "-"
			if v, ok := c.Value(prev, cur); ok {
				s = formatStat(c.Unit, v)
			}
			cells[j] = fmt.Sprintf("%*s", statsColumnWidth, s)
		}
		parts[i] = strings.Join(cells, " ")
	}
	return strings.Join(parts, "|")
}

// formatStat formats a figure of unit in a column.
func formatStat(unit stats.Unit, v float64) string {
	switch unit {
	case stats.Bytes:
		return formatBytes(v)
	case stats.Millis:
		return formatMillis(v)
	case stats.Percent:
		return formatPercent(v)
	default:
		return formatCount(v)
	}
}

// formatCount formats a count or rate in 5 characters at most, with K, M,
// G, T for powers of 1000.
func formatCount(v float64) string { return formatScaled(v, 1000) }

// formatBytes formats bytes in 5 characters at most, with K, M, G, T for
// powers of 1024.
func formatBytes(v float64) string { return formatScaled(v, 1024) }

func formatScaled(v, base float64) string {
	if v < 0 || math.IsNaN(v) {
		return "-"
	}
	if v < base {
		if v > 0 && v < 10 && v != math.Trunc(v) {
			return fmt.Sprintf("%.1f", v)
		}
		return fmt.Sprintf("%.0f", v)
	}
	for _, unit := range []string{"K", "M", "G", "T", "P"} {
		v /= base
		if v < 9.95 {
			return fmt.Sprintf("%.1f%s", v, unit)
		}
		if v < 999.5 {
			return fmt.Sprintf("%.0f%s", v, unit)
		}
	}
	return fmt.Sprintf("%.0fE", v/base)
}

// formatMillis formats a latency in milliseconds.
func formatMillis(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 0.9995:
		return fmt.Sprintf("%.3f", v)
	case v < 9.995:
		return fmt.Sprintf("%.2f", v)
	case v < 99.95:
		return fmt.Sprintf("%.1f", v)
	case v < 99999.5:
		return fmt.Sprintf("%.0f", v)
	}
	return formatCount(v)
}

// formatPercent formats a percentage.
func formatPercent(v float64) string {
	if v < 999.95 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}
