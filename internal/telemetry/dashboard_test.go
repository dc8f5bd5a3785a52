package telemetry_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/volume"
	"github.com/sluicefs/sluice/internal/volume/volumetest"
)

// family is a metric family a registry exposes: its type and the names
// of its labels.
type family struct {
	typ    string // COUNTER, GAUGE, HISTOGRAM, SUMMARY, UNTYPED
	labels map[string]bool
}

// mountFamilies opens a volume as a mount does (SQLite metadata, a
// local-directory bucket, a disk cache, Level FileSystem), does a little
// I/O through its VFS and reports two FUSE requests the way the FUSE
// binding does (one failed), so that every histogram and labelled
// counter has samples, and returns the families its registry gathers.
func mountFamilies(t *testing.T) map[string]family {
	t.Helper()
	ctx := context.Background()
	tv := volumetest.New(t, nil)
	v, err := volume.Open(ctx, tv.MetaURL, volume.Options{Level: volume.FileSystem,
		Chunks: chunk.Config{CacheDirs: []string{filepath.Join(t.TempDir(), "cache")}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := v.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	fs := v.VFS()
	data := []byte(strings.Repeat("sluice ", 1000))
	_, fh, err := fs.Create(ctx, meta.RootIno, []byte("f"), 0o644, 0o022, uint32(os.O_RDWR))
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Write(ctx, fh, 0, data); err != nil {
		t.Fatal(err)
	}
	if err := fs.Release(ctx, fh, 0); err != nil {
		t.Fatal(err)
	}
	a, err := fs.Lookup(ctx, meta.RootIno, []byte("f"))
	if err != nil {
		t.Fatal(err)
	}
	_, fh, err = fs.Open(ctx, a.Ino, uint32(os.O_RDONLY))
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, len(data))
	if n, err := fs.Read(ctx, fh, 0, p); err != nil || n != len(data) {
		t.Fatalf("read back: %d bytes, %v", n, err)
	}
	if err := fs.Release(ctx, fh, 0); err != nil {
		t.Fatal(err)
	}
	m := v.Telemetry()
	m.FuseOp("lookup", time.Millisecond, false)
	m.FuseOp("unlink", time.Millisecond, true)
	m.MetaCall("lookup", time.Millisecond) // a sluice:// volume's

	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]family{}
	for _, mf := range mfs {
		f := family{typ: mf.GetType().String(), labels: map[string]bool{}}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				f.labels[l.GetName()] = true
			}
		}
		out[mf.GetName()] = f
	}
	return out
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	SchemaVersion int        `json:"schemaVersion"`
	UID           string     `json:"uid"`
	Title         string     `json:"title"`
	Panels        []panel    `json:"panels"`
	Templating    templating `json:"templating"`
}

type panel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource *datasource     `json:"datasource"`
	GridPos    map[string]int  `json:"gridPos"`
	Targets    []target        `json:"targets"`
	Panels     []panel         `json:"panels"` // of a collapsed row
	FieldCfg   json.RawMessage `json:"fieldConfig"`
}

