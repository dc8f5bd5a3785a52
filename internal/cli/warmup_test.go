package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicefs/sluice/internal/control"
)

func TestWarmupOptions(t *testing.T) {
	tests := []struct {
		o    warmupOptions
		ok   bool
		mode string
	}{
		{warmupOptions{threads: 4}, true, control.WarmupFetch},
		{warmupOptions{threads: 1, check: true}, true, control.WarmupCheck},
		{warmupOptions{threads: 256, evict: true}, true, control.WarmupEvict},
		{warmupOptions{threads: 4, evict: true, background: true}, true, control.WarmupEvict},
		{warmupOptions{threads: 4, background: true}, true, control.WarmupFetch},
		{warmupOptions{threads: 0}, false, ""},
		{warmupOptions{threads: 257}, false, ""},
		{warmupOptions{threads: 4, check: true, evict: true}, false, ""},
		{warmupOptions{threads: 4, check: true, background: true}, false, ""},
	}
	for _, tt := range tests {
		err := tt.o.validate()
		if (err == nil) != tt.ok {
			t.Errorf("validate(%+v) = %v, want ok %v", tt.o, err, tt.ok)
		}
		if tt.ok && tt.o.mode() != tt.mode {
			t.Errorf("mode(%+v) = %q, want %q", tt.o, tt.o.mode(), tt.mode)
		}
	}
}

func TestWarmupPaths(t *testing.T) {
	list := filepath.Join(t.TempDir(), "list")
	if err := os.WriteFile(list, []byte("/a/b\n\n  \n/c d/e\r\n/f"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := warmupPaths([]string{"x"}, list)
	if want := []string{"x", "/a/b", "/c d/e", "/f"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("warmupPaths = %q, %v; want %q", got, err, want)
	}
	if _, err := warmupPaths(nil, ""); err == nil {
		t.Error("warmupPaths without paths: no error")
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := warmupPaths(nil, empty); err == nil {
		t.Error("warmupPaths of an empty list: no error")
	}
}

func TestPrintWarmup(t *testing.T) {
	paths := []control.WarmupPath{
		{Path: "/m/a", WarmupTotals: control.WarmupTotals{Files: 2, Blocks: 3, Bytes: 4 << 20, Cached: 1 << 20}},
		{Path: "/m/b", WarmupTotals: control.WarmupTotals{Files: 1, Blocks: 1, Bytes: 0, Cached: 0}},
	}
	total := control.WarmupTotals{Files: 3, Blocks: 4, Bytes: 4 << 20, Cached: 1 << 20}
	tests := []struct {
		r    control.WarmupResult
		want string
	}{
		{control.WarmupResult{Mode: control.WarmupCheck, Paths: paths, Total: total},
			"/m/a: 1.0 MiB of 4.0 MiB cached (25.0%), 2 files, 3 blocks\n" +
				"/m/b: 0 B of 0 B cached (100.0%), 1 file, 1 block\n" +
				"total: 1.0 MiB of 4.0 MiB cached (25.0%), 3 files, 4 blocks\n"},
		{control.WarmupResult{Mode: control.WarmupCheck, Paths: paths[:1], Total: paths[0].WarmupTotals},
			"/m/a: 1.0 MiB of 4.0 MiB cached (25.0%), 2 files, 3 blocks\n"},
		{control.WarmupResult{Mode: control.WarmupFetch, Paths: paths, Total: total, Fetched: 512 << 10, Tiers: []string{"memory", "disk"}},
			"warmed up 3 files: 1.0 MiB in 4 blocks in the disk cache, 512.0 KiB fetched from object storage\n"},
		{control.WarmupResult{Mode: control.WarmupEvict, Paths: paths, Total: total},
			"evicted 1.0 MiB of 3 files (4.0 MiB of blocks) from the cache\n"},
		{control.WarmupResult{Mode: control.WarmupFetch, Paths: paths, Background: true},
			"the mount goes on in the background with 2 paths; it logs the result\n"},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		if err := printWarmup(&b, &tt.r, warmupOptions{}); err != nil {
			t.Fatal(err)
		}
		if b.String() != tt.want {
			t.Errorf("printWarmup(%s):\n%s\nwant:\n%s", tt.r.Mode, b.String(), tt.want)
		}
	}
	var b bytes.Buffer
	if err := printWarmup(&b, &tests[0].r, warmupOptions{json: true}); err != nil || !strings.Contains(b.String(), `"cached": 1048576`) {
		t.Errorf("printWarmup --json: %v\n%s", err, b.String())
	}
}
