package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/fsck"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/volume"
)

type fsckOptions struct {
	path        string
	threads     int
	metaTimeout time.Duration
}

func newFsck() *cobra.Command {
	o := fsckOptions{threads: 10, metaTimeout: meta.DefaultOpTimeout}
	cmd := &cobra.Command{
		Use:   "fsck META-URL",
		Short: "Check a volume's metadata and that every block it names exists",
		Long: `Check the metadata of the volume in META-URL (entries naming missing
inodes, link counts, parent pointers, chunk records of missing inodes,
slices out of range, records that do not decode, reference counts) and
that every block of every slice a file names exists with the right length
(on volumes with compression or encryption, only that it exists). Each problem is
printed on its own line; the command fails when it finds any. Run it on an
idle volume: a file changed during the check can show as a passing
problem. With --path only that subtree is checked.`,
		Example: `  sluice fsck sqlite3://vol.db
  sluice fsck sqlite3://vol.db --path /a/b --threads 20`,
		Args: exactArgs(1, "META-URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runFsck(cmd.Context(), cmd.OutOrStdout(), args[0], &o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.path, "path", "", "check only the subtree at this path of the volume")
	fl.IntVar(&o.threads, "threads", o.threads, "number of concurrent object checks")
	fl.Var(secondsValue{&o.metaTimeout}, "meta-timeout", metaTimeoutUsage)
	return cmd
}

func runFsck(ctx context.Context, out io.Writer, metaURL string, o *fsckOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.threads <= 0 {
		return errors.New("--threads must be positive")
	}
	v, err := openVolume(ctx, metaURL, volume.Data, o.metaTimeout)
	if err != nil {
		return err
	}
	defer v.Close(context.WithoutCancel(ctx))
	prog := newProgress()
	r, err := fsck.Run(ctx, v, fsck.Options{
		Path:    o.path,
		Threads: o.threads,
		OnProblem: func(p fsck.Problem) {
			prog.done()
			switch {
			case p.Block != "":
				fmt.Fprintf(out, "slice %d (inode %d, %s, chunk %d): %s\n", p.Slice, p.Ino, p.Path, p.Chunk, p.Msg)
			case p.Ino == 0:
				fmt.Fprintln(out, p.Msg)
			default:
				fmt.Fprintf(out, "inode %d (%s): %s\n", p.Ino, p.Path, p.Msg)
			}
		},
		Progress: func(p fsck.Progress) {
			if p.Phase == fsck.CheckMetadata {
				prog.show("checked %d inodes", p.Done)
			} else {
				prog.show("checked %d blocks", p.Done)
			}
		},
	})
	prog.done()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "checked %d inodes, %d slices, %d blocks: %d problems\n", r.Inodes, r.Slices, r.Blocks, r.Problems)
	if r.Problems > 0 {
		return fmt.Errorf("fsck found %d problems", r.Problems)
	}
	return nil
}