type target struct {
	Expr       string      `json:"expr"`
	RefID      string      `json:"refId"`
	Datasource *datasource `json:"datasource"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type templating struct {
	List []struct {
		Name       string          `json:"name"`
		Type       string          `json:"type"`
		Query      json.RawMessage `json:"query"`
		Definition string          `json:"definition"`
		Datasource *datasource     `json:"datasource"`
	} `json:"list"`
}

const dashboardFile = "../../docs/grafana-dashboard.json"

func readDashboard(t *testing.T) *dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return &d
}

// promDS is the data source every query must use: the dashboard's
// variable, so that Grafana asks for it on import.
const promDS = "${DS_PROMETHEUS}"

// TestDashboardShape checks what Grafana needs to import the dashboard
// and what users expect of it: a Prometheus data source variable used by
// every panel and query, an instance variable every query filters on,
// unique panel ids, and panels placed on the 24-column grid.
func TestDashboardShape(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want both set and a Grafana 9+ schema", d.UID, d.Title, d.SchemaVersion)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != promDS) {
			t.Errorf("variable %s queries data source %+v, want %s", v.Name, v.Datasource, promDS)
		}
	}
	if vars["DS_PROMETHEUS"] != "datasource" || vars["instance"] != "query" {
		t.Errorf("variables %v: want DS_PROMETHEUS (datasource) and instance (query)", vars)
	}
	ids := map[int]bool{}
	queries := 0
	for _, p := range allPanels(d) {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if x, w := p.GridPos["x"], p.GridPos["w"]; w <= 0 || x < 0 || x+w > 24 || p.GridPos["h"] <= 0 {
			t.Errorf("panel %q: gridPos %v is off the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != promDS || len(p.Targets) == 0 {
			t.Errorf("panel %q: data source %+v, %d queries; want %s and at least one", p.Title, p.Datasource, len(p.Targets), promDS)
		}
		for _, tg := range p.Targets {
			queries++
			if tg.Datasource == nil || tg.Datasource.UID != promDS || tg.RefID == "" {
				t.Errorf("panel %q: query %q has data source %+v, refId %q", p.Title, tg.Expr, tg.Datasource, tg.RefID)
			}
			if !strings.Contains(tg.Expr, `instance=~"$instance"`) {
				t.Errorf("panel %q: query %q does not filter on $instance", p.Title, tg.Expr)
			}
		}
	}
	if queries == 0 {
		t.Fatal("the dashboard has no queries")
	}
}

// TestDashboardMetrics checks that every metric a query or variable of
// the dashboard names is a family a mount's registry exposes (a
// histogram's through its _bucket, _sum and _count series), and every
// label it matches or groups by is one of those metrics' labels (or
// instance and job, which Prometheus adds, or le of a bucket).
func TestDashboardMetrics(t *testing.T) {
	d := readDashboard(t)
	fams := mountFamilies(t)
	var exprs []string
	for _, p := range allPanels(d) {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			exprs = append(exprs, v.Definition)
		}
	}
	used := 0
	for _, expr := range exprs {
		refs, grouped := parseExpr(expr)
		known := map[string]bool{"instance": true, "job": true}
		for _, r := range refs {
			used++
			f, ok := seriesFamily(fams, r.name)
			if !ok {
				t.Errorf("query %q: no family of a mount exposes %s", expr, r.name)
				continue
			}
			for l := range f.labels {
				known[l] = true
			}
			bucket := strings.HasSuffix(r.name, "_bucket")
			if bucket {
				known["le"] = true
			}
			for _, l := range r.labels {
				if !f.labels[l] && l != "instance" && l != "job" && !(bucket && l == "le") {
					t.Errorf("query %q: %s has no label %s (it has %v)", expr, r.name, l, sortedKeys(f.labels))
				}
			}
		}
		for _, l := range grouped {
			if !known[l] {
				t.Errorf("query %q: groups by %s, which none of its metrics has", expr, l)
			}
		}
	}
	if used == 0 {
		t.Fatal("no metric found in the dashboard's queries")
	}
}

// TestMetricsDocumented checks that docs/metrics.md names every sluice_
// family a mount exposes, and names no sluice_ family that none exposes.
func TestMetricsDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]bool{}
	for _, m := range regexp.MustCompile("`(sluice_[a-z0-9_]+)`").FindAllStringSubmatch(string(b), -1) {
		doc[m[1]] = true
	}
	fams := mountFamilies(t)
	for name := range fams {
		if strings.HasPrefix(name, "sluice_") && !doc[name] {
			t.Errorf("docs/metrics.md does not document %s", name)
		}
	}
	for name := range doc {
		if _, ok := seriesFamily(fams, name); !ok {
			t.Errorf("docs/metrics.md documents %s, which a mount does not expose", name)
		}
	}
}

func allPanels(d *dashboard) []panel {
	var out []panel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// seriesFamily returns the family of a series name: the family itself,
// or the histogram or summary whose _bucket, _sum or _count it is.
func seriesFamily(fams map[string]family, name string) (family, bool) {
	if f, ok := fams[name]; ok {
		return f, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		f, ok := fams[base]
		if ok && (f.typ == "HISTOGRAM" || suffix != "_bucket" && f.typ == "SUMMARY") {
			return f, true
		}
	}
	return family{}, false
}

// metricRef is a metric named in a PromQL expression, with the labels
// its selector matches on.
type metricRef struct {
	name   string
	labels []string
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promVariable = regexp.MustCompile(`\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	promSelector = regexp.MustCompile(`([A-Za-z_:][A-Za-z0-9_:]*)?\s*\{([^}]*)\}`)
	promMatcher  = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)`)
	promIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
	promNumber   = regexp.MustCompile(`\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b`)
)

// promKeywords are PromQL's words that are neither metrics nor labels.
var promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// parseExpr returns the metrics an expression (a PromQL query, or a
// Grafana label_values(metric, label) call) names, and the labels it
// groups or matches by. It knows the PromQL the dashboard uses:
// functions, aggregations with by/without, selectors, ranges, binary
// operators and numbers.
func parseExpr(expr string) (refs []metricRef, grouped []string) {
	if rest, ok := strings.CutPrefix(strings.TrimSpace(expr), "label_values("); ok {
		metric, label, _ := strings.Cut(strings.TrimSuffix(rest, ")"), ",")
		refs, _ = parseExpr(metric)
		return refs, []string{strings.TrimSpace(label)}
	}
	s := promString.ReplaceAllString(expr, `""`)
	s = promVariable.ReplaceAllString(s, "")
	s = promRange.ReplaceAllString(s, "")
	for _, m := range promGrouping.FindAllStringSubmatch(s, -1) {
		for _, l := range strings.Split(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				grouped = append(grouped, l)
			}
		}
	}
	s = promGrouping.ReplaceAllString(s, " ")
	for _, m := range promSelector.FindAllStringSubmatch(s, -1) {
		r := metricRef{name: m[1]}
		for _, mm := range promMatcher.FindAllStringSubmatch(m[2], -1) {
			r.labels = append(r.labels, mm[1])
		}
		if r.name == "" { // {__name__="..."} is not used
			continue
		}
		refs = append(refs, r)
	}
	s = promSelector.ReplaceAllString(s, " ")
	s = promNumber.ReplaceAllString(s, " ")
	for _, m := range promIdent.FindAllStringSubmatch(s, -1) {
		name := strings.TrimSpace(strings.TrimSuffix(m[0], "("))
		if m[1] != "" || promKeywords[name] { // a function or a keyword
			continue
		}
		refs = append(refs, metricRef{name: name})
	}
	return refs, grouped
}

// TestParseExpr checks the expression reader the dashboard test relies on.
func TestParseExpr(t *testing.T) {
	for _, tc := range []struct {
		expr    string
		metrics []string
		grouped []string
	}{
		{`sum by (method) (rate(a_total{instance=~"$instance"}[$__rate_interval]))`, []string{"a_total"}, []string{"method"}},
		{`histogram_quantile(0.99, sum by (op, le) (rate(b_bucket{instance=~"$instance",op!="x{y}"}[5m])))`, []string{"b_bucket"}, []string{"op", "le"}},
		{`sum without (tier) (rate(c{x="1"}[1m])) / (sum(rate(d[1m])) + e)`, []string{"c", "d", "e"}, []string{"tier"}},
		{`f{a="b"} > 1e3 and on (instance) g`, []string{"f", "g"}, []string{"instance"}},
		{`label_values(h, instance)`, []string{"h"}, []string{"instance"}},
	} {
		refs, grouped := parseExpr(tc.expr)
		var names []string
		for _, r := range refs {
			names = append(names, r.name)
		}
		sort.Strings(names)
		if !slices.Equal(names, tc.metrics) || !slices.Equal(grouped, tc.grouped) {
			t.Errorf("parseExpr(%q) = metrics %q, grouped %q; want %q, %q", tc.expr, names, grouped, tc.metrics, tc.grouped)
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
