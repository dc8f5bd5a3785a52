package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/dump"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/volume"
)

type dumpOptions struct {
	dump.Options
	metaTimeout time.Duration
}

func newDump() *cobra.Command {
	o := dumpOptions{Options: dump.Options{Threads: 10}, metaTimeout: meta.DefaultOpTimeout}
	cmd := &cobra.Command{
		Use:   "dump META-URL [FILE|-]",
		Short: "Write a volume's metadata to a JSON file (JuiceFS 1.x format)",
		Long: `Write the metadata of the volume in META-URL (settings, counters and the
whole tree: attributes, symlink targets, extended attributes, ACLs and the
slice lists of every file) as one JSON document, the dump format JuiceFS 1.x
reads and writes, to FILE or to standard output (no FILE, or -). A FILE
ending in .gz is gzip-compressed, one ending in .zst or .zstd
zstd-compressed. The file appears only when the dump is complete.

The dump streams: its memory does not grow with the volume. By default it
reads one consistent snapshot of the volume on engines that have snapshots
(SQLite, PostgreSQL, MySQL, etcd, TiKV); --fast reads batches on --threads
workers instead, faster on a busy server but not a point in time. Redis has
no snapshot: its dumps always run the fast way, so dump an idle volume
there for an exact copy.

Object storage secrets are written as "removed" unless --keep-secret-key.
Load the dump with 'sluice load' (or 'juicefs load').`,
		Example: `  sluice dump redis://127.0.0.1:6379/1 meta.json.gz
  sluice dump sqlite3://vol.db - --subdir projects/a | less`,
		Args: rangeArgs(1, 2, "META-URL [FILE|-]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := "-"
			if len(args) == 2 {
				file = args[1]
			}
			return runDump(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], file, &o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Subdir, "subdir", "", "dump only this directory's tree (a path in the volume), as the root")
	fl.BoolVar(&o.KeepSecretKey, "keep-secret-key", false, "write the object storage secret key and session token")
	fl.BoolVar(&o.SkipTrash, "skip-trash", false, "leave the trash out")
	fl.IntVar(&o.Threads, "threads", o.Threads, "batches fetched at once in a fast dump")
	fl.BoolVar(&o.Fast, "fast", false, "read batches concurrently instead of one snapshot (faster, not a point in time)")
	fl.Var(secondsValue{&o.metaTimeout}, "meta-timeout", metaTimeoutUsage)
	return cmd
}

func runDump(ctx context.Context, stdout, stderr io.Writer, metaURL, file string, o *dumpOptions) (err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.Threads <= 0 {
		return errors.New("--threads must be positive")
	}
	opts := volumeOptions(volume.Metadata, nil, o.metaTimeout)
	if !o.Fast {
		// One snapshot lasts the whole dump: no single transaction bound.
		opts.TxTimeout = 0
	}
	v, err := volume.Open(ctx, metaURL, opts)
	if err != nil {
		return err
	}
	defer v.Close(context.WithoutCancel(ctx))
	store.DisableCache(v.Store()) // each record is read once

	out := stdout
	var f *os.File
	if file != "-" {
		// Write beside the target and rename when complete, so that a
		// failed dump never leaves a file that looks whole.
		f, err = os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".tmp-*")
		if err != nil {
			return fmt.Errorf("create dump file: %w", err)
		}
		defer func() {
			if err != nil {
				f.Close()
				os.Remove(f.Name())
			}
		}()
		out = f
	}
	zw, err := dump.NewWriter(out, file)
	if err != nil {
		return err
	}
	bar := newByteBar("dumped", -1)
	o.Progress = func(p dump.Progress) { bar.set(p.Entries, p.Bytes) }
	stats, err := dump.Dump(ctx, v.Store(), zw, o.Options)
	bar.finish()
	if err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("write dump: %w", err)
	}
	if f != nil {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("write dump: %w", err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("write dump: %w", err)
		}
		if err := os.Rename(f.Name(), file); err != nil {
			return fmt.Errorf("write dump: %w", err)
		}
	}
	how := "one consistent snapshot"
	if !stats.Consistent {
		how = "concurrent batches, not a point in time"
	}
	fmt.Fprintf(stderr, "dumped %d entries (%d directories, %d files, %d symlinks, %d others), %s of JSON, from %s\n",
		stats.Entries, stats.Dirs, stats.Files, stats.Symlinks, stats.Others, humanBytes(stats.Bytes), how)
	if stats.Skipped > 0 {
		fmt.Fprintf(stderr, "skipped %d entries whose inode vanished during the dump\n", stats.Skipped)
	}
	return nil
}
