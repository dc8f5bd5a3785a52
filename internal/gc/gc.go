// Package gc finds the objects of a volume that no metadata names, and
// deletes them on request.
//
// Blocks are uploaded before the slice naming them is committed, so a
// mount killed in between, or a failed commit, leaves blocks behind that
// nothing will ever delete: they are leaked. Run lists every object under
// chunks/ and sorts it into a Report: referenced by a slice a file (or a
// file in the trash, a file open after unlink, a deleted file still
// queued, a compaction's parked slices) names, belonging to a slice queued
// for deletion, younger than Options.MinAge (it may belong to a slice
// being written now), under chunks/ without being a block key (left
// alone), or leaked. With Options.Delete it deletes the leaked objects
// and works through the deletion queues. The same scan of the metadata
// gives the volume's space figures (meta.SpaceUsage): the bytes its
// slices store against those its files show, and the deletion backlog.
//
// Run only reports; printing is the caller's business.
package gc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/object"
)

// Defaults of Options.
const (
	// DefaultMinAge is the age below which objects are not called leaked:
	// far longer than any upload of a slice takes before its commit.
	DefaultMinAge = time.Hour
	// DefaultThreads is the number of concurrent deletions.
	DefaultThreads = 10
)

// listPage is how many keys one List call asks for.
const listPage = 1000

// Volume is what Run needs of an open volume; *volume.Volume has it.
type Volume interface {
	Store() store.Store
	Format() *meta.Format
	// Objects returns the volume's object storage, keys relative to the
	// volume ("chunks/...").
	Objects() object.Store
	// Client returns a metadata client; Run needs one only with
	// Options.Delete, to work through the deletion queues.
	Client() *meta.Session
}

// Options tune Run.
type Options struct {
	// MinAge skips objects modified less than this long ago. Zero skips
	// none; callers outside tests want DefaultMinAge.
	MinAge time.Duration
	// Delete deletes the leaked objects and works through the deletion
	// queues.
	Delete bool
	// Threads bounds concurrent deletions. Default DefaultThreads.
	Threads int
	// Now tells the time objects' ages are measured from. Default
	// time.Now.
	Now func() time.Time
	// OnLeak, when set, is told each leaked object as it is found, in key
	// order.
	OnLeak func(object.Info)
	// Progress, when set, is told now and then how far Run got. Calls are
	// serialized.
	Progress func(Progress)
}

// Phase is a step of Run.
type Phase int

// The steps of Run, in order.
const (
	ScanMetadata Phase = iota // reading every slice the metadata names
	ListObjects               // listing and sorting the objects
	DeleteLeaks               // deleting leaked objects (Options.Delete)
)

// Progress says how far Run got in a phase.
type Progress struct {
	Phase Phase
	// Done counts metadata records scanned, objects listed or leaked
	// objects deleted, by phase.
	Done int64
	// Total is the number of leaked objects to delete (DeleteLeaks).
	Total int64
	// Leaked counts the leaked objects found so far (ListObjects).
	Leaked int64
}

// Count is a number of objects and their stored bytes.
type Count struct {
	Objects, Bytes int64
}

func (c *Count) add(size int64) {
	c.Objects++
	c.Bytes += size
}

// Report is what Run found and did. Sizes are stored sizes (after
// compression and encryption).
type Report struct {
	MinAge     time.Duration // the MinAge objects were measured against
	All        Count         // every object under chunks/
	Referenced Count         // blocks of slices the metadata names
	Leaked     Count         // blocks nothing names, older than MinAge
	Pending    Count         // blocks of slices queued for deletion
	Young      Count         // objects younger than MinAge, skipped
	Foreign    Count         // keys under chunks/ that are no block key, left alone
	Deleted    Count         // leaked objects deleted (Options.Delete)
	// Space holds the space figures of the metadata and the deletion
	// backlog (files, and slice lists compactions replaced, queued for
	// their data to be deleted; slices queued for their blocks to be),
	// as they were before Run flushed the queues. Its sizes are logical,
	// before compression and encryption.
	Space meta.SpaceReport
	// Flushed says the deletion queues were worked through
	// (Options.Delete).
	Flushed bool
}

