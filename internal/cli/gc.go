package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/gc"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/volume"
)

type gcOptions struct {
	delete      bool
	threads     int
	minAge      time.Duration
	metaTimeout time.Duration
}

func newGC() *cobra.Command {
	o := gcOptions{threads: 10, minAge: time.Hour, metaTimeout: meta.DefaultOpTimeout}
	cmd := &cobra.Command{
		Use:   "gc META-URL",
		Short: "Find and delete leaked objects and pending deletions",
		Long: `List every block object of the volume in META-URL and compare it with the
slices its metadata names (files, files in the trash, files open after
unlink, deleted files still queued). A block nothing names is leaked, e.g.
by a mount killed between uploading a slice and committing it. Objects
younger than an hour are skipped: a slice being written now is uploaded
before it is committed.

The report also gives the space figures of the metadata, from the same
scan (logical sizes, before compression and encryption): the distinct
slices the chunk lists name and the bytes they store (referenced), the
bytes the lists read from them (visible; part of it may belong to deleted
files not yet dropped), the difference (amplification: bytes overwritten
or cut off but still stored, negative when files share slices) and the
ratio referenced/visible, and the deletion backlog: slices queued for
their blocks to be deleted, and deleted files (or slice lists replaced by
compaction) whose chunks are still to be dropped.

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
	fl.Var(secondsValue{&o.metaTimeout}, "meta-timeout", metaTimeoutUsage)
	fl.DurationVar(&o.minAge, "min-age", o.minAge, "skip objects younger than this (tests only)")
	fl.MarkHidden("min-age")
	return cmd
}

func runGC(ctx context.Context, out io.Writer, metaURL string, o *gcOptions) (err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.threads <= 0 {
		return fmt.Errorf("--threads must be positive")
	}
	level := volume.Data
	if o.delete {
		level = volume.Client // works through the deletion queues
	}
	opts := volumeOptions(level, nil, o.metaTimeout)
	opts.Meta.SessionInfo = meta.SessionInfo{MountPoint: "(sluice gc)", Version: Version}
	v, err := volume.Open(ctx, metaURL, opts)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := v.Close(context.WithoutCancel(ctx)); err == nil {
			err = cerr
		}
	}()
	prog := newProgress()
	r, err := gc.Run(ctx, v, gc.Options{
		MinAge:  o.minAge,
		Delete:  o.delete,
		Threads: o.threads,
		OnLeak: func(info object.Info) {
			fmt.Fprintf(out, "leaked: %s (%d bytes, %s)\n", info.Key, info.Size, info.ModTime.UTC().Format(time.RFC3339))
		},
		Progress: func(p gc.Progress) {
			switch p.Phase {
			case gc.ScanMetadata:
				prog.show("scanned %d metadata records", p.Done)
			case gc.ListObjects:
				prog.show("listed %d objects, %d leaked", p.Done, p.Leaked)
			case gc.DeleteLeaks:
				prog.show("deleted %d of %d leaked objects", p.Done, p.Total)
			}
		},
	})
	prog.done()
	if err != nil {
		return err
	}
	printGC(out, r, o.delete)
	return nil
}

func printGC(out io.Writer, r *gc.Report, deleted bool) {
	fmt.Fprintf(out, "objects:           %d (%s)\n", r.All.Objects, humanBytes(r.All.Bytes))
	fmt.Fprintf(out, "  referenced:      %d (%s)\n", r.Referenced.Objects, humanBytes(r.Referenced.Bytes))
	fmt.Fprintf(out, "  leaked:          %d (%s)\n", r.Leaked.Objects, humanBytes(r.Leaked.Bytes))
	fmt.Fprintf(out, "  pending delete:  %d (%s)\n", r.Pending.Objects, humanBytes(r.Pending.Bytes))
	fmt.Fprintf(out, "  younger than %s: %d (%s), skipped\n", r.MinAge, r.Young.Objects, humanBytes(r.Young.Bytes))
	if r.Foreign.Objects > 0 {
		fmt.Fprintf(out, "  not block keys:  %d (%s), left alone\n", r.Foreign.Objects, humanBytes(r.Foreign.Bytes))
	}
	printSpace(out, &r.Space, deleted)
	switch {
	case deleted:
		fmt.Fprintf(out, "deleted %d leaked objects (%s) and flushed the deletion queues\n", r.Deleted.Objects, humanBytes(r.Deleted.Bytes))
	case r.Leaked.Objects > 0 || r.Pending.Objects > 0 || r.Space.Backlog.Files > 0 || r.Space.Backlog.Slices > 0:
		fmt.Fprintln(out, "run with --delete to delete leaked objects and flush the deletion queues")
	}
}

// printSpace prints the space figures of the metadata (logical sizes,
// before compression and encryption) and the deletion backlog, as it was
// before a flush of the queues when flushed.
func printSpace(out io.Writer, s *meta.SpaceReport, flushed bool) {
	b := &s.Backlog
	fmt.Fprintf(out, "metadata:          %d files, %d chunks, %d slice entries\n", s.Files, s.Chunks, s.SliceEntries)
	fmt.Fprintf(out, "  referenced:      %d slices (%s)\n", s.Slices, humanBytes(s.Referenced))
	if s.Detached > 0 {
		fmt.Fprintf(out, "  visible:         %s (%s of it in files queued for deletion)\n", humanBytes(s.Visible), humanBytes(s.Detached))
	} else {
		fmt.Fprintf(out, "  visible:         %s\n", humanBytes(s.Visible))
	}
	fmt.Fprintf(out, "  amplification:   %s (ratio %.2f)\n", humanBytes(s.Amplification()), s.Ratio())
	if flushed {
		fmt.Fprintln(out, "deletion backlog (before the flush):")
	} else {
		fmt.Fprintln(out, "deletion backlog:")
	}
	fmt.Fprintf(out, "  slices:          %d (%s)\n", b.Slices, humanBytes(b.SliceBytes))
	fmt.Fprintf(out, "  files:           %d files or replaced slice lists (%s), %d of them (%s) not yet expired\n",
		b.Files, humanBytes(b.FileBytes), b.Waiting, humanBytes(b.WaitingBytes))
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < 0 && n > math.MinInt64 {
		return "-" + humanBytes(-n)
	}
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
