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

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/control"
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
			groups, err := statsSchema(o.schema, o.verbosity)
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
func runStats(ctx context.Context, out io.Writer, path string, groups []statsGroup, o statsOptions) error {
	prev, err := readStatsSample(path)
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
		cur, err := readStatsSample(path)
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

// statsSample is one reading of a mount's metrics.
type statsSample struct {
	at       time.Time
	families map[string][]statSeries
}

// statSeries is one series of a family: a counter's, gauge's or untyped
// value, or a histogram's or summary's count and sum.
type statSeries struct {
	labels     map[string]string
	value      float64
	count, sum float64
}

// readStatsSample reads the metrics file at path.
func readStatsSample(path string) (*statsSample, error) {
	at := time.Now()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("stats: read the metrics of the mount (is it a Sluice mount?): %w", err)
	}
	s, err := parseStatsSample(b, at)
	if err != nil {
		return nil, fmt.Errorf("stats: %s: %w", path, err)
	}
	return s, nil
}

// parseStatsSample parses metrics in the Prometheus text format, read at
// time at.
func parseStatsSample(text []byte, at time.Time) (*statsSample, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	s := &statsSample{at: at, families: make(map[string][]statSeries, len(fams))}
	for name, mf := range fams {
		series := make([]statSeries, 0, len(mf.GetMetric()))
		for _, m := range mf.GetMetric() {
			ss := statSeries{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				ss.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Counter != nil:
				ss.value = m.GetCounter().GetValue()
			case m.Gauge != nil:
				ss.value = m.GetGauge().GetValue()
			case m.Untyped != nil:
				ss.value = m.GetUntyped().GetValue()
			case m.Histogram != nil:
				ss.count, ss.sum = float64(m.GetHistogram().GetSampleCount()), m.GetHistogram().GetSampleSum()
			case m.Summary != nil:
				ss.count, ss.sum = float64(m.GetSummary().GetSampleCount()), m.GetSummary().GetSampleSum()
			}
			series = append(series, ss)
		}
		s.families[name] = series
	}
	return s, nil
}

// statField is what value reads of a series.
type statField int

const (
	fieldValue statField = iota // a counter's, gauge's or untyped value
	fieldCount                  // a histogram's or summary's count
	fieldSum                    // a histogram's or summary's sum
)

// value returns the sum of field over the series of family whose labels
// match the name, value pairs of labels, and whether the family has any
// such series.
func (s *statsSample) value(family string, field statField, labels ...string) (float64, bool) {
	if s == nil {
		return 0, false
	}
	sum, found := 0.0, false
	for _, ss := range s.families[family] {
		if !ss.matches(labels) {
			continue
		}
		found = true
		switch field {
		case fieldValue:
			sum += ss.value
		case fieldCount:
			sum += ss.count
		case fieldSum:
			sum += ss.sum
		}
	}
	return sum, found
}

// matches reports whether the series has the labels of the name, value
// pairs.
func (ss *statSeries) matches(pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		if v, ok := ss.labels[pairs[i]]; !ok || v != pairs[i+1] {
			return false
		}
	}
	return true
}

// statFn computes one figure from two samples; false means "-".
type statFn func(prev, cur *statsSample) (float64, bool)

// statsColumn is one column.
type statsColumn struct {
	name   string
	value  statFn
	format func(float64) string
}

// statsGroup is the columns of one schema letter.
type statsGroup struct {
	name string
	cols []statsColumn
}

// statsColumnWidth is the width of every column.
const statsColumnWidth = 5

// statSeconds returns the time between two samples.
func statSeconds(prev, cur *statsSample) float64 { return cur.at.Sub(prev.at).Seconds() }

// statDelta returns how much a counter grew between two samples. A
// series the first sample lacks counts from 0 (the mount creates series
// at their first event); false when the second sample lacks it, or it
// went back (another process answers now).
func statDelta(prev, cur *statsSample, family string, field statField, labels ...string) (float64, bool) {
	b, ok := cur.value(family, field, labels...)
	a, _ := prev.value(family, field, labels...)
	if !ok || b < a {
		return 0, false
	}
	return b - a, true
}

// statRate is a counter's growth per second.
func statRate(family string, field statField, labels ...string) statFn {
	return func(prev, cur *statsSample) (float64, bool) {
		d, ok := statDelta(prev, cur, family, field, labels...)
		dt := statSeconds(prev, cur)
		if !ok || dt <= 0 {
			return 0, false
		}
		return d / dt, true
	}
}

