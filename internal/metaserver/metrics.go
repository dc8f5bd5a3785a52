package metaserver

import (
	"math"
	rtmetrics "runtime/metrics"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluicefs/sluice/internal/wire"
)

// metrics are the server's Prometheus collectors (Registry).
type metrics struct {
	reg             *prometheus.Registry
	ops             *prometheus.HistogramVec
	fsync           prometheus.Histogram
	batch           prometheus.Histogram
	logBytes        prometheus.Counter
	checkpointBytes prometheus.Gauge
	checkpoints     prometheus.Counter
	conflicts       prometheus.Counter
	retried         prometheus.Counter
	keys            prometheus.Gauge
	inodes          prometheus.Gauge
	inodesNow       atomic.Int64
	index           prometheus.Gauge
	conns           prometheus.Gauge
	sessions        prometheus.Gauge
	retriedCalls    prometheus.Counter
	appliedCalls    prometheus.Counter
	refused         prometheus.Counter
	readsBehind     prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		ops: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_metaserver_op_seconds", Help: "Requests served, by operation: time from arrival to reply (commits: to durable).",
			Buckets: prometheus.ExponentialBuckets(5e-6, 2.5, 14),
		}, []string{"op"}),
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sluice_metaserver_log_sync_seconds", Help: "Time to write and fsync one group of log records.",
			Buckets: prometheus.ExponentialBuckets(5e-5, 2.5, 12),
		}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sluice_metaserver_group_commits", Help: "Commits made durable by one fsync.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
		logBytes:        prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_metaserver_log_bytes_total", Help: "Bytes appended to the log."}),
		checkpointBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_metaserver_checkpoint_bytes", Help: "Size of the newest checkpoint."}),
		checkpoints:     prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_metaserver_checkpoints_total", Help: "Checkpoints written."}),
		conflicts:       prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_metaserver_conflicts_total", Help: "Commits refused because what they read changed."}),
		retried:         prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_metaserver_retried_commits_total", Help: "Commits received again after they were applied (answered, not applied twice)."}),
		keys:            prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_metaserver_keys", Help: "Records held."}),
		inodes:          prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_metaserver_inodes", Help: "Inodes held (files, directories and the rest)."}),
		index:           prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_metaserver_log_index", Help: "Index of the last durable log record."}),
		conns:           prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_metaserver_connections", Help: "Open client connections."}),
		sessions:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_metaserver_sessions", Help: "Mount sessions attached, whose operations the server runs."}),
		retriedCalls:    prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_metaserver_retried_calls_total", Help: "Operations received again after their connection broke (answered, not run twice)."}),
		appliedCalls:    prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_metaserver_applied_calls_total", Help: "Operations sent again after a restart whose effect the log held already (answered from the records, not run again)."}),
		refused:         prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_metaserver_refused_connections_total", Help: "Connections closed before their first request: TLS or the secret's handshake failed (a wrong or missing secret, or a silent peer)."}),
		readsBehind:     prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_metaserver_reads_behind_total", Help: "Reads from any member (read=follower) sent to the leader because this member had not applied what the mount had seen."}),
	}
	perInode := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sluice_metaserver_heap_bytes_per_inode",
		Help: "Go heap in live and not yet collected objects, over the inodes held: the memory a file costs.",
	}, func() float64 {
		sample := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		rtmetrics.Read(sample)
		return float64(sample[0].Value.Uint64()) / math.Max(1, float64(m.inodesNow.Load()))
	})
	m.reg.MustRegister(m.ops, m.fsync, m.batch, m.logBytes, m.checkpointBytes, m.checkpoints, m.conflicts, m.retried, m.keys, m.inodes, perInode, m.index, m.conns, m.sessions, m.retriedCalls, m.appliedCalls, m.refused, m.readsBehind,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// pages registers the gauges of the state's pages, read from the tree
// state returns (the published one).
func (m *metrics) pages(state func() *tree) {
	gauge := func(name, help string, f func(t *tree) int) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			if t := state(); t != nil {
				return float64(f(t))
			}
			return 0
		})
	}
	m.reg.MustRegister(
		gauge("sluice_metaserver_pages", "Pages of records held (runs of about fifty records).", func(t *tree) int { return t.pages.Len() }),
		gauge("sluice_metaserver_pages_compressed", "Pages held compressed because nobody used them for a while.", func(t *tree) int { return t.zpages }),
		gauge("sluice_metaserver_page_bytes", "Memory the records take in their pages, compressed or not.", func(t *tree) int { return t.bytes }),
		gauge("sluice_metaserver_page_compressed_bytes", "Memory the compressed pages take.", func(t *tree) int { return t.zbytes }),
	)
}

// setInodes sets the inode gauge and what the per-inode gauge divides by.
func (m *metrics) setInodes(n int64) {
	m.inodes.Set(float64(n))
	m.inodesNow.Store(n)
}

func (m *metrics) observe(op string, start time.Time) {
	m.ops.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// Registry returns the server's metrics.
func (s *Server) Registry() *prometheus.Registry { return s.m.reg }

func opName(k byte) string {
	switch k {
	case wire.OpHello:
		return "hello"
	case wire.OpGet:
		return "get"
	case wire.OpScan:
		return "scan"
	case wire.OpCommit:
		return "commit"
	case wire.OpRelease:
		return "release"
	case wire.OpMember:
		return "member"
	case wire.OpStats:
		return "stats"
	case wire.OpGetFollow:
		return "get_follow"
	case wire.OpAttach:
		return "attach"
	case wire.OpDetach:
		return "detach"
	case wire.OpCancel:
		return "cancel"
	case wire.OpIndex:
		return "index"
	}
	return "unknown"
}
