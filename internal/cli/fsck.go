package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/object"
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

// maxPaths bounds the damage lines that get a path looked up.
const maxPaths = 1000

func runFsck(ctx context.Context, out io.Writer, metaURL string, o *fsckOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.threads <= 0 {
		return errors.New("--threads must be positive")
	}
	st, f, obj, err := openVolumeData(ctx, metaURL, o.metaTimeout)
	if err != nil {
		return err
	}
	defer st.Close()
	prog := newProgress()
	var mu sync.Mutex
	var paths int
	pathOf := func(ino meta.Ino) string {
		mu.Lock()
		defer mu.Unlock()
		if paths >= maxPaths {
			return "?"
		}
		paths++
		return meta.InodePath(ctx, st, ino)
	}
	res, err := meta.Check(ctx, st, meta.CheckOptions{
		Path: o.path,
		OnDamage: func(d meta.Damage) {
			prog.done()
			if d.Ino == 0 {
				fmt.Fprintln(out, d.Msg)
			} else {
				fmt.Fprintf(out, "inode %d (%s): %s\n", d.Ino, pathOf(d.Ino), d.Msg)
			}
		},
		Progress: func(n int64) { prog.show("checked %d inodes", n) },
	})
	prog.done()
	if err != nil {
		return fmt.Errorf("check metadata: %w", err)
	}
	damages := res.Damages
	blocks, bad, err := checkBlocks(ctx, obj, f, res.Slices, o.threads, prog, func(k meta.SliceKey, u meta.SliceUse, msg string) {
		fmt.Fprintf(out, "slice %d (inode %d, %s, chunk %d): %s\n", k.Id, u.Ino, pathOf(u.Ino), u.Idx, msg)
	})
	prog.done()
	if err != nil {
		return err
	}
	damages += bad
	fmt.Fprintf(out, "checked %d inodes, %d slices, %d blocks: %d problems\n", res.Inodes, len(res.Slices), blocks, damages)
	if damages > 0 {
		return fmt.Errorf("fsck found %d problems", damages)
	}
	return nil
}

// checkBlocks checks with Head that every block of the slices exists and,
// on volumes without compression or encryption, has its length. It returns the blocks
// checked and the problems found.
func checkBlocks(ctx context.Context, obj object.Store, f *meta.Format, slices map[meta.SliceKey]meta.SliceUse,
	threads int, prog *progress, report func(meta.SliceKey, meta.SliceUse, string)) (int64, int64, error) {
	bs := f.BlockSize << 10
	sized := (f.Compression == "" || f.Compression == "none") && f.EncryptKey == ""
	var checked, bad atomic.Int64
	var mu sync.Mutex // serializes reports
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(threads)
	for k, u := range slices {
		for i := 0; i*bs < int(k.Size); i++ {
			want := min(bs, int(k.Size)-i*bs)
			key := chunk.BlockKey(k.Id, i, want, f.HashPrefix)
			g.Go(func() error {
				info, err := obj.Head(gctx, key)
				n := checked.Add(1)
				prog.show("checked %d blocks", n)
				var msg string
				switch {
				case errors.Is(err, object.ErrNotFound):
					msg = fmt.Sprintf("block %s missing", key)
				case err != nil:
					return fmt.Errorf("check block %s: %w", key, err)
				case sized && info.Size != int64(want):
					msg = fmt.Sprintf("block %s has %d bytes, want %d", key, info.Size, want)
				case info.Size == 0:
					msg = fmt.Sprintf("block %s is empty", key)
				default:
					return nil
				}
				bad.Add(1)
				mu.Lock()
				prog.done()
				report(k, u, msg)
				mu.Unlock()
				return nil
			})
		}
	}
	err := g.Wait()
	return checked.Load(), bad.Load(), err
}
