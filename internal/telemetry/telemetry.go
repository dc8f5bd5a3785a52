// Package telemetry keeps the metrics of one mount in one Prometheus
// registry: every layer reports there, and every view reads from there —
// `mount --metrics` serves it over HTTP, the internal file .stats shows
// it, and `sluice stats` and dashboards read those.
//
// The access path reports each FUSE operation (FuseOp), the metadata
// engine each transaction (WrapStore), and other layers register
// collectors that read their own counters when scraped (Register), so
// that reporting costs an atomic add or a histogram observation, never
// a lock shared across the mount.
//
// Metric names start with sluice_; docs/metrics.md lists them.
package telemetry

import (
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// LatencyBuckets are the upper bounds, in seconds, of the latency
// histograms: from 50 µs (a FUSE request answered from memory) to 10 s.
var LatencyBuckets = []float64{
	50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3,
	100e-3, 250e-3, 500e-3, 1, 2.5, 5, 10,
}

// Mount is the metrics of one mount.
type Mount struct {
	reg *prometheus.Registry

	fuseOps    *prometheus.HistogramVec
	fuseErrors *prometheus.CounterVec
	fuseRead   prometheus.Counter
	fuseWrite  prometheus.Counter
	txs        *prometheus.HistogramVec
	txRestarts *prometheus.CounterVec
	metaCalls  *prometheus.HistogramVec

	// fuse caches the histogram of each FUSE operation, so that the
	// hot path does not hash its label each time.
	fuse sync.Map // string -> prometheus.Observer
	// calls does the same for the metadata server's calls.
	calls sync.Map // string -> prometheus.Observer
}

// New returns the metrics of a new mount, with the process's CPU, memory
// and Go runtime figures included.
func New() *Mount {
	m := &Mount{reg: prometheus.NewRegistry()}
	m.fuseOps = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sluice_fuse_ops_duration_seconds",
		Help:    "FUSE operations by method: how long the mount took to answer.",
		Buckets: LatencyBuckets,
	}, []string{"method"})
	m.fuseErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_fuse_ops_errors_total",
		Help: "FUSE operations answered with an error other than ENOENT, by method.",
	}, []string{"method"})
	m.fuseRead = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_fuse_read_bytes_total",
		Help: "Bytes the mount returned to read requests.",
	})
	m.fuseWrite = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_fuse_written_bytes_total",
		Help: "Bytes of the write requests the mount took.",
	})
	m.txs = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sluice_meta_transaction_duration_seconds",
		Help:    "Metadata engine transactions by kind (read or write): how long each took, retries included.",
		Buckets: LatencyBuckets,
	}, []string{"kind"})
	m.txRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_meta_transaction_restarts_total",
		Help: "Metadata engine transactions run again after a conflict, by kind.",
	}, []string{"kind"})
	m.metaCalls = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sluice_meta_calls_duration_seconds",
		Help:    "Operations sent whole to the metadata server (sluice:// volumes), by method: how long each took, from request to reply.",
		Buckets: LatencyBuckets,
	}, []string{"method"})
	m.reg.MustRegister(m.fuseOps, m.fuseErrors, m.fuseRead, m.fuseWrite, m.txs, m.txRestarts, m.metaCalls,
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector())
	return m
}

// Registry returns the registry, for collectors of other layers.
func (m *Mount) Registry() *prometheus.Registry { return m.reg }

// Register adds collectors of other layers.
func (m *Mount) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// FuseOp records one FUSE operation: its method, how long it took, and
// whether it failed (ENOENT of a lookup is an answer, not a failure).
func (m *Mount) FuseOp(method string, d time.Duration, failed bool) {
	o, ok := m.fuse.Load(method)
	if !ok {
		o, _ = m.fuse.LoadOrStore(method, m.fuseOps.WithLabelValues(method))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
	if failed {
		m.fuseErrors.WithLabelValues(method).Inc()
	}
}

// MetaCall records one operation sent whole to the metadata server: its
// method and how long it took.
func (m *Mount) MetaCall(method string, d time.Duration) {
	o, ok := m.calls.Load(method)
	if !ok {
		o, _ = m.calls.LoadOrStore(method, m.metaCalls.WithLabelValues(method))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
}

// FuseRead records bytes returned to a read request.
func (m *Mount) FuseRead(n int) { m.fuseRead.Add(float64(n)) }

// FuseWritten records bytes a write request brought.
func (m *Mount) FuseWritten(n int) { m.fuseWrite.Add(float64(n)) }

// WriteText writes every metric in the Prometheus text format.
func (m *Mount) WriteText(w io.Writer) error {
	mfs, err := m.reg.Gather()
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	return nil
}

// Handler serves the metrics over HTTP, as /metrics does.
func (m *Mount) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
