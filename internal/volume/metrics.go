package volume

import (
	"bufio"
	"fmt"
	"io"
)

// WriteDataMetrics writes, in the Prometheus text exposition format, what
// the mount's background compaction and deletion did: the families
// sluice_compaction_* and sluice_deletion_*. Nothing below Level
// FileSystem.
func (v *Volume) WriteDataMetrics(w io.Writer) error {
	if v.fs == nil || v.client == nil {
		return nil
	}
	c := v.fs.CompactionStats()
	d := v.client.DeletionStats()
	bw := bufio.NewWriter(w)
	metric := func(name, typ, help string, val int64) {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", name, help, name, typ, name, val)
	}
	metric("sluice_compaction_chunks_total", "counter", "Chunks whose slice list this mount compacted.", int64(c.Chunks))
	metric("sluice_compaction_dropped_entries_total", "counter", "Slice list entries dropped because nothing showed them.", int64(c.Dropped))
	metric("sluice_compaction_copied_bytes_total", "counter", "Bytes compaction copied into new slices.", c.Bytes)
	metric("sluice_compaction_freed_bytes_total", "counter", "Bytes of slices compaction released.", c.Freed)
	metric("sluice_compaction_skipped_total", "counter", "Chunks that kept changing during compaction and were left alone.", int64(c.Skipped))
	metric("sluice_compaction_waste_bytes", "gauge", "Bytes the chunks this mount checked store beyond what they show (space amplification), as of each one's last check.", c.Waste)
	metric("sluice_compaction_pending_chunks", "gauge", "Chunks queued for a compaction check or waiting to settle.", int64(c.Pending))
	metric("sluice_deletion_slices_total", "counter", "Slices whose blocks this mount deleted.", d.Deleted)
	metric("sluice_deletion_bytes_total", "counter", "Bytes of the slices this mount deleted.", d.DeletedBytes)
	metric("sluice_deletion_failures_total", "counter", "Slice deletions that failed and stayed queued.", d.Failed)
	metric("sluice_deletion_queue_slices", "gauge", "Slices queued for deletion at the start of the last deletion round (at most one batch).", d.Queued)
	metric("sluice_deletion_queue_bytes", "gauge", "Bytes of those slices.", d.QueuedBytes)
	return bw.Flush()
}
