package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicefs/sluice/internal/testserver"
)

// promSample is one series of a scraped family: its labels and its value
// (a histogram's sample count).
type promSample struct {
	labels map[string]string
	value  float64
}

// promFamilies are scraped metric families by name.
type promFamilies map[string][]promSample

// parseProm parses the Prometheus text format.
func parseProm(t *testing.T, what string, r io.Reader) promFamilies {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("parse %s: %v", what, err)
	}
	out := promFamilies{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			s := promSample{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Counter != nil:
				s.value = m.GetCounter().GetValue()
			case m.Gauge != nil:
				s.value = m.GetGauge().GetValue()
			case m.Histogram != nil:
				s.value = float64(m.GetHistogram().GetSampleCount())
			case m.Summary != nil:
				s.value = float64(m.GetSummary().GetSampleCount())
			default:
				s.value = m.GetUntyped().GetValue()
			}
			out[name] = append(out[name], s)
		}
	}
	return out
}

// value returns the sum of the series of family name whose labels
// include labels (name, value pairs), and whether there is any.
func (f promFamilies) value(name string, labels ...string) (float64, bool) {
	var sum float64
	found := false
	for _, s := range f[name] {
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if s.labels[labels[i]] != labels[i+1] {
				match = false
			}
		}
		if match {
			sum += s.value
			found = true
		}
	}
	return sum, found
}

