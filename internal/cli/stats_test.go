package cli

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// statsBefore and statsAfter are two readings of .stats, two seconds
// apart, in the format a mount writes (families trimmed to the series
// that matter; blockcache and buffer as the mount will report them).
const statsBefore = `# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 10
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1.048576e+08
# TYPE sluice_buffer_used_bytes gauge
sluice_buffer_used_bytes 0
# TYPE sluice_fuse_ops_duration_seconds histogram
sluice_fuse_ops_duration_seconds_bucket{method="lookup",le="+Inf"} 100
sluice_fuse_ops_duration_seconds_sum{method="lookup"} 0.1
sluice_fuse_ops_duration_seconds_count{method="lookup"} 100
sluice_fuse_ops_duration_seconds_bucket{method="read",le="+Inf"} 10
sluice_fuse_ops_duration_seconds_sum{method="read"} 0.5
sluice_fuse_ops_duration_seconds_count{method="read"} 10
# TYPE sluice_fuse_ops_errors_total counter
sluice_fuse_ops_errors_total{method="read"} 1
# TYPE sluice_fuse_read_bytes_total counter
sluice_fuse_read_bytes_total 1.048576e+06
# TYPE sluice_fuse_written_bytes_total counter
sluice_fuse_written_bytes_total 0
# TYPE sluice_meta_transaction_duration_seconds histogram
sluice_meta_transaction_duration_seconds_bucket{kind="read",le="+Inf"} 1000
sluice_meta_transaction_duration_seconds_sum{kind="read"} 1
sluice_meta_transaction_duration_seconds_count{kind="read"} 1000
sluice_meta_transaction_duration_seconds_bucket{kind="write",le="+Inf"} 100
sluice_meta_transaction_duration_seconds_sum{kind="write"} 0.5
sluice_meta_transaction_duration_seconds_count{kind="write"} 100
# TYPE sluice_meta_transaction_restarts_total counter
sluice_meta_transaction_restarts_total{kind="read"} 0
sluice_meta_transaction_restarts_total{kind="write"} 3
# TYPE sluice_object_requests_total counter
sluice_object_requests_total{op="get"} 10
sluice_object_requests_total{op="put"} 4
sluice_object_requests_total{op="delete"} 0
# TYPE sluice_object_request_errors_total counter
sluice_object_request_errors_total{op="get"} 0
sluice_object_request_errors_total{op="put"} 1
# TYPE sluice_object_bytes_total counter
sluice_object_bytes_total{op="get"} 1.048576e+06
sluice_object_bytes_total{op="put"} 0
# TYPE sluice_object_request_duration_seconds histogram
sluice_object_request_duration_seconds_bucket{op="get",le="+Inf"} 10
sluice_object_request_duration_seconds_sum{op="get"} 0.2
sluice_object_request_duration_seconds_count{op="get"} 10
sluice_object_request_duration_seconds_bucket{op="put",le="+Inf"} 4
sluice_object_request_duration_seconds_sum{op="put"} 0.4
sluice_object_request_duration_seconds_count{op="put"} 4
# TYPE sluice_blockcache_hits_total counter
sluice_blockcache_hits_total{tier="memory"} 100
sluice_blockcache_hits_total{tier="disk"} 10
# TYPE sluice_blockcache_misses_total counter
sluice_blockcache_misses_total 40
# TYPE sluice_blockcache_evictions_total counter
sluice_blockcache_evictions_total{tier="memory"} 0
sluice_blockcache_evictions_total{tier="disk"} 0
# TYPE sluice_blockcache_bytes gauge
sluice_blockcache_bytes{tier="memory"} 1.048576e+06
sluice_blockcache_bytes{tier="disk"} 2.097152e+06
# TYPE sluice_staging_blocks gauge
sluice_staging_blocks 0
# TYPE sluice_staging_bytes gauge
sluice_staging_bytes 0
`