// statGauge is a gauge's value in the newer sample.
func statGauge(family string, labels ...string) statFn {
	return func(_, cur *statsSample) (float64, bool) { return cur.value(family, fieldValue, labels...) }
}

// statAvgMillis is the average, in milliseconds, of the observations a
// histogram of seconds got between two samples; 0 without any.
func statAvgMillis(family string, labels ...string) statFn {
	return func(prev, cur *statsSample) (float64, bool) {
		n, ok1 := statDelta(prev, cur, family, fieldCount, labels...)
		s, ok2 := statDelta(prev, cur, family, fieldSum, labels...)
		if !ok1 || !ok2 {
			return 0, false
		}
		if n == 0 {
			return 0, true
		}
		return 1000 * s / n, true
	}
}

// statScaled multiplies f's figure by k.
func statScaled(f statFn, k float64) statFn {
	return func(prev, cur *statsSample) (float64, bool) {
		v, ok := f(prev, cur)
		return v * k, ok
	}
}

const (
	famFuseOps      = "sluice_fuse_ops_duration_seconds"
	famFuseErrors   = "sluice_fuse_ops_errors_total"
	famFuseRead     = "sluice_fuse_read_bytes_total"
	famFuseWritten  = "sluice_fuse_written_bytes_total"
	famMetaTx       = "sluice_meta_transaction_duration_seconds"
	famMetaRestarts = "sluice_meta_transaction_restarts_total"
	famObjRequests  = "sluice_object_requests_total"
	famObjErrors    = "sluice_object_request_errors_total"
	famObjBytes     = "sluice_object_bytes_total"
	famObjDuration  = "sluice_object_request_duration_seconds"
	famCacheHits    = "sluice_blockcache_hits_total"
	famCacheMisses  = "sluice_blockcache_misses_total"
	famCacheEvicted = "sluice_blockcache_evictions_total"
	famCacheBytes   = "sluice_blockcache_bytes"
	famBufferUsed   = "sluice_buffer_used_bytes"
	famStagingBlks  = "sluice_staging_blocks"
	famStagingBytes = "sluice_staging_bytes"
	famCPU          = "process_cpu_seconds_total"
	famRSS          = "process_resident_memory_bytes"
)

// cacheMisses is the block reads per second that waited for the object
// store.
func cacheMisses(prev, cur *statsSample) (float64, bool) {
	return statRate(famCacheMisses, fieldValue)(prev, cur)
}

// cacheHitRatio is hits/(hits+misses) in percent; 0 without reads.
func cacheHitRatio(prev, cur *statsSample) (float64, bool) {
	h, ok1 := statRate(famCacheHits, fieldValue)(prev, cur)
	m, ok2 := cacheMisses(prev, cur)
	if !ok1 || !ok2 {
		return 0, false
	}
	if h+m == 0 {
		return 0, true
	}
	return 100 * h / (h + m), true
}