// names returns the families' names, sorted.
func (f promFamilies) names() []string {
	var out []string
	for n := range f {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// scrapeFamilies GETs addr/metrics and parses it.
func scrapeFamilies(t *testing.T, addr string) promFamilies {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	return parseProm(t, "/metrics", resp.Body)
}

// documentedFamilies returns the sluice_ families docs/metrics.md lists.
func documentedFamilies(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("`(sluice_[a-z0-9_]+)`").FindAllStringSubmatch(string(b), -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	if len(out) < 20 {
		t.Fatalf("docs/metrics.md lists %d sluice_ families: %q", len(out), out)
	}
	return out
}

// serverOnlyFamilies are the documented families only a mount of a
// sluice:// volume exposes (TestMetaServerKilledUnderAMount checks them).
var serverOnlyFamilies = []string{"sluice_meta_calls_duration_seconds"}

// TestMetrics mounts with --metrics, writes and reads back files, lists
// a directory and fails one request, then checks that /metrics has every
// family docs/metrics.md documents, with the values the workload implies,
// and that .stats shows the same families.
func TestMetrics(t *testing.T) {
	v := newVolume(t)
	addr := freeAddr(t)
	v.mount(t, "--metrics", addr, "--buffer-size", "64M")

	const n, size = 5, 100 << 10
	dir := v.path("d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for i := range n {
		name := fmt.Sprintf("f%d", i)
		files[name] = randomData(size, uint64(i+1))
		write(t, filepath.Join(dir, name), files[name])
	}
	for name, want := range files {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read back %s: %d bytes, %v", name, len(got), err)
		}
	}
	// Twice with O_DIRECT, so that the reads reach the mount whatever
	// the kernel caches: the second finds each block in memory.
	buf := alignedBuffer(2 * size)
	for range 2 {
		for name, want := range files {
			f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDONLY|syscall.O_DIRECT, 0)
			if err != nil {
				t.Fatal(err)
			}
			k, err := io.ReadFull(f, buf)
			f.Close()
			if !errors.Is(err, io.ErrUnexpectedEOF) || !bytes.Equal(buf[:k], want) {
				t.Fatalf("O_DIRECT read of %s: %d bytes, %v", name, k, err)
			}
		}
	}
	es, err := os.ReadDir(dir)
	if err != nil || len(es) != n {
		t.Fatalf("list %s: %d entries, %v; want %d", dir, len(es), err, n)
	}
	if err := os.Remove(dir); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rmdir of a full directory: %v, want ENOTEMPTY", err)
	}

	m := scrapeFamilies(t, addr)
	for _, name := range documentedFamilies(t) {
		if slices.Contains(serverOnlyFamilies, name) {
			continue
		}
		if _, ok := m[name]; !ok {
			t.Errorf("/metrics has no %s (documented in docs/metrics.md)", name)
		}
	}
	for _, name := range []string{"process_cpu_seconds_total", "process_resident_memory_bytes", "go_goroutines"} {
		if _, ok := m[name]; !ok {
			t.Errorf("/metrics has no %s", name)
		}
	}
	atLeast := func(what string, min float64, name string, labels ...string) {
		t.Helper()
		got, ok := m.value(name, labels...)
		if !ok || got < min {
			t.Errorf("%s: %s%v = %v (present %v), want at least %v", what, name, labels, got, ok, min)
		}
	}
	atLeast("files created", n, "sluice_fuse_ops_duration_seconds", "method", "create")
	atLeast("directories made", 1, "sluice_fuse_ops_duration_seconds", "method", "mkdir")
	atLeast("writes", n, "sluice_fuse_ops_duration_seconds", "method", "write")
	atLeast("O_DIRECT reads", 2*n, "sluice_fuse_ops_duration_seconds", "method", "read")
	atLeast("failed rmdir", 1, "sluice_fuse_ops_errors_total", "method", "rmdir")
	atLeast("bytes written", n*size, "sluice_fuse_written_bytes_total")
	atLeast("bytes read with O_DIRECT", 2*n*size, "sluice_fuse_read_bytes_total")
	readdirs, _ := m.value("sluice_fuse_ops_duration_seconds", "method", "readdir")
	readdirplus, _ := m.value("sluice_fuse_ops_duration_seconds", "method", "readdirplus")
	if readdirs+readdirplus < 1 {
		t.Errorf("listing a directory sent no readdir or readdirplus")
	}
	atLeast("write transactions", 1, "sluice_meta_transaction_duration_seconds", "kind", "write")
	atLeast("read transactions", 1, "sluice_meta_transaction_duration_seconds", "kind", "read")
	atLeast("blocks uploaded", n, "sluice_object_requests_total", "op", "put")
	atLeast("bytes uploaded", n*size, "sluice_object_bytes_total", "op", "put")
	atLeast("second O_DIRECT reads", n, "sluice_blockcache_hits_total", "tier", "memory")
	atLeast("blocks read", n, "sluice_blockcache_blocks", "tier", "memory")
	atLeast("inodes", n+1, "sluice_used_inodes")
	atLeast("space", n*size, "sluice_used_space_bytes")
	if _, ok := m.value("sluice_blockcache_misses_total"); !ok {
		t.Errorf("no sluice_blockcache_misses_total")
	}
	for _, fam := range []string{"sluice_blockcache_hits_total",
		"sluice_blockcache_evictions_total", "sluice_blockcache_bytes", "sluice_blockcache_blocks"} {
		for _, tier := range []string{"memory", "disk"} {
			if _, ok := m.value(fam, "tier", tier); !ok {
				t.Errorf("%s has no tier %q", fam, tier)
			}
		}
	}
	if got, _ := m.value("sluice_buffer_size_bytes"); got != 64<<20 {
		t.Errorf("sluice_buffer_size_bytes = %v, want 64 MiB (--buffer-size 64M)", got)
	}
	if got, ok := m.value("sluice_buffer_used_bytes"); !ok || got != 0 {
		t.Errorf("sluice_buffer_used_bytes = %v (present %v), want 0 with every file closed", got, ok)
	}

	// .stats: the same registry as text. Families only appear, so it
	// has those of the scrape before it and no others than the one after.
	f, err := os.Open(v.path(".stats"))
	if err != nil {
		t.Fatal(err)
	}
	stats := parseProm(t, ".stats", f)
	f.Close()
	after := scrapeFamilies(t, addr)
	for _, name := range m.names() {
		if _, ok := stats[name]; !ok {
			t.Errorf(".stats has no %s, which /metrics showed before", name)
		}
	}
	for _, name := range stats.names() {
		if _, ok := after[name]; !ok {
			t.Errorf(".stats has %s, which /metrics does not", name)
		}
	}
	if got, _ := stats.value("sluice_fuse_ops_duration_seconds", "method", "create"); got < n {
		t.Errorf(".stats: %v creates, want at least %d", got, n)
	}
}

// mountConfig is the part of .config TestInternalFiles reads.
type mountConfig struct {
	MetaURL    string
	MountPoint string
	PID        int
	Flags      map[string]string
}

// readConfig reads and decodes the .config of the mount at mnt.
func readConfig(t *testing.T, mnt string) (mountConfig, string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mnt, ".config"))
	if err != nil {
		t.Fatal(err)
	}
	var c mountConfig
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf(".config is not JSON: %v\n%s", err, b)
	}
	return c, string(b)
}

// listRoot returns the names `ls -a` shows in mnt.
func listRoot(t *testing.T, mnt string) []string {
	t.Helper()
	out, err := exec.Command("ls", "-a", mnt).Output()
	if err != nil {
		t.Fatalf("ls -a %s: %v", mnt, err)
	}
	return strings.Fields(string(out))
}

var internalFileNames = []string{".accesslog", ".config", ".control", ".stats"}

