package stats

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fixture returns testdata/NAME.txt: "before" and "after" are two
// readings of .stats, two seconds apart, in the format a mount writes
// (families trimmed to the series that matter; blockcache and buffer as
// the mount reports them).
func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pair parses two readings taken dt apart.
func pair(t *testing.T, before, after string, dt time.Duration) (*Sample, *Sample) {
	t.Helper()
	t0 := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	prev, err := Parse([]byte(before), t0)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := Parse([]byte(after), t0.Add(dt))
	if err != nil {
		t.Fatal(err)
	}
	return prev, cur
}

// column returns the column name of group.
func column(t *testing.T, groups []Group, group, name string) Column {
	t.Helper()
	for _, g := range groups {
		if g.Name != group {
			continue
		}
		for _, c := range g.Columns {
			if c.Name == name {
				return c
			}
		}
	}
	t.Fatalf("no column %s in group %s", name, group)
	return Column{}
}

func TestParse(t *testing.T) {
	const text = `# TYPE c counter
c{op="get",tier="disk"} 3
c{op="get",tier="memory"} 4
c{op="put"} 5
# TYPE g gauge
g 2.5
u 7
# TYPE h histogram
h_bucket{le="1"} 1
h_bucket{le="+Inf"} 3
h_sum 1.5
h_count 3
# TYPE s summary
s{quantile="0.5"} 0.2
s_sum{kind="read"} 0.75
s_count{kind="read"} 5
`
	at := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	s, err := Parse([]byte(text), at)
	if err != nil {
		t.Fatal(err)
	}
	if !s.At.Equal(at) {
		t.Errorf("At = %v, want %v", s.At, at)
	}
	tests := []struct {
		family string
		field  Field
		labels []string
		want   float64 // -1: no series
	}{
		{"c", FieldValue, nil, 12},
		{"c", FieldValue, []string{"op", "get"}, 7},
		{"c", FieldValue, []string{"op", "get", "tier", "memory"}, 4},
		{"c", FieldValue, []string{"op", "delete"}, -1},
		{"c", FieldValue, []string{"kind", "read"}, -1},
		{"c", FieldCount, nil, 0},
		{"g", FieldValue, nil, 2.5},
		{"u", FieldValue, nil, 7},
		{"h", FieldCount, nil, 3},
		{"h", FieldSum, nil, 1.5},
		{"h", FieldValue, nil, 0},
		{"s", FieldCount, []string{"kind", "read"}, 5},
		{"s", FieldSum, nil, 0.75},
		{"missing", FieldValue, nil, -1},
	}
	for _, tt := range tests {
		got, ok := s.Value(tt.family, tt.field, tt.labels...)
		if tt.want < 0 {
			if ok {
				t.Errorf("Value(%s, %d, %q) = %v, want none", tt.family, tt.field, tt.labels, got)
			}
			continue
		}
		if !ok || got != tt.want {
			t.Errorf("Value(%s, %d, %q) = %v, %v; want %v", tt.family, tt.field, tt.labels, got, ok, tt.want)
		}
	}
	var none *Sample
	if v, ok := none.Value("c", FieldValue); ok || v != 0 {
		t.Errorf("Value of a nil sample = %v, %v", v, ok)
	}
	if _, err := Parse([]byte("c{ 1\n"), at); err == nil || !strings.HasPrefix(err.Error(), "parse metrics: ") {
		t.Errorf("Parse of a broken line: error %v", err)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	if err := os.WriteFile(good, []byte(fixture(t, "after")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("x{\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	s, err := ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Value("sluice_staging_blocks", FieldValue); !ok || v != 2 || s.At.Before(before) {
		t.Errorf("ReadFile: staging blocks %v, %v; at %v", v, ok, s.At)
	}
	tests := []struct{ path, want string }{
		{filepath.Join(dir, "missing"), "stats: read the metrics of the mount (is it a Sluice mount?): open "},
		{bad, "stats: " + bad + ": parse metrics: "},
	}
	for _, tt := range tests {
		if _, err := ReadFile(tt.path); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("ReadFile(%s): error %v, want one starting %q", tt.path, err, tt.want)
		}
	}
}

func TestRates(t *testing.T) {
	groups, err := Schema("ufmcos", 1)
	if err != nil {
		t.Fatal(err)
	}
	prev, cur := pair(t, fixture(t, "before"), fixture(t, "after"), 2*time.Second)
	tests := []struct {
		group, col string
		want       float64 // -1: none
		unit       Unit
	}{
		{"usage", "cpu", 50, Percent},                 // 1 s of CPU in 2 s
		{"usage", "mem", 200 << 20, Bytes},            // the gauge as of the second reading
		{"usage", "buf", 3 << 20, Bytes},              //
		{"usage", "cache", 6 << 20, Bytes},            // both tiers
		{"fuse", "ops", 130, Count},                   // (200 lookups + 40 reads + 20 writes) / 2 s
		{"fuse", "lat", 1400.0 / 260, Millis},         // (0.2 + 0.8 + 0.4) s / 260 requests, in ms
		{"fuse", "read", 2 << 20, Bytes},              // 4 MiB / 2 s
		{"fuse", "write", 1 << 20, Bytes},             //
		{"fuse", "rdops", 20, Count},                  //
		{"fuse", "wrops", 10, Count},                  //
		{"fuse", "err", 2, Count},                     // 4 / 2 s
		{"fuse", "rdlat", 20, Millis},                 // 0.8 s / 40
		{"fuse", "wrlat", 20, Millis},                 // 0.4 s / 20
		{"meta", "txn", 300, Count},                   // (500 + 100) / 2 s
		{"meta", "lat", 2.5, Millis},                  // (0.5 + 1.0) s / 600
		{"meta", "rtry", 2, Count},                    // 4 / 2 s
		{"meta", "wtxn", 50, Count},                   //
		{"meta", "wlat", 10, Millis},                  // 1.0 s / 100
		{"cache", "hit", 40, Count},                   // (60 + 20) / 2 s
		{"cache", "miss", 10, Count},                  // the disk tier's 20 / 2 s
		{"cache", "hit%", 80, Percent},                // 40 / (40 + 10)
		{"cache", "evict", 5, Count},                  //
		{"cache", "mem", 2 << 20, Bytes},              //
		{"cache", "disk", 4 << 20, Bytes},             //
		{"object", "get", 10, Count},                  // 20 / 2 s
		{"object", "put", 2, Count},                   //
		{"object", "getB", 4 << 20, Bytes},            // 8 MiB / 2 s
		{"object", "putB", 2 << 20, Bytes},            //
		{"object", "err", 1, Count},                   //
		{"object", "lat", 1200.0 / 24, Millis},        // (0.4 + 0.8) s / 24 requests
		{"object", "head", -1, Count},                 // no series: "-"
		{"object", "del", 3, Count},                   //
		{"staging", "blks", 2, Count},                 //
		{"staging", "bytes", float64(8 << 20), Bytes}, //
	}
	for _, tt := range tests {
		c := column(t, groups, tt.group, tt.col)
		if c.Unit != tt.unit {
			t.Errorf("%s/%s: unit %d, want %d", tt.group, tt.col, c.Unit, tt.unit)
		}
		got, ok := c.Value(prev, cur)
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

// TestMissing: figures a mount does not report have no value, nor have
// counters that went back; counters missing in the first reading only
// count from 0.
func TestMissing(t *testing.T) {
	groups, err := Schema("uco", 1)
	if err != nil {
		t.Fatal(err)
	}
	before, after := fixture(t, "before"), fixture(t, "after")
	var old []string
	for _, l := range strings.Split(after, "\n") {
		if !strings.Contains(l, "blockcache") && !strings.Contains(l, "buffer") {
			old = append(old, l)
		}
	}
	oldText := strings.Join(old, "\n")
	const none = -1.0
	tests := []struct {
		name          string
		before, after string
		cols          map[string]float64 // group/column: value or none
	}{
		{"an older mount", oldText, oldText, map[string]float64{
			"usage/cpu": 0, "usage/buf": none, "usage/cache": none, "cache/hit": none, "cache/miss": none,
			"cache/hit%": none, "cache/evict": none, "cache/mem": none, "object/get": 0, "object/lat": 0,
			"object/head": none, "object/del": 0}},
		{"families that appear", oldText, after, map[string]float64{
			"usage/buf": 3 << 20, "usage/cache": 6 << 20, "cache/hit": 190, "cache/miss": 60,
			"cache/hit%": 100 * 190.0 / 250, "cache/evict": 10, "cache/mem": 2 << 20}},
		{"counters that go back", after, before, map[string]float64{
			"usage/cpu": none, "usage/mem": 100 << 20, "usage/buf": 0, "cache/hit": none, "cache/hit%": none,
			"cache/evict": none, "cache/disk": 2 << 20, "object/get": none, "object/lat": none, "object/del": none}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev, cur := pair(t, tt.before, tt.after, time.Second)
			for name, want := range tt.cols {
				g, c, _ := strings.Cut(name, "/")
				got, ok := column(t, groups, g, c).Value(prev, cur)
				switch {
				case want == none && ok:
					t.Errorf("%s = %v, want none", name, got)
				case want != none && (!ok || math.Abs(got-want) > 1e-9*math.Max(1, want)):
					t.Errorf("%s = %v, %v; want %v", name, got, ok, want)
				}
			}
		})
	}
}

func TestCacheMisses(t *testing.T) {
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
			prev, cur := pair(t, tt.before, tt.after, time.Second)
			miss, ok1 := cacheMisses(prev, cur)
			ratio, ok2 := cacheHitRatio(prev, cur)
			if !ok1 || !ok2 || miss != tt.miss || ratio != tt.ratio {
				t.Errorf("miss, ratio = %v %v, %v %v; want %v, %v", miss, ok1, ratio, ok2, tt.miss, tt.ratio)
			}
		})
	}
}