// statsSchema returns the column groups of schema's letters.
func statsSchema(schema string, verbosity int) ([]statsGroup, error) {
	if verbosity != 0 && verbosity != 1 {
		return nil, fmt.Errorf("stats: --verbosity must be 0 or 1, not %d", verbosity)
	}
	if schema == "" {
		return nil, fmt.Errorf("stats: --schema is empty; use letters of ufmcos")
	}
	v1 := verbosity >= 1
	var groups []statsGroup
	seen := map[rune]bool{}
	for _, l := range schema {
		if seen[l] {
			continue
		}
		seen[l] = true
		var g statsGroup
		switch l {
		case 'u':
			g = statsGroup{"usage", []statsColumn{
				{"cpu", statScaled(statRate(famCPU, fieldValue), 100), formatPercent},
				{"mem", statGauge(famRSS), formatBytes},
				{"buf", statGauge(famBufferUsed), formatBytes},
			}}
			if v1 {
				g.cols = append(g.cols, statsColumn{"cache", statGauge(famCacheBytes), formatBytes})
			}
		case 'f':
			g = statsGroup{"fuse", []statsColumn{
				{"ops", statRate(famFuseOps, fieldCount), formatCount},
				{"lat", statAvgMillis(famFuseOps), formatMillis},
				{"read", statRate(famFuseRead, fieldValue), formatBytes},
				{"write", statRate(famFuseWritten, fieldValue), formatBytes},
			}}
			if v1 {
				g.cols = append(g.cols,
					statsColumn{"rdops", statRate(famFuseOps, fieldCount, "method", "read"), formatCount},
					statsColumn{"wrops", statRate(famFuseOps, fieldCount, "method", "write"), formatCount},
					statsColumn{"err", statRate(famFuseErrors, fieldValue), formatCount},
					statsColumn{"rdlat", statAvgMillis(famFuseOps, "method", "read"), formatMillis},
					statsColumn{"wrlat", statAvgMillis(famFuseOps, "method", "write"), formatMillis})
			}
		case 'm':
			g = statsGroup{"meta", []statsColumn{
				{"txn", statRate(famMetaTx, fieldCount), formatCount},
				{"lat", statAvgMillis(famMetaTx), formatMillis},
				{"rtry", statRate(famMetaRestarts, fieldValue), formatCount},
			}}
			if v1 {
				g.cols = append(g.cols,
					statsColumn{"wtxn", statRate(famMetaTx, fieldCount, "kind", "write"), formatCount},
					statsColumn{"wlat", statAvgMillis(famMetaTx, "kind", "write"), formatMillis})
			}
		case 'c':
			g = statsGroup{"cache", []statsColumn{
				{"hit", statRate(famCacheHits, fieldValue), formatCount},
				{"miss", cacheMisses, formatCount},
				{"hit%", cacheHitRatio, formatPercent},
				{"evict", statRate(famCacheEvicted, fieldValue), formatCount},
			}}
			if v1 {
				g.cols = append(g.cols,
					statsColumn{"mem", statGauge(famCacheBytes, "tier", "memory"), formatBytes},
					statsColumn{"disk", statGauge(famCacheBytes, "tier", "disk"), formatBytes})
			}
		case 'o':
			g = statsGroup{"object", []statsColumn{
				{"get", statRate(famObjRequests, fieldValue, "op", "get"), formatCount},
				{"put", statRate(famObjRequests, fieldValue, "op", "put"), formatCount},
				{"getB", statRate(famObjBytes, fieldValue, "op", "get"), formatBytes},
				{"putB", statRate(famObjBytes, fieldValue, "op", "put"), formatBytes},
				{"err", statRate(famObjErrors, fieldValue), formatCount},
				{"lat", statAvgMillis(famObjDuration), formatMillis},
			}}
			if v1 {
				g.cols = append(g.cols,
					statsColumn{"head", statRate(famObjRequests, fieldValue, "op", "head"), formatCount},
					statsColumn{"list", statRate(famObjRequests, fieldValue, "op", "list"), formatCount},
					statsColumn{"del", statRate(famObjRequests, fieldValue, "op", "delete"), formatCount})
			}
		case 's':
			g = statsGroup{"staging", []statsColumn{
				{"blks", statGauge(famStagingBlks), formatCount},
				{"bytes", statGauge(famStagingBytes), formatBytes},
			}}
		default:
			return nil, fmt.Errorf("stats: unknown --schema letter %q; use letters of ufmcos", l)
		}
		groups = append(groups, g)
	}
	return groups, nil
}

// writeStatsHeader writes the two header lines: the group names over
// dashes, and the column names.
func writeStatsHeader(w io.Writer, groups []statsGroup) {
	var top, names []string
	for _, g := range groups {
		width := len(g.cols)*(statsColumnWidth+1) - 1
		title := g.name
		if len(title) > width {
			title = title[:width]
		}
		left := (width - len(title)) / 2
		top = append(top, strings.Repeat("-", left)+title+strings.Repeat("-", width-left-len(title)))
		cells := make([]string, len(g.cols))
		for i, c := range g.cols {
			cells[i] = fmt.Sprintf("%*s", statsColumnWidth, c.name)
		}
		names = append(names, strings.Join(cells, " "))
	}
	fmt.Fprintln(w, strings.Join(top, " "))
	fmt.Fprintln(w, strings.Join(names, "|"))
}

// statsLine formats the figures between two samples.
func statsLine(groups []statsGroup, prev, cur *statsSample) string {
	parts := make([]string, len(groups))
	for i, g := range groups {
		cells := make([]string, len(g.cols))
		for j, c := range g.cols {
			s := "-"
			if v, ok := c.value(prev, cur); ok {
				s = c.format(v)
			}
			cells[j] = fmt.Sprintf("%*s", statsColumnWidth, s)
		}
		parts[i] = strings.Join(cells, " ")
	}
	return strings.Join(parts, "|")
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