const statsAfter = `# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 11
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 2.097152e+08
# TYPE sluice_buffer_used_bytes gauge
sluice_buffer_used_bytes 3.145728e+06
# TYPE sluice_fuse_ops_duration_seconds histogram
sluice_fuse_ops_duration_seconds_bucket{method="lookup",le="+Inf"} 300
sluice_fuse_ops_duration_seconds_sum{method="lookup"} 0.3
sluice_fuse_ops_duration_seconds_count{method="lookup"} 300
sluice_fuse_ops_duration_seconds_bucket{method="read",le="+Inf"} 50
sluice_fuse_ops_duration_seconds_sum{method="read"} 1.3
sluice_fuse_ops_duration_seconds_count{method="read"} 50
sluice_fuse_ops_duration_seconds_bucket{method="write",le="+Inf"} 20
sluice_fuse_ops_duration_seconds_sum{method="write"} 0.4
sluice_fuse_ops_duration_seconds_count{method="write"} 20
# TYPE sluice_fuse_ops_errors_total counter
sluice_fuse_ops_errors_total{method="read"} 5
# TYPE sluice_fuse_read_bytes_total counter
sluice_fuse_read_bytes_total 5.24288e+06
# TYPE sluice_fuse_written_bytes_total counter
sluice_fuse_written_bytes_total 2.097152e+06
# TYPE sluice_meta_transaction_duration_seconds histogram
sluice_meta_transaction_duration_seconds_bucket{kind="read",le="+Inf"} 1500
sluice_meta_transaction_duration_seconds_sum{kind="read"} 1.5
sluice_meta_transaction_duration_seconds_count{kind="read"} 1500
sluice_meta_transaction_duration_seconds_bucket{kind="write",le="+Inf"} 200
sluice_meta_transaction_duration_seconds_sum{kind="write"} 1.5
sluice_meta_transaction_duration_seconds_count{kind="write"} 200
# TYPE sluice_meta_transaction_restarts_total counter
sluice_meta_transaction_restarts_total{kind="read"} 0
sluice_meta_transaction_restarts_total{kind="write"} 7
# TYPE sluice_object_requests_total counter
sluice_object_requests_total{op="get"} 30
sluice_object_requests_total{op="put"} 8
sluice_object_requests_total{op="delete"} 6
# TYPE sluice_object_request_errors_total counter
sluice_object_request_errors_total{op="get"} 2
sluice_object_request_errors_total{op="put"} 1
# TYPE sluice_object_bytes_total counter
sluice_object_bytes_total{op="get"} 9.437184e+06
sluice_object_bytes_total{op="put"} 4.194304e+06
# TYPE sluice_object_request_duration_seconds histogram
sluice_object_request_duration_seconds_bucket{op="get",le="+Inf"} 30
sluice_object_request_duration_seconds_sum{op="get"} 0.6
sluice_object_request_duration_seconds_count{op="get"} 30
sluice_object_request_duration_seconds_bucket{op="put",le="+Inf"} 8
sluice_object_request_duration_seconds_sum{op="put"} 1.2
sluice_object_request_duration_seconds_count{op="put"} 8
# TYPE sluice_blockcache_hits_total counter
sluice_blockcache_hits_total{tier="memory"} 160
sluice_blockcache_hits_total{tier="disk"} 30
# TYPE sluice_blockcache_misses_total counter
sluice_blockcache_misses_total 60
# TYPE sluice_blockcache_evictions_total counter
sluice_blockcache_evictions_total{tier="memory"} 10
sluice_blockcache_evictions_total{tier="disk"} 0
# TYPE sluice_blockcache_bytes gauge
sluice_blockcache_bytes{tier="memory"} 2.097152e+06
sluice_blockcache_bytes{tier="disk"} 4.194304e+06
# TYPE sluice_staging_blocks gauge
sluice_staging_blocks 2
# TYPE sluice_staging_bytes gauge
sluice_staging_bytes 8.388608e+06
`