// TestRateNoTime: two readings at the same instant give no rate.
func TestRateNoTime(t *testing.T) {
	prev, cur := pair(t, fixture(t, "before"), fixture(t, "after"), 0)
	if v, ok := rate(famCacheHits, FieldValue)(prev, cur); ok {
		t.Errorf("rate over no time = %v", v)
	}
	if v, ok := gauge(famRSS)(prev, cur); !ok || v != 200<<20 {
		t.Errorf("gauge over no time = %v, %v", v, ok)
	}
}

func TestSchema(t *testing.T) {
	tests := []struct {
		schema    string
		verbosity int
		groups    string // names, or the error's text
	}{
		{"ufmco", 0, "usage fuse meta cache object"},
		{"os", 1, "object staging"},
		{"ff", 0, "fuse"},
		{"sf", 0, "staging fuse"},
		{"x", 0, "stats: unknown --schema letter 'x'; use letters of ufmcos"},
		{"ux", 0, "stats: unknown --schema letter 'x'; use letters of ufmcos"},
		{"", 0, "stats: --schema is empty; use letters of ufmcos"},
		{"u", 2, "stats: --verbosity must be 0 or 1, not 2"},
		{"u", -1, "stats: --verbosity must be 0 or 1, not -1"},
	}
	for _, tt := range tests {
		groups, err := Schema(tt.schema, tt.verbosity)
		var got string
		if err != nil {
			got = err.Error()
		} else {
			var names []string
			for _, g := range groups {
				names = append(names, g.Name)
			}
			got = strings.Join(names, " ")
		}
		if got != tt.groups {
			t.Errorf("Schema(%q, %d) = %q, want %q", tt.schema, tt.verbosity, got, tt.groups)
		}
	}
	for _, l := range "ufmcos" {
		g0, _ := Schema(string(l), 0)
		g1, _ := Schema(string(l), 1)
		if len(g1[0].Columns) < len(g0[0].Columns) {
			t.Errorf("--verbosity 1 has fewer %s columns: %d, %d", g0[0].Name, len(g0[0].Columns), len(g1[0].Columns))
		}
		if l != 's' && len(g1[0].Columns) == len(g0[0].Columns) {
			t.Errorf("--verbosity 1 adds no %s column", g0[0].Name)
		}
	}
}
