package meta

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Space accounting for `sluice status --more` and `sluice gc`: how many
// bytes the slices a volume stores hold beyond what its chunk lists read
// from them, and what the deletion queues still hold.

// SpaceOptions tune SpaceUsage.
type SpaceOptions struct {
	// Progress, when set, is told the number of records scanned so far
	// (reference counts, inode records and queue records), after each
	// page.
	Progress func(records int64)
	// OnChunk, when set, is told each chunk record the scan meets, with
	// its inode, for a caller that gathers more from the same scan (gc
	// collects the slices to compare the bucket with). c is valid only
	// during the call.
	OnChunk func(ino Ino, c *store.ChunkRecord)
	// Now tells the time queued files' expiry is compared with. Default
	// time.Now.
	Now func() time.Time
}

// SpaceReport is what SpaceUsage found. Byte figures are logical slice
// bytes, before compression and encryption.
type SpaceReport struct {
	Files        int64 // inodes of regular files (with attributes)
	Chunks       int64 // chunk records (slice lists), queued inodes' included
	SliceEntries int64 // entries of those lists, holes included
	Slices       int64 // distinct stored slices they name (id 0 is a hole, not stored)

	// Referenced is the stored size (Slice.Size) of those distinct
	// slices, each counted once however many entries name it.
	Referenced int64
	// Visible is the bytes the chunk lists read from stored slices when
	// replayed (Visible over the whole chunk), summed over every chunk
	// record: the bytes files show, and queued inodes would.
	Visible int64
	// Detached is the part of Visible read by chunk lists of inodes
	// without attributes: deleted files waiting in the deletion queue,
	// and slice lists that compaction in earlier versions parked until
	// they expired.
	// Visible-Detached is what the volume's files show.
	Detached int64

	// Backlog is what the deletion queues hold.
	Backlog DeletionBacklog
}

// DeletionBacklog is the content of the deletion queues.
type DeletionBacklog struct {
	// Slices are queued for their blocks to be deleted; SliceBytes is
	// the sum of their sizes.
	Slices, SliceBytes int64
	// Files are deleted files (and slice lists parked by earlier versions' compaction)
	// whose chunks are still to be dropped; FileBytes is the sum of the
	// lengths their queue records give.
	Files, FileBytes int64
	// Waiting and WaitingBytes count those of Files whose expiry is
	// still in the future: the deletion loop leaves them alone until
	// then.
	Waiting, WaitingBytes int64
}

// Amplification is the stored bytes beyond the visible ones,
// Referenced-Visible: bytes of slices that later slices overwrote, or
// that a truncation or hole cut off. It is negative when files share
// slices (copy_file_range): each file shows the shared bytes, which are
// stored once.
func (r *SpaceReport) Amplification() int64 { return r.Referenced - r.Visible }

// Ratio is Referenced/Visible, 0 when nothing is visible.
func (r *SpaceReport) Ratio() float64 {
	if r.Visible == 0 {
		return 0
	}
	return float64(r.Referenced) / float64(r.Visible)
}

