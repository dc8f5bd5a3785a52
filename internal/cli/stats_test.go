package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/telemetry/stats"
)

// statsFixture returns one of two readings of .stats, two seconds apart,
// in the format a mount writes: "before" or "after" (see
// internal/telemetry/stats/testdata).
func statsFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "telemetry", "stats", "testdata", name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// statsPair parses two readings taken dt apart.
func statsPair(t *testing.T, before, after string, dt time.Duration) (*stats.Sample, *stats.Sample) {
	t.Helper()
	t0 := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	prev, err := stats.Parse([]byte(before), t0)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := stats.Parse([]byte(after), t0.Add(dt))
	if err != nil {
		t.Fatal(err)
	}
	return prev, cur
}

func TestStatsLine(t *testing.T) {
	groups, err := stats.Schema("ufmcos", 0)
	if err != nil {
		t.Fatal(err)
	}
	statsBefore, statsAfter := statsFixture(t, "before"), statsFixture(t, "after")
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
	groups, err := stats.Schema("uco", 1)
	if err != nil {
		t.Fatal(err)
	}
	statsBefore, statsAfter := statsFixture(t, "before"), statsFixture(t, "after")
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

// TestStatsFlags: bad flags fail before the mount is looked for.
func TestStatsFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--schema", "x"}, "stats: unknown --schema letter 'x'; use letters of ufmcos"},
		{[]string{"--schema", ""}, "stats: --schema is empty; use letters of ufmcos"},
		{[]string{"-v", "2"}, "stats: --verbosity must be 0 or 1, not 2"},
		{[]string{"--interval", "0"}, "stats: --interval must be above 0"},
		{[]string{"--count", "-1"}, "stats: --count must not be negative"},
	}
	for _, tt := range tests {
		cmd := newStats()
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		cmd.SetArgs(append(tt.args, t.TempDir()))
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		if err := cmd.Execute(); err == nil || err.Error() != tt.want {
			t.Errorf("stats %v: error %v, want %q", tt.args, err, tt.want)
		}
		if out.Len() != 0 {
			t.Errorf("stats %v printed %q", tt.args, out.String())
		}
	}
}

// TestRunStatsCount: --count N prints N lines after one header, and a
// header again after every 20 lines.
func TestRunStatsCount(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".stats")
	if err := os.WriteFile(path, []byte(statsFixture(t, "after")), 0o644); err != nil {
		t.Fatal(err)
	}
	groups, err := stats.Schema("fo", 0)
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