// TestInternalFiles checks the internal files from outside the mount:
// listed by ls -a unless --hide-internal, where they still open by name;
// .config shows the mount point and flags as JSON; .accesslog streams
// the requests to root and is closed to other users, who may read .stats.
func TestInternalFiles(t *testing.T) {
	requireTool(t, "runuser")
	v := newVolume(t)
	v.mount(t, "--attr-cache", "2s")
	for _, name := range internalFileNames {
		if names := listRoot(t, v.mnt); !slices.Contains(names, name) {
			t.Errorf("ls -a %s: %q, missing %s", v.mnt, names, name)
		}
	}

	c, _ := readConfig(t, v.mnt)
	if c.MountPoint != v.mnt || c.MetaURL != v.metaURL || c.PID <= 0 {
		t.Errorf(".config: mount point %q, meta URL %q, pid %d; want %q, %q and the mount's", c.MountPoint, c.MetaURL, c.PID, v.mnt, v.metaURL)
	}
	if c.Flags["attr-cache"] != "2s" || c.Flags["hide-internal"] != "false" || c.Flags["buffer-size"] == "" {
		t.Errorf(".config flags: attr-cache %q, hide-internal %q, buffer-size %q; want 2s, false and the default",
			c.Flags["attr-cache"], c.Flags["hide-internal"], c.Flags["buffer-size"])
	}

	t.Run("access log", func(t *testing.T) {
		f, err := os.Open(v.path(".accesslog"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := os.Stat(v.path("no-such-file")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("stat of a missing file: %v", err)
		}
		// A read returns once lines are there, and end of file after a
		// quiet second.
		want := `lookup (1,"no-such-file"): ENOENT`
		sc := bufio.NewScanner(f)
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if strings.Contains(sc.Text(), want) {
				return
			}
		}
		t.Fatalf("the access log has no line with %q (err %v); it has:\n%s", want, sc.Err(), strings.Join(lines, "\n"))
	})

	t.Run("other users", func(t *testing.T) {
		for _, name := range []string{".accesslog", ".config"} {
			if out, err := asUser(t, "nobody", "cat "+v.path(name)); err == nil || !strings.Contains(out, "Permission denied") {
				t.Errorf("nobody read %s: %v %q, want permission denied", name, err, out)
			}
		}
		out, err := asUser(t, "nobody", "cat "+v.path(".stats"))
		if err != nil {
			t.Fatalf("nobody cannot read .stats: %v", err)
		}
		if fams := parseProm(t, ".stats read by nobody", strings.NewReader(out)); len(fams["sluice_fuse_ops_duration_seconds"]) == 0 {
			t.Errorf(".stats read by nobody has no FUSE operations")
		}
	})

	t.Run("hidden", func(t *testing.T) {
		mnt := filepath.Join(v.dir, "hidden")
		v.mountAt(t, mnt, "--hide-internal")
		names := listRoot(t, mnt)
		for _, name := range internalFileNames {
			if slices.Contains(names, name) {
				t.Errorf("ls -a of a mount with --hide-internal: %q, has %s", names, name)
			}
		}
		b, err := os.ReadFile(filepath.Join(mnt, ".stats"))
		if err != nil {
			t.Fatal(err)
		}
		if fams := parseProm(t, ".stats", bytes.NewReader(b)); len(fams["sluice_used_inodes"]) != 1 {
			t.Errorf(".stats of a mount with --hide-internal has no sluice_used_inodes:\n%.500s", b)
		}
		if c, _ := readConfig(t, mnt); c.MountPoint != mnt || c.Flags["hide-internal"] != "true" {
			t.Errorf(".config of the hidden mount: mount point %q, hide-internal %q", c.MountPoint, c.Flags["hide-internal"])
		}
	})

	t.Run("password hidden", func(t *testing.T) {
		u, err := url.Parse(testserver.URL(t, testserver.Postgres))
		if err != nil {
			t.Fatal(err)
		}
		pass, ok := u.User.Password()
		if !ok || pass == "" {
			testserver.Missing(t, "the PostgreSQL test server's URL has no password", "scripts/test-servers.sh gives it one")
		}
		pv := newVolumeOn(t, "postgres")
		pv.mount(t)
		c, text := readConfig(t, pv.mnt)
		if strings.Contains(text, ":"+pass+"@") {
			t.Errorf(".config shows the password of the metadata URL:\n%s", text)
		}
		cu, err := url.Parse(c.MetaURL)
		if err != nil || cu.Host != u.Host || cu.User.Username() != u.User.Username() {
			t.Fatalf(".config meta URL %q (%v): want the server's host %s and user %s", c.MetaURL, err, u.Host, u.User.Username())
		}
		if shown, _ := cu.User.Password(); shown == pass {
			t.Errorf(".config meta URL %q shows the password", c.MetaURL)
		}
	})
}