// SpaceUsage scans the volume in st and reports the bytes its slices
// store against the bytes its chunk lists read from them, and the
// deletion backlog. It pages through the slice reference counts, every
// inode record and the two deletion queues, one short read-only
// transaction per page, so it runs on a volume in use; then its figures
// mix moments, and a slice shared during the scan may be counted twice.
// On redis, whose scans may return a record twice, they are estimates.
//
// Memory: a slice named by one chunk entry has no reference count
// record, so its size is added where the entry is met and nothing is
// kept. Only the slices the reference counts say are shared (extra
// references > 0, e.g. by copy_file_range) are kept in a map, to count
// each once: about 50 bytes per shared slice, besides one page. That is
// exact on a consistent volume (one fsck finds sound) and small unless
// most slices are shared; a volume of 100 million cloned slices would
// need some 5 GB.
func SpaceUsage(ctx context.Context, st store.Store, opts SpaceOptions) (*SpaceReport, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	r := &SpaceReport{}
	var records int64
	progress := func(n int) {
		records += int64(n)
		if opts.Progress != nil {
			opts.Progress(records)
		}
	}
	// shared tells, for each shared slice, whether it was counted yet.
	shared := map[SliceKey]bool{}
	err := scanPages(ctx, st, store.Tx.ScanSliceRefs, func(page []store.SliceRefRecord) error {
		for _, ref := range page {
			if ref.Extra > 0 {
				shared[SliceKey{ref.Id, ref.Size}] = false
			}
		}
		progress(len(page))
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("scan slice reference counts: %w", err)
	}
	err = scanInodesDetached(ctx, st, func(page []store.InodeRecord, detached map[Ino]bool) {
		for i := range page {
			rec := &page[i]
			switch {
			case rec.Node != nil && rec.Node.Type == store.TypeFile:
				r.Files++
			case rec.Chunk != nil:
				r.addChunk(rec.Chunk.Slices, shared, detached[rec.Ino])
				if opts.OnChunk != nil {
					opts.OnChunk(rec.Ino, rec.Chunk)
				}
			}
		}
		progress(len(page))
	})
	if err != nil {
		return r, fmt.Errorf("scan inodes: %w", err)
	}
	b := &r.Backlog
	err = scanPages(ctx, st, store.Tx.ScanDelSlices, func(page []Slice) error {
		for _, s := range page {
			b.Slices++
			b.SliceBytes += int64(s.Size)
		}
		progress(len(page))
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("scan deleted slices: %w", err)
	}
	t := now().Unix() // compared as processDeletions does
	err = scanPages(ctx, st, store.Tx.ScanDelFiles, func(page []store.DelFile) error {
		for _, f := range page {
			b.Files++
			b.FileBytes += int64(f.Length)
			if f.Expire > t {
				b.Waiting++
				b.WaitingBytes += int64(f.Length)
			}
		}
		progress(len(page))
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("scan deleted files: %w", err)
	}
	return r, nil
}

// addChunk counts one chunk's slice list; detached says its inode has no
// attributes.
func (r *SpaceReport) addChunk(list []Slice, shared map[SliceKey]bool, detached bool) {
	r.Chunks++
	r.SliceEntries += int64(len(list))
	for _, s := range list {
		if s.Id == 0 {
			continue
		}
		k := SliceKey{s.Id, s.Size}
		if counted, ok := shared[k]; ok {
			if counted {
				continue
			}
			shared[k] = true
		}
		r.Slices++
		r.Referenced += int64(s.Size)
	}
	v := visibleBytes(list)
	r.Visible += v
	if detached {
		r.Detached += v
	}
}

// visibleBytes returns the bytes of a chunk that its slice list reads
// from stored slices: what Visible over the whole chunk gives, holes
// (uncovered ranges and slices with Id 0) left out.
func visibleBytes(list []Slice) int64 {
	var n int64
	for _, g := range Visible(list, 0, ChunkSize) {
		if g.Slice != nil && g.Slice.Id != 0 {
			n += int64(g.End - g.Start)
		}
	}
	return n
}

// scanInodesDetached pages through every inode record, one View per page,
// and hands fn each page with the inodes among its chunk records' that
// have no attributes. Those are looked up in the page's View, in one
// batch read of the inodes whose attributes are not in the page itself
// (on ordered engines a file's chunk records sort just before them).
func scanInodesDetached(ctx context.Context, st store.Store, fn func(page []store.InodeRecord, detached map[Ino]bool)) error {
	var cursor []byte
	for {
		var page []store.InodeRecord
		var next []byte
		var detached map[Ino]bool
		err := st.View(ctx, func(tx store.Tx) error {
			var err error
			if page, next, err = tx.ScanInodes(cursor, scanPage); err != nil {
				return err
			}
			detached, err = detachedInodes(tx, page)
			return err
		})
		if err != nil {
			return err
		}
		fn(page, detached)
		if cursor = next; cursor == nil {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// detachedInodes returns the inodes of page's chunk records that have no
// attributes, nil when there are none.
func detachedInodes(tx store.Tx, page []store.InodeRecord) (map[Ino]bool, error) {
	known := map[Ino]bool{}
	for _, rec := range page {
		if rec.Node != nil {
			known[rec.Ino] = true
		}
	}
	var ask []Ino
	for _, rec := range page {
		if rec.Chunk != nil && !known[rec.Ino] {
			known[rec.Ino] = true
			ask = append(ask, rec.Ino)
		}
	}
	if len(ask) == 0 {
		return nil, nil
	}
	nodes, err := tx.Nodes(ask)
	if err != nil {
		return nil, err
	}
	var out map[Ino]bool
	for i, n := range nodes {
		if n == nil {
			if out == nil {
				out = map[Ino]bool{}
			}
			out[ask[i]] = true
		}
	}
	return out, nil
}
