package metrics

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"time"
)

// OpStats are the figures of one operation.
type OpStats struct {
	Count   int64         // calls made
	Errors  int64         // calls failed, and for Get streams failed midway
	Bytes   int64         // bytes downloaded (Get) or uploaded (Put)
	Latency time.Duration // total latency of all calls
	// Histogram counts calls by latency: Histogram[i] those slower than
	// Buckets[i-1] and no slower than Buckets[i]; the last entry those
	// slower than every bucket. Its length is len(Buckets)+1.
	Histogram []int64
}

// Snapshot is a copy of the figures of a Store at one moment.
type Snapshot struct {
	Get, Put, Head, List, Delete OpStats
}

// ops returns the operation labels and stats of s, in a fixed order.
func (s *Snapshot) ops() [numOps]*OpStats {
	return [numOps]*OpStats{&s.Get, &s.Put, &s.Head, &s.List, &s.Delete}
}

// Snapshot returns the current figures. Counters are read one by one, so
// calls finishing meanwhile may show in some and not yet in others.
func (s *Store) Snapshot() Snapshot {
	var snap Snapshot
	for i, st := range snap.ops() {
		c := &s.ops[i]
		st.Count = c.count.Load()
		st.Errors = c.errors.Load()
		st.Bytes = c.bytes.Load()
		st.Latency = time.Duration(c.latency.Load())
		st.Histogram = make([]int64, len(c.buckets))
		for j := range c.buckets {
			st.Histogram[j] = c.buckets[j].Load()
		}
	}
	return snap
}

// WriteText writes the current figures to w in the Prometheus text
// exposition format; see Snapshot.WriteText.
func (s *Store) WriteText(w io.Writer) error {
	snap := s.Snapshot()
	return snap.WriteText(w)
}

// WriteText writes s to w in the Prometheus text exposition format (version
// 0.0.4), as the metric families sluice_object_requests_total,
// sluice_object_request_errors_total, sluice_object_bytes_total (get and
// put only) and the histogram sluice_object_request_duration_seconds,
// each labelled with op.
func (s Snapshot) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	ops := s.ops()
	family := func(name, typ, help string) {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	family("sluice_object_requests_total", "counter", "Object storage requests by operation.")
	for i, st := range ops {
		fmt.Fprintf(bw, "sluice_object_requests_total{op=%q} %d\n", opNames[i], st.Count)
	}
	family("sluice_object_request_errors_total", "counter", "Failed object storage requests by operation.")
	for i, st := range ops {
		fmt.Fprintf(bw, "sluice_object_request_errors_total{op=%q} %d\n", opNames[i], st.Errors)
	}
	family("sluice_object_bytes_total", "counter", "Bytes downloaded by get and uploaded by put.")
	for _, o := range []op{opGet, opPut} {
		fmt.Fprintf(bw, "sluice_object_bytes_total{op=%q} %d\n", opNames[o], ops[o].Bytes)
	}
	const hist = "sluice_object_request_duration_seconds"
	family(hist, "histogram", "Object storage request latency by operation.")
	for i, st := range ops {
		var cum int64
		for j := range len(Buckets) + 1 {
			if j < len(st.Histogram) {
				cum += st.Histogram[j]
			}
			le := "+Inf"
			if j < len(Buckets) {
				le = strconv.FormatFloat(Buckets[j].Seconds(), 'g', -1, 64)
			}
			fmt.Fprintf(bw, "%s_bucket{op=%q,le=%q} %d\n", hist, opNames[i], le, cum)
		}
		fmt.Fprintf(bw, "%s_sum{op=%q} %s\n", hist, opNames[i], strconv.FormatFloat(st.Latency.Seconds(), 'g', -1, 64))
		// The count is the histogram's own total, so the family stays
		// consistent even if calls finished while the snapshot was taken.
		fmt.Fprintf(bw, "%s_count{op=%q} %d\n", hist, opNames[i], cum)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("metrics: write text: %w", err)
	}
	return nil
}