// Run sorts the objects of v's volume, and with opts.Delete deletes the
// leaked ones and flushes the deletion queues. An error stops it; the
// report then holds what was done so far.
func Run(ctx context.Context, v Volume, opts Options) (*Report, error) {
	if opts.Threads == 0 {
		opts.Threads = DefaultThreads
	}
	if opts.Threads < 0 {
		return nil, fmt.Errorf("gc: %d threads", opts.Threads)
	}
	if opts.Delete && v.Client() == nil {
		return nil, errors.New("gc: deleting needs a metadata client (open the volume at level Client)")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	progress := opts.Progress
	if progress == nil {
		progress = func(Progress) {}
	}
	st, obj := v.Store(), v.Objects()
	r := &Report{MinAge: opts.MinAge}
	// One scan of the metadata gives the slices to compare the bucket
	// with and the space figures.
	sizes := map[uint64]uint32{}
	space, err := meta.SpaceUsage(ctx, st, meta.SpaceOptions{
		Progress: func(n int64) { progress(Progress{Phase: ScanMetadata, Done: n}) },
		OnChunk: func(_ meta.Ino, c *store.ChunkRecord) {
			for _, s := range c.Slices {
				if s.Id != 0 {
					sizes[s.Id] = s.Size
				}
			}
		},
		Now: opts.Now,
	})
	if err != nil {
		return r, fmt.Errorf("scan metadata: %w", err)
	}
	r.Space = *space
	// Read after the scan: a slice the scan missed because it was
	// released meanwhile is queued by now.
	pendingSlices, err := meta.PendingSlices(ctx, st)
	if err != nil {
		return r, fmt.Errorf("read deletion queue: %w", err)
	}
	pending := map[uint64]uint32{}
	for _, p := range pendingSlices {
		pending[p.Id] = p.Size
	}
	bs := v.Format().BlockSize << 10
	cutoff := opts.Now().Add(-opts.MinAge)
	var leaks []object.Info
	err = listBlocks(ctx, obj, func(info object.Info) {
		r.All.add(info.Size)
		progress(Progress{Phase: ListObjects, Done: r.All.Objects, Leaked: r.Leaked.Objects})
		b, perr := chunk.ParseBlockKey(info.Key)
		switch {
		case perr != nil:
			r.Foreign.add(info.Size)
		case blockOf(sizes, b, bs):
			r.Referenced.add(info.Size)
		case blockOf(pending, b, bs):
			r.Pending.add(info.Size)
		case info.ModTime.After(cutoff):
			r.Young.add(info.Size)
		default:
			r.Leaked.add(info.Size)
			if opts.OnLeak != nil {
				opts.OnLeak(info)
			}
			if opts.Delete {
				leaks = append(leaks, info)
			}
		}
	})
	if err != nil || !opts.Delete {
		return r, err
	}
	if err := deleteLeaks(ctx, obj, leaks, opts.Threads, &r.Deleted, progress); err != nil {
		return r, err
	}
	if err := flushQueues(ctx, v.Client(), st); err != nil {
		return r, err
	}
	r.Flushed = true
	return r, nil
}

// listBlocks calls fn for every object under chunks/, page by page.
func listBlocks(ctx context.Context, obj object.Store, fn func(object.Info)) error {
	marker := ""
	for {
		page, err := obj.List(ctx, "chunks/", marker, listPage)
		if err != nil {
			return fmt.Errorf("list objects: %w", err)
		}
		for _, info := range page {
			fn(info)
		}
		if len(page) < listPage {
			return nil
		}
		marker = page[len(page)-1].Key
	}
}

// blockOf reports whether b is one of the blocks of its slice, whose size
// sizes knows, with block size bs: its index is in range and its length
// is that block's.
func blockOf(sizes map[uint64]uint32, b chunk.BlockRef, bs int) bool {
	size, ok := sizes[b.ID]
	if !ok || size == 0 {
		return false
	}
	n := (int(size) + bs - 1) / bs
	return b.Index < n && b.Len == min(bs, int(size)-b.Index*bs)
}

// deleteLeaks deletes leaks, threads at a time, counting them in deleted.
func deleteLeaks(ctx context.Context, obj object.Store, leaks []object.Info, threads int, deleted *Count, progress func(Progress)) error {
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(threads)
	for _, l := range leaks {
		g.Go(func() error {
			if err := obj.Delete(gctx, l.Key); err != nil {
				return fmt.Errorf("delete %s: %w", l.Key, err)
			}
			mu.Lock()
			defer mu.Unlock()
			deleted.add(l.Size)
			progress(Progress{Phase: DeleteLeaks, Done: deleted.Objects, Total: int64(len(leaks))})
			return nil
		})
	}
	return g.Wait()
}

// flushQueues works through the deletion queues with mc.
func flushQueues(ctx context.Context, mc *meta.Session, st store.Store) error {
	// One flush takes a bounded batch of files; repeat while it helps.
	for left := int64(-1); ; {
		if err := mc.FlushDeletions(ctx); err != nil {
			return fmt.Errorf("flush deletion queues: %w", err)
		}
		n, err := expiredFiles(ctx, st)
		if err != nil {
			return fmt.Errorf("flush deletion queues: %w", err)
		}
		if n == 0 || (left >= 0 && n >= left) {
			return nil
		}
		left = n
	}
}

// expiredFiles counts the deleted files whose data may be deleted now.
func expiredFiles(ctx context.Context, st store.Store) (int64, error) {
	files, err := meta.PendingFiles(ctx, st)
	var n int64
	now := time.Now().Unix()
	for _, f := range files {
		if f.Expire <= now {
			n++
		}
	}
	return n, err
}
