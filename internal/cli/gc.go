package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/object"
)

type gcOptions struct {
	delete  bool
	threads int
	minAge  time.Duration
}

func newGC() *cobra.Command {
	o := gcOptions{threads: 10, minAge: time.Hour}
	cmd := &cobra.Command{
		Use:   "gc META-URL",
		Short: "Find and delete leaked objects and pending deletions",
		Long: `List every block object of the volume in META-URL and compare it with the
slices its metadata names (files, files in the trash, files open after
unlink, deleted files still queued). A block nothing names is leaked, e.g.
by a mount killed between uploading a slice and committing it. Objects
younger than an hour are skipped: a slice being written now is uploaded
before it is committed. Also counts the files and slices queued for
deletion.

With --delete, leaked blocks are deleted and the deletion queues are
worked through now.`,
		Example: `  sluice gc sqlite3://vol.db                # report only
  sluice gc sqlite3://vol.db --delete --threads 20`,
		Args: exactArgs(1, "META-URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGC(cmd.Context(), cmd.OutOrStdout(), args[0], &o)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&o.delete, "delete", false, "delete leaked objects and flush the deletion queues")
	fl.IntVar(&o.threads, "threads", o.threads, "number of concurrent object deletions")
	fl.DurationVar(&o.minAge, "min-age", o.minAge, "skip objects younger than this (tests only)")
	fl.MarkHidden("min-age")
	return cmd
}

// gcStats counts what gc found, as objects and bytes (stored sizes).
type gcStats struct {
	objects, bytes         int64
	valid, validBytes      int64
	leaked, leakedBytes    int64
	pending, pendingBytes  int64 // blocks of slices queued for deletion
	young, youngBytes      int64
	foreign, foreignBytes  int64 // keys under chunks/ that are no block key
	deleted, deletedBytes  int64
	pendingFiles, fileSize int64
}

func runGC(ctx context.Context, out io.Writer, metaURL string, o *gcOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.threads <= 0 {
		return fmt.Errorf("--threads must be positive")
	}
	st, f, obj, err := openVolumeData(ctx, metaURL)
	if err != nil {
		return err
	}
	defer st.Close()
	prog := newProgress()
	refs, err := meta.ReferencedSlices(ctx, st, func(n int64) { prog.show("scanned %d metadata records", n) })
	if err != nil {
		return fmt.Errorf("scan metadata: %w", err)
	}
	pendingSlices, err := meta.PendingSlices(ctx, st)
	if err != nil {
		return fmt.Errorf("read deletion queue: %w", err)
	}
	pendingFiles, err := meta.PendingFiles(ctx, st)
	if err != nil {
		return fmt.Errorf("read deletion queue: %w", err)
	}
	var s gcStats
	s.pendingFiles = int64(len(pendingFiles))
	for _, pf := range pendingFiles {
		s.fileSize += int64(pf.Length)
	}
	sizes := make(map[uint64]uint32, len(refs))
	for k := range refs {
		sizes[k.Id] = k.Size
	}
	refs = nil // only the sizes are needed now
	pending := map[uint64]uint32{}
	for _, p := range pendingSlices {
		pending[p.Id] = p.Size
	}
	bs := f.BlockSize << 10
	cutoff := time.Now().Add(-o.minAge)
	var leaks []object.Info
	err = listBlocks(ctx, obj, func(info object.Info) error {
		s.objects++
		s.bytes += info.Size
		prog.show("listed %d objects, %d leaked", s.objects, s.leaked)
		b, perr := chunk.ParseBlockKey(info.Key)
		switch {
		case perr != nil:
			s.foreign++
			s.foreignBytes += info.Size
		case blockOf(sizes, b, bs):
			s.valid++
			s.validBytes += info.Size
		case blockOf(pending, b, bs):
			s.pending++
			s.pendingBytes += info.Size
		case info.ModTime.After(cutoff):
			s.young++
			s.youngBytes += info.Size
		default:
			s.leaked++
			s.leakedBytes += info.Size
			fmt.Fprintf(out, "leaked: %s (%d bytes, %s)\n", info.Key, info.Size, info.ModTime.UTC().Format(time.RFC3339))
			if o.delete {
				leaks = append(leaks, info)
			}
		}
		return nil
	})
	prog.done()
	if err != nil {
		return err
	}
	if o.delete {
		if err := gcDelete(ctx, obj, leaks, o.threads, &s, prog); err != nil {
			return err
		}
		if err := flushQueues(ctx, st, f, obj); err != nil {
			return err
		}
	}
	printGC(out, &s, o)
	return nil
}

// listBlocks calls fn for every object under chunks/, page by page.
func listBlocks(ctx context.Context, obj object.Store, fn func(object.Info) error) error {
	marker := ""
	for {
		page, err := obj.List(ctx, "chunks/", marker, 1000)
		if err != nil {
			return fmt.Errorf("list objects: %w", err)
		}
		for _, info := range page {
			if err := fn(info); err != nil {
				return err
			}
		}
		if len(page) < 1000 {
			return nil
		}
		marker = page[len(page)-1].Key
	}
}

// blockOf reports whether b is one of the blocks of its slice, whose size
// sizes knows, with block size bs.
func blockOf(sizes map[uint64]uint32, b chunk.BlockRef, bs int) bool {
	size, ok := sizes[b.ID]
	if !ok || size == 0 {
		return false
	}
	n := (int(size) + bs - 1) / bs
	return b.Index < n && b.Len == min(bs, int(size)-b.Index*bs)
}

func gcDelete(ctx context.Context, obj object.Store, leaks []object.Info, threads int, s *gcStats, prog *progress) error {
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(threads)
	for _, l := range leaks {
		g.Go(func() error {
			if err := obj.Delete(gctx, l.Key); err != nil {
				return fmt.Errorf("delete %s: %w", l.Key, err)
			}
			mu.Lock()
			s.deleted++
			s.deletedBytes += l.Size
			prog.show("deleted %d of %d leaked objects", s.deleted, len(leaks))
			mu.Unlock()
			return nil
		})
	}
	err := g.Wait()
	prog.done()
	return err
}

// flushQueues works through the deletion queues with a client of its own.
func flushQueues(ctx context.Context, st store.Store, f *meta.Format, obj object.Store) error {
	cs := chunk.New(obj, chunk.Config{BlockSize: f.BlockSize << 10, HashPrefix: f.HashPrefix})
	mc, err := meta.NewClient(ctx, st, meta.Config{DeleteSlice: cs.Delete,
		SessionInfo: meta.SessionInfo{MountPoint: "(sluice gc)", Version: Version}})
	if err != nil {
		return err
	}
	// One flush takes a bounded batch of files; repeat while it helps.
	for left := int64(-1); ; {
		if err = mc.FlushDeletions(ctx); err != nil {
			break
		}
		var n int64
		n, err = expiredFiles(ctx, st)
		if err != nil || n == 0 || (left >= 0 && n >= left) {
			break
		}
		left = n
	}
	if cerr := mc.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("flush deletion queues: %w", err)
	}
	return nil
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

func printGC(out io.Writer, s *gcStats, o *gcOptions) {
	fmt.Fprintf(out, "objects:           %d (%s)\n", s.objects, humanBytes(s.bytes))
	fmt.Fprintf(out, "  referenced:      %d (%s)\n", s.valid, humanBytes(s.validBytes))
	fmt.Fprintf(out, "  leaked:          %d (%s)\n", s.leaked, humanBytes(s.leakedBytes))
	fmt.Fprintf(out, "  pending delete:  %d (%s)\n", s.pending, humanBytes(s.pendingBytes))
	fmt.Fprintf(out, "  younger than %s: %d (%s), skipped\n", o.minAge, s.young, humanBytes(s.youngBytes))
	if s.foreign > 0 {
		fmt.Fprintf(out, "  not block keys:  %d (%s), left alone\n", s.foreign, humanBytes(s.foreignBytes))
	}
	fmt.Fprintf(out, "queued for deletion: %d files or replaced slice lists (%s)\n", s.pendingFiles, humanBytes(s.fileSize))
	switch {
	case o.delete:
		fmt.Fprintf(out, "deleted %d leaked objects (%s) and flushed the deletion queues\n", s.deleted, humanBytes(s.deletedBytes))
	case s.leaked > 0 || s.pending > 0 || s.pendingFiles > 0:
		fmt.Fprintln(out, "run with --delete to delete leaked objects and flush the deletion queues")
	}
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// progress shows a line on stderr, rewritten in place, when stderr is a
// terminal, at most ten times a second; otherwise it shows nothing.
type progress struct {
	mu   sync.Mutex
	tty  bool
	last time.Time
	wide int
}

func newProgress() *progress {
	fi, err := os.Stderr.Stat()
	return &progress{tty: err == nil && fi.Mode()&os.ModeCharDevice != 0}
}

func (p *progress) show(format string, args ...any) {
	if !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	line := fmt.Sprintf(format, args...)
	fmt.Fprintf(os.Stderr, "\r%-*s", p.wide, line)
	p.wide = max(p.wide, len(line))
}

// done ends the progress line.
func (p *progress) done() {
	if !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wide > 0 {
		fmt.Fprintf(os.Stderr, "\r%-*s\r", p.wide, "")
		p.wide = 0
	}
	p.last = time.Time{}
}
