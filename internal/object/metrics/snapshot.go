package metrics

import (
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
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

// WriteText writes s to w in the Prometheus text exposition format, as
// the families Store collects (see Collect), through the Prometheus
// client library.
func (s Snapshot) WriteText(w io.Writer) error {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(snapshotCollector{s}); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return fmt.Errorf("metrics: write text: %w", err)
		}
	}
	return nil
}

// The families a Store collects, each labelled with op.
var (
	requestsDesc = prometheus.NewDesc("sluice_object_requests_total", "Object storage requests by operation.", []string{"op"}, nil)
	errorsDesc   = prometheus.NewDesc("sluice_object_request_errors_total", "Failed object storage requests by operation.", []string{"op"}, nil)
	bytesDesc    = prometheus.NewDesc("sluice_object_bytes_total", "Bytes downloaded by get and uploaded by put.", []string{"op"}, nil)
	durationDesc = prometheus.NewDesc("sluice_object_request_duration_seconds", "Object storage request latency by operation.", []string{"op"}, nil)
)

var _ prometheus.Collector = (*Store)(nil)

// Describe sends the descriptions of the families Collect sends.
func (s *Store) Describe(ch chan<- *prometheus.Desc) { snapshotCollector{}.Describe(ch) }

// Collect sends the current figures: sluice_object_requests_total,
// sluice_object_request_errors_total, sluice_object_bytes_total (get and
// put only) and the histogram sluice_object_request_duration_seconds.
func (s *Store) Collect(ch chan<- prometheus.Metric) { snapshotCollector{s.Snapshot()}.Collect(ch) }

// snapshotCollector collects the figures of one snapshot.
type snapshotCollector struct{ s Snapshot }

func (c snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{requestsDesc, errorsDesc, bytesDesc, durationDesc} {
		ch <- d
	}
}

func (c snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	ops := c.s.ops()
	for i, st := range ops {
		ch <- prometheus.MustNewConstMetric(requestsDesc, prometheus.CounterValue, float64(st.Count), opNames[i])
		ch <- prometheus.MustNewConstMetric(errorsDesc, prometheus.CounterValue, float64(st.Errors), opNames[i])
		buckets := make(map[float64]uint64, len(Buckets))
		var cum uint64
		for j := range len(Buckets) + 1 {
			if j < len(st.Histogram) {
				cum += uint64(st.Histogram[j])
			}
			if j < len(Buckets) {
				buckets[Buckets[j].Seconds()] = cum
			}
		}
		// The count is the histogram's own total, so the family stays
		// consistent even if calls finished while the snapshot was taken.
		ch <- prometheus.MustNewConstHistogram(durationDesc, cum, st.Latency.Seconds(), buckets, opNames[i])
	}
	for _, o := range []op{opGet, opPut} {
		ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.CounterValue, float64(ops[o].Bytes), opNames[o])
	}
}
