package e2e

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// statsOutput splits the output of `sluice stats`: its header lines
// (the group names over dashes, then the column names) and data lines.
func statsOutput(t *testing.T, out string) (groups, columns string, data []string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "-") {
		t.Fatalf("no header in the output of stats:\n%s", out)
	}
	for _, l := range lines[2:] {
		if strings.HasPrefix(l, "-") {
			t.Fatalf("a header again within 20 lines:\n%s", out)
		}
	}
	return lines[0], lines[1], lines[2:]
}

// statsCell returns the cell of column col in the group'th group (from
// 0) of a data line, given the column names line.
func statsCell(t *testing.T, columns, line string, group int, col string) string {
	t.Helper()
	names, cells := strings.Split(columns, "|"), strings.Split(line, "|")
	if len(names) != len(cells) || group >= len(names) {
		t.Fatalf("line %q does not fit the header %q", line, columns)
	}
	n, c := strings.Fields(names[group]), strings.Fields(cells[group])
	if len(n) != len(c) {
		t.Fatalf("line %q does not fit the header %q", line, columns)
	}
	for i := range n {
		if n[i] == col {
			return c[i]
		}
	}
	t.Fatalf("no column %s in group %d of %q", col, group, columns)
	return ""
}

// statsNumber parses a figure of stats: "-", or a number with an
// optional K, M, G or T.
func statsNumber(t *testing.T, s string) (float64, bool) {
	t.Helper()
	if s == "-" {
		return 0, false
	}
	mult := 1.0
	if i := strings.IndexAny(s, "KMGT"); i == len(s)-1 {
		mult = map[byte]float64{'K': 1e3, 'M': 1e6, 'G': 1e9, 'T': 1e12}[s[i]]
		s = s[:i]
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("figure %q: %v", s, err)
	}
	return v * mult, true
}

// TestStatsLive runs `sluice stats MOUNT --interval 1 --count 3` while a
// writer writes in the mount: three lines under one header, FUSE
// requests in at least one of them, and the object storage columns with
// --schema o.
func TestStatsLive(t *testing.T) {
	v := newVolume(t)
	v.mount(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		block := make([]byte, 256<<10)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			f, err := os.Create(v.path("written"))
			if err != nil {
				t.Error(err)
				return
			}
			for range 8 {
				if _, err := f.Write(block); err != nil {
					t.Error(err)
					break
				}
			}
			if err := f.Close(); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()

	out := mustSluice(t, "stats", v.mnt, "--interval", "1", "--count", "3")
	groups, columns, data := statsOutput(t, out)
	if len(data) != 3 {
		t.Fatalf("%d data lines, want 3:\n%s", len(data), out)
	}
	for _, g := range []string{"usage", "fuse", "meta", "cache", "object"} {
		if !strings.Contains(groups, g) {
			t.Errorf("no group %s in the header %q", g, groups)
		}
	}
	busy := false
	for _, l := range data {
		// The default schema is ufmco: fuse is the second group.
		ops, ok := statsNumber(t, statsCell(t, columns, l, 1, "ops"))
		if !ok {
			t.Errorf("no FUSE ops figure in %q", l)
		}
		busy = busy || ops > 0
		if mem, ok := statsNumber(t, statsCell(t, columns, l, 0, "mem")); !ok || mem < 1e6 {
			t.Errorf("mount's memory %v in %q", mem, l)
		}
	}
	if !busy {
		t.Errorf("no FUSE requests counted while a writer wrote:\n%s", out)
	}

	out = mustSluice(t, "stats", v.mnt, "--interval", "1", "--count", "2", "--schema", "o")
	groups, columns, data = statsOutput(t, out)
	if len(data) != 2 || !strings.Contains(groups, "object") {
		t.Fatalf("--schema o --count 2:\n%s", out)
	}
	if got, want := strings.Fields(columns), []string{"get", "put", "getB", "putB", "err", "lat"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("--schema o columns %v, want %v", got, want)
	}
	put := 0.0
	for _, l := range data {
		n, ok := statsNumber(t, statsCell(t, columns, l, 0, "putB"))
		if !ok {
			t.Errorf("no putB figure in %q", l)
		}
		put += n
	}
	if put == 0 {
		t.Errorf("no bytes uploaded in 2 s of 2 MiB writes:\n%s", out)
	}
}
