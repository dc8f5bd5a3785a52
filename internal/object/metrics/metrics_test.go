package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/fault"
	"github.com/sluicefs/sluice/internal/object/file"
	"github.com/sluicefs/sluice/internal/object/metrics"
	"github.com/sluicefs/sluice/internal/object/objecttest"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata")

// newStack returns metrics(fault(file)).
func newStack(t testing.TB, cfg fault.Config) (*metrics.Store, *fault.Store) {
	t.Helper()
	inner, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f, err := fault.New(inner, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return metrics.New(f), f
}

func TestSuite(t *testing.T) {
	objecttest.Run(t, func(t *testing.T) object.Store {
		s, _ := newStack(t, fault.Config{})
		return s
	})
}

func TestCounts(t *testing.T) {
	const delay = 20 * time.Millisecond
	s, f := newStack(t, fault.Config{Rules: map[fault.Op]fault.Rule{fault.Head: {Delay: delay}}})
	ctx := context.Background()
	for i, n := range []int{10, 20, 30} {
		objecttest.Put(t, s, string(rune('a'+i)), make([]byte, n))
	}
	f.FailNext(fault.Put, 1)
	if err := s.Put(ctx, "d", bytes.NewReader(make([]byte, 40))); err == nil {
		t.Fatal("Put succeeded despite a fault")
	}
	objecttest.Get(t, s, "a", 0, -1)
	objecttest.Get(t, s, "b", 0, -1)
	objecttest.Get(t, s, "c", 25, 100)
	if _, err := s.Get(ctx, "missing", 0, -1); !errors.Is(err, object.ErrNotFound) {
		t.Fatalf("Get(missing): %v", err)
	}
	// A stream that breaks midway counts as an error with its bytes.
	if err := f.Set(fault.Config{Seed: 1, Rules: map[fault.Op]fault.Rule{fault.Get: {ReadErr: 1}, fault.Head: {Delay: delay}}}); err != nil {
		t.Fatal(err)
	}
	rc, err := s.Get(ctx, "c", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	partial, err := io.ReadAll(rc)
	if err == nil {
		t.Fatal("read did not break")
	}
	rc.Close()
	s.Head(ctx, "a")
	s.Head(ctx, "missing")
	s.List(ctx, "", "", 0)
	s.Delete(ctx, "a")

	snap := s.Snapshot()
	tests := []struct {
		name                 string
		got                  metrics.OpStats
		count, errors, bytes int64
	}{
		{"get", snap.Get, 5, 2, 10 + 20 + 5 + int64(len(partial))},
		{"put", snap.Put, 4, 1, 60},
		{"head", snap.Head, 2, 1, 0},
		{"list", snap.List, 1, 0, 0},
		{"delete", snap.Delete, 1, 0, 0},
	}
	for _, tt := range tests {
		g := tt.got
		if g.Count != tt.count || g.Errors != tt.errors || g.Bytes != tt.bytes {
			t.Errorf("%s: count %d, errors %d, bytes %d; want %d, %d, %d", tt.name, g.Count, g.Errors, g.Bytes, tt.count, tt.errors, tt.bytes)
		}
		if sum(g.Histogram) != g.Count || len(g.Histogram) != len(metrics.Buckets)+1 {
			t.Errorf("%s: histogram %v does not add up to %d calls", tt.name, g.Histogram, g.Count)
		}
	}
	// Both Heads took at least the injected delay: none is in a bucket
	// below it, and the sum holds both.
	for i, b := range metrics.Buckets {
		if b < delay && snap.Head.Histogram[i] != 0 {
			t.Errorf("head histogram %v has calls faster than %v", snap.Head.Histogram, delay)
		}
	}
	if snap.Head.Latency < 2*delay {
		t.Errorf("head latency sum %v, want at least %v", snap.Head.Latency, 2*delay)
	}
}

func sum(h []int64) int64 {
	var n int64
	for _, v := range h {
		n += v
	}
	return n
}

func TestConcurrent(t *testing.T) {
	s, _ := newStack(t, fault.Config{})
	objecttest.Put(t, s, "k", []byte("12345"))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				objecttest.Get(t, s, "k", 0, -1)
				s.Head(context.Background(), "k")
			}
		})
	}
	wg.Wait()
	snap := s.Snapshot()
	if snap.Get.Count != 400 || snap.Get.Bytes != 2000 || snap.Head.Count != 400 || sum(snap.Get.Histogram) != 400 {
		t.Errorf("after 400 Gets and Heads: get %+v, head count %d", snap.Get, snap.Head.Count)
	}
}

// golden is a hand-made snapshot for the text format test.
func golden() metrics.Snapshot {
	h := func(at ...int) []int64 {
		out := make([]int64, len(metrics.Buckets)+1)
		for _, i := range at {
			out[i]++
		}
		return out
	}
	return metrics.Snapshot{
		Get:    metrics.OpStats{Count: 3, Errors: 1, Bytes: 4 << 20, Latency: 1500 * time.Millisecond, Histogram: h(0, 4, 12)},
		Put:    metrics.OpStats{Count: 2, Bytes: 8 << 20, Latency: 20 * time.Millisecond, Histogram: h(2, 2)},
		Head:   metrics.OpStats{Count: 1, Errors: 1, Latency: time.Millisecond, Histogram: h(0)},
		Delete: metrics.OpStats{}, // no histogram at all: written as zeros
	}
}

func TestWriteTextGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := golden().WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "metrics.txt")
	if *rewrite {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -rewrite to create it)", err)
	}
	if buf.String() != string(want) {
		t.Errorf("WriteText differs from %s (go test -rewrite updates it):\n%s", path, buf.String())
	}
}

// TestWriteTextParses feeds the output of a live store to the Prometheus
// text parser and checks the values it reads back.
func TestWriteTextParses(t *testing.T) {
	s, _ := newStack(t, fault.Config{})
	objecttest.Put(t, s, "k", make([]byte, 1000))
	objecttest.Get(t, s, "k", 0, -1)
	var buf bytes.Buffer
	if err := s.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatalf("Prometheus parser rejects the output: %v\n%s", err, buf.String())
	}
	value := func(family, op string) float64 {
		for _, m := range families[family].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == op {
					if m.GetCounter() != nil {
						return m.GetCounter().GetValue()
					}
					return float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
		t.Fatalf("no %s{op=%q}", family, op)
		return 0
	}
	checks := []struct {
		family, op string
		want       float64
	}{
		{"sluice_object_requests_total", "put", 1},
		{"sluice_object_requests_total", "get", 1},
		{"sluice_object_requests_total", "list", 0},
		{"sluice_object_bytes_total", "put", 1000},
		{"sluice_object_bytes_total", "get", 1000},
		{"sluice_object_request_errors_total", "get", 0},
		{"sluice_object_request_duration_seconds", "get", 1},
	}
	for _, c := range checks {
		if got := value(c.family, c.op); got != c.want {
			t.Errorf("%s{op=%q} = %v, want %v", c.family, c.op, got, c.want)
		}
	}
}