// statsPair parses two readings taken dt apart.
func statsPair(t *testing.T, before, after string, dt time.Duration) (*statsSample, *statsSample) {
	t.Helper()
	t0 := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	prev, err := parseStatsSample([]byte(before), t0)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := parseStatsSample([]byte(after), t0.Add(dt))
	if err != nil {
		t.Fatal(err)
	}
	return prev, cur
}

// statsColumnOf returns the column name of group.
func statsColumnOf(t *testing.T, groups []statsGroup, group, name string) statsColumn {
	t.Helper()
	for _, g := range groups {
		if g.name != group {
			continue
		}
		for _, c := range g.cols {
			if c.name == name {
				return c
			}
		}
	}
	t.Fatalf("no column %s in group %s", name, group)
	return statsColumn{}
}

func TestStatsRates(t *testing.T) {
	groups, err := statsSchema("ufmcos", 1)
	if err != nil {
		t.Fatal(err)
	}
	prev, cur := statsPair(t, statsBefore, statsAfter, 2*time.Second)
	tests := []struct {
		group, col string
		want       float64 // -1: none
	}{
		{"usage", "cpu", 50},                   // 1 s of CPU in 2 s
		{"usage", "mem", 200 << 20},            // the gauge as of the second reading
		{"usage", "buf", 3 << 20},              //
		{"usage", "cache", 6 << 20},            // both tiers
		{"fuse", "ops", 130},                   // (200 lookups + 40 reads + 20 writes) / 2 s
		{"fuse", "lat", 1400.0 / 260},          // (0.2 + 0.8 + 0.4) s / 260 requests, in ms
		{"fuse", "read", 2 << 20},              // 4 MiB / 2 s
		{"fuse", "write", 1 << 20},             //
		{"fuse", "rdops", 20},                  //
		{"fuse", "wrops", 10},                  //
		{"fuse", "err", 2},                     // 4 / 2 s
		{"fuse", "rdlat", 20},                  // 0.8 s / 40
		{"fuse", "wrlat", 20},                  // 0.4 s / 20
		{"meta", "txn", 300},                   // (500 + 100) / 2 s
		{"meta", "lat", 2.5},                   // (0.5 + 1.0) s / 600
		{"meta", "rtry", 2},                    // 4 / 2 s
		{"meta", "wtxn", 50},                   //
		{"meta", "wlat", 10},                   // 1.0 s / 100
		{"cache", "hit", 40},                   // (60 + 20) / 2 s
		{"cache", "miss", 10},                  // the disk tier's 20 / 2 s
		{"cache", "hit%", 80},                  // 40 / (40 + 10)
		{"cache", "evict", 5},                  //
		{"cache", "mem", 2 << 20},              //
		{"cache", "disk", 4 << 20},             //
		{"object", "get", 10},                  // 20 / 2 s
		{"object", "put", 2},                   //
		{"object", "getB", 4 << 20},            // 8 MiB / 2 s
		{"object", "putB", 2 << 20},            //
		{"object", "err", 1},                   //
		{"object", "lat", 1200.0 / 24},         // (0.4 + 0.8) s / 24 requests
		{"object", "head", -1},                 // no series: "-"
		{"object", "del", 3},                   //
		{"staging", "blks", 2},                 //
		{"staging", "bytes", float64(8 << 20)}, //
	}
	for _, tt := range tests {
		c := statsColumnOf(t, groups, tt.group, tt.col)
		got, ok := c.value(prev, cur)
		if tt.want < 0 {
			if ok {
				t.Errorf("%s/%s = %v, want none", tt.group, tt.col, got)
			}
			continue
		}
		if !ok {
			t.Errorf("%s/%s: no value", tt.group, tt.col)
			continue
		}
		if math.Abs(got-tt.want) > 1e-9*math.Max(1, tt.want) {
			t.Errorf("%s/%s = %v, want %v", tt.group, tt.col, got, tt.want)
		}
	}
}

