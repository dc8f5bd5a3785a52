package volume

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/chunk/cache"
	"github.com/sluicefs/sluice/internal/telemetry"
	"github.com/sluicefs/sluice/internal/vfs"
)

// Telemetry returns the mount's metrics, to which the access path reports
// its requests and which .stats and `mount --metrics` show. Nil below
// Level FileSystem.
func (v *Volume) Telemetry() *telemetry.Mount { return v.telemetry }

// registerMetrics registers the collectors of the volume's layers with
// v.telemetry: object storage requests, the chunk store's caches and
// buffers, compaction, deletion, and the volume's usage.
func (v *Volume) registerMetrics() error {
	t := v.telemetry
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	comp := func(f func(c vfs.CompactionStats) float64) func() float64 {
		return func() float64 { return f(v.fs.CompactionStats()) }
	}
	cs := []prometheus.Collector{
		v.metrics,
		newCacheCollector(v.chunks.CacheStats),
		counter("sluice_compaction_chunks_total", "Chunks whose slice list this mount compacted.",
			comp(func(c vfs.CompactionStats) float64 { return float64(c.Chunks) })),
		counter("sluice_compaction_dropped_entries_total", "Slice list entries dropped because nothing showed them.",
			comp(func(c vfs.CompactionStats) float64 { return float64(c.Dropped) })),
		counter("sluice_compaction_copied_bytes_total", "Bytes compaction copied into new slices.",
			comp(func(c vfs.CompactionStats) float64 { return float64(c.Bytes) })),
		counter("sluice_compaction_freed_bytes_total", "Bytes of slices compaction released.",
			comp(func(c vfs.CompactionStats) float64 { return float64(c.Freed) })),
		counter("sluice_compaction_skipped_total", "Chunks that kept changing during compaction and were left alone.",
			comp(func(c vfs.CompactionStats) float64 { return float64(c.Skipped) })),
		gauge("sluice_compaction_waste_bytes", "Bytes the chunks this mount checked store beyond what they show (space amplification), as of each one's last check.",
			comp(func(c vfs.CompactionStats) float64 { return float64(c.Waste) })),
		gauge("sluice_compaction_pending_chunks", "Chunks queued for a compaction check or waiting to settle.",
			comp(func(c vfs.CompactionStats) float64 { return float64(c.Pending) })),
		counter("sluice_deletion_slices_total", "Slices whose blocks this mount deleted.",
			func() float64 { return float64(v.client.DeletionStats().Deleted) }),
		counter("sluice_deletion_bytes_total", "Bytes of the slices this mount deleted.",
			func() float64 { return float64(v.client.DeletionStats().DeletedBytes) }),
		counter("sluice_deletion_failures_total", "Slice deletions that failed and stayed queued.",
			func() float64 { return float64(v.client.DeletionStats().Failed) }),
		gauge("sluice_deletion_queue_slices", "Slices queued for deletion at the start of the last deletion round (at most one batch).",
			func() float64 { return float64(v.client.DeletionStats().Queued) }),
		gauge("sluice_deletion_queue_bytes", "Bytes of the slices queued for deletion.",
			func() float64 { return float64(v.client.DeletionStats().QueuedBytes) }),
		gauge("sluice_staging_blocks", "Blocks staged by --writeback in the cache directory and not yet uploaded.",
			func() float64 { n, _ := v.chunks.Staged(); return float64(n) }),
		gauge("sluice_staging_bytes", "Bytes of the blocks staged and not yet uploaded.",
			func() float64 { _, n := v.chunks.Staged(); return float64(n) }),
		gauge("sluice_used_space_bytes", "Bytes the volume's files use (shared through the engine about once a second).",
			func() float64 { return float64(v.usage().used) }),
		gauge("sluice_used_inodes", "Inodes the volume's files use.",
			func() float64 { return float64(v.usage().inodes) }),
	}
	cs = append(cs, newGroupCollector(v.group))
	return t.Register(cs...)
}

// usageFigures is the volume's usage as of the last scrape.
type usageFigures struct {
	used, inodes uint64
}

// usage returns the volume's usage, asking the engine at most once a
// second however many series read it.
func (v *Volume) usage() usageFigures {
	v.usageMu.Lock()
	defer v.usageMu.Unlock()
	if time.Since(v.usageAt) < time.Second {
		return v.usageLast
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := v.client.StatFS(ctx)
	if err == nil {
		v.usageLast = usageFigures{used: st.TotalSpace - st.AvailSpace, inodes: st.UsedInodes}
		v.usageAt = time.Now()
	}
	return v.usageLast
}

// cacheCollector reports the chunk store's block caches, per tier, and
// its write buffers, from one CacheStats per scrape.
type cacheCollector struct {
	stats                                 func() chunk.CacheStats
	hits, misses, evictions, bytes, count *prometheus.Desc
	bufUsed, bufSize                      *prometheus.Desc
}

func newCacheCollector(stats func() chunk.CacheStats) *cacheCollector {
	tier := []string{"tier"}
	return &cacheCollector{
		stats: stats,
		hits: prometheus.NewDesc("sluice_blockcache_hits_total",
			"Block reads of applications the block cache served, by tier (memory, disk; peer: a member of the cache group).", tier, nil),
		misses: prometheus.NewDesc("sluice_blockcache_misses_total",
			"Block reads of applications that waited for the object store.", nil, nil),
		evictions: prometheus.NewDesc("sluice_blockcache_evictions_total",
			"Blocks dropped from the cache to make room or keep the free-space ratio, by tier.", tier, nil),
		bytes: prometheus.NewDesc("sluice_blockcache_bytes",
			"Bytes the cached blocks take, by tier (on disk, file sizes with checksums).", tier, nil),
		count: prometheus.NewDesc("sluice_blockcache_blocks",
			"Blocks cached, by tier.", tier, nil),
		bufUsed: prometheus.NewDesc("sluice_buffer_used_bytes",
			"Bytes the write buffers of open files hold.", nil, nil),
		bufSize: prometheus.NewDesc("sluice_buffer_size_bytes",
			"Limit of the write buffers (--buffer-size): beyond it writers upload and wait.", nil, nil),
	}
}

// Describe sends the descriptions of the metrics.
func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.hits, c.misses, c.evictions, c.bytes, c.count, c.bufUsed, c.bufSize} {
		ch <- d
	}
}

// Collect sends the current figures. The disk tier is always reported,
// at zero without a disk cache, so that its series do not come and go.
func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	ch <- prometheus.MustNewConstMetric(c.misses, prometheus.CounterValue, float64(st.Misses))
	for _, t := range []struct {
		name string
		s    cache.Stats
		hits uint64
	}{{"memory", st.Memory, st.MemoryHits}, {"disk", st.Disk, st.DiskHits}} {
		ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(t.hits), t.name)
		ch <- prometheus.MustNewConstMetric(c.evictions, prometheus.CounterValue, float64(t.s.Evictions), t.name)
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(t.s.Bytes), t.name)
		ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(t.s.Blocks), t.name)
	}
	ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(st.PeerHits), "peer")
	ch <- prometheus.MustNewConstMetric(c.bufUsed, prometheus.GaugeValue, float64(st.BufferUsed))
	ch <- prometheus.MustNewConstMetric(c.bufSize, prometheus.GaugeValue, float64(st.BufferSize))
}