func TestStatsLine(t *testing.T) {
	groups, err := statsSchema("ufmcos", 0)
	if err != nil {
		t.Fatal(err)
	}
	prev, cur := statsPair(t, statsBefore, statsAfter, 2*time.Second)
	var b bytes.Buffer
	writeStatsHeader(&b, groups)
	b.WriteString(statsLine(groups, prev, cur) + "\n")
	want := `------usage------ ---------fuse---------- ------meta------- ---------cache--------- --------------object--------------- --staging--
  cpu   mem   buf|  ops   lat  read write|  txn   lat  rtry|  hit  miss  hit% evict|  get   put  getB  putB   err   lat| blks bytes
 50.0  200M  3.0M|  130  5.38  2.0M  1.0M|  300  2.50     2|   40    10  80.0     5|   10     2  4.0M  2.0M     1  50.0|    2  8.0M
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestStatsMissing: figures a mount does not report show "-", and so do
// counters that went back; counters missing in the first reading only
// count from 0.
func TestStatsMissing(t *testing.T) {
	groups, err := statsSchema("uco", 1)
	if err != nil {
		t.Fatal(err)
	}
	var old []string
	for _, l := range strings.Split(statsAfter, "\n") {
		if !strings.Contains(l, "blockcache") && !strings.Contains(l, "buffer") {
			old = append(old, l)
		}
	}
	tests := []struct {
		name          string
		before, after string
		want          string
	}{
		{"an older mount", strings.Join(old, "\n"), strings.Join(old, "\n"),
			"  0.0  200M     -     -|    -     -     -     -     -     -|    0     0     0     0     0     0     -     -     0"},
		{"families that appear", strings.Join(old, "\n"), statsAfter,
			"  0.0  200M  3.0M  6.0M|  190    60  76.0    10  2.0M  4.0M|    0     0     0     0     0     0     -     -     0"},
		{"counters that go back", statsAfter, statsBefore,
			"    -  100M     0  3.0M|    -     -     -     -  1.0M  2.0M|    -     -     -     -     -     -     -     -     -"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev, cur := statsPair(t, tt.before, tt.after, time.Second)
			if got := statsLine(groups, prev, cur); got != tt.want {
				t.Errorf("got\n%q, want\n%q", got, tt.want)
			}
		})
	}
}

func TestStatsCacheMisses(t *testing.T) {
	tests := []struct {
		name          string
		before, after string
		miss, ratio   float64
	}{
		{"tiers", `sluice_blockcache_hits_total{tier="memory"} 0
sluice_blockcache_hits_total{tier="disk"} 0
sluice_blockcache_misses_total 0
`, `sluice_blockcache_hits_total{tier="memory"} 20
sluice_blockcache_hits_total{tier="disk"} 10
sluice_blockcache_misses_total 10
`, 10, 75},
		{"no tiers", `sluice_blockcache_hits_total 0
sluice_blockcache_misses_total 0
`, `sluice_blockcache_hits_total 10
sluice_blockcache_misses_total 30
`, 30, 25},
		{"nothing read", `sluice_blockcache_hits_total 5
sluice_blockcache_misses_total 5
`, `sluice_blockcache_hits_total 5
sluice_blockcache_misses_total 5
`, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev, cur := statsPair(t, tt.before, tt.after, time.Second)
			miss, ok1 := cacheMisses(prev, cur)
			ratio, ok2 := cacheHitRatio(prev, cur)
			if !ok1 || !ok2 || miss != tt.miss || ratio != tt.ratio {
				t.Errorf("miss, ratio = %v %v, %v %v; want %v, %v", miss, ok1, ratio, ok2, tt.miss, tt.ratio)
			}
		})
	}
}

func TestStatsFormat(t *testing.T) {
	tests := []struct {
		f    func(float64) string
		v    float64
		want string
	}{
		{formatCount, 0, "0"},
		{formatCount, 0.5, "0.5"},
		{formatCount, 7, "7"},
		{formatCount, 999, "999"},
		{formatCount, 1000, "1.0K"},
		{formatCount, 12345, "12K"},
		{formatCount, 999499, "999K"},
		{formatCount, 999500, "1.0M"},
		{formatCount, 2.5e9, "2.5G"},
		{formatBytes, 1023, "1023"},
		{formatBytes, 1024, "1.0K"},
		{formatBytes, 5 << 20, "5.0M"},
		{formatBytes, 300 << 20, "300M"},
		{formatBytes, -1, "-"},
		{formatMillis, 0, "0"},
		{formatMillis, 0.0004, "0.000"},
		{formatMillis, 0.1234, "0.123"},
		{formatMillis, 5.384, "5.38"},
		{formatMillis, 12.34, "12.3"},
		{formatMillis, 1234.4, "1234"},
		{formatMillis, 250000, "250K"},
		{formatPercent, 0, "0.0"},
		{formatPercent, 99.96, "100.0"},
		{formatPercent, 1234.5, "1234"},
	}
	for _, tt := range tests {
		if got := tt.f(tt.v); got != tt.want {
			t.Errorf("format(%v) = %q, want %q", tt.v, got, tt.want)
		}
		if got := tt.f(tt.v); len(got) > statsColumnWidth {
			t.Errorf("format(%v) = %q: wider than a column", tt.v, got)
		}
	}
}

func TestStatsSchema(t *testing.T) {
	tests := []struct {
		schema    string
		verbosity int
		groups    string // names, or the error's text
	}{
		{"ufmco", 0, "usage fuse meta cache object"},
		{"os", 1, "object staging"},
		{"ff", 0, "fuse"},
		{"x", 0, "unknown --schema letter 'x'"},
		{"", 0, "--schema is empty"},
		{"u", 2, "--verbosity must be 0 or 1"},
	}
	for _, tt := range tests {
		groups, err := statsSchema(tt.schema, tt.verbosity)
		var got string
		if err != nil {
			got = err.Error()
		} else {
			var names []string
			for _, g := range groups {
				names = append(names, g.name)
			}
			got = strings.Join(names, " ")
		}
		if !strings.Contains(got, tt.groups) {
			t.Errorf("statsSchema(%q, %d) = %q, want %q", tt.schema, tt.verbosity, got, tt.groups)
		}
	}
	g0, _ := statsSchema("o", 0)
	g1, _ := statsSchema("o", 1)
	if len(g1[0].cols) <= len(g0[0].cols) {
		t.Errorf("--verbosity 1 adds no object column: %d, %d", len(g0[0].cols), len(g1[0].cols))
	}
}

// TestRunStatsCount: --count N prints N lines after one header, and a
// header again after every 20 lines.
func TestRunStatsCount(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".stats")
	if err := os.WriteFile(path, []byte(statsAfter), 0o644); err != nil {
		t.Fatal(err)
	}
	groups, err := statsSchema("fo", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ count, headers int }{{3, 1}, {20, 1}, {21, 2}} {
		var out bytes.Buffer
		if err := runStats(context.Background(), &out, path, groups, statsOptions{interval: time.Millisecond, count: tt.count}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		headers := 0
		for _, l := range lines {
			if strings.HasPrefix(l, "-") {
				headers++
			}
		}
		if headers != tt.headers || len(lines) != tt.count+2*tt.headers {
			t.Errorf("--count %d: %d lines with %d headers, want %d lines with %d:\n%s",
				tt.count, len(lines), headers, tt.count+2*tt.headers, tt.headers, out.String())
		}
		// Nothing changed between the readings: every rate is 0.
		if want := "    0     0     0     0|    0     0     0     0     0     0"; lines[2] != want {
			t.Errorf("line %q, want %q", lines[2], want)
		}
	}
	if err := runStats(context.Background(), &bytes.Buffer{}, filepath.Join(t.TempDir(), ".stats"), groups, statsOptions{interval: time.Millisecond, count: 1}); err == nil {
		t.Error("runStats on a missing file succeeded")
	}
}
