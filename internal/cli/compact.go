package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/compact"
	"github.com/sluicefs/sluice/internal/control"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/volume"
)

func newCompact() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "compact PATH... | compact META-URL --path P",
		Short: "Rewrite fragmented files as few slices",
		Long: `Rewrite every chunk with more than one slice of the given files and
directory trees as one slice, so reads replay fewer slices and overwritten
data is freed.

On a mount, pass the paths: the mount does the work, asked through its
control channel (the file .control at its root; root only), and this
command waits for it. Without a mount, pass the volume's META-URL and
--path, a path inside the volume; then this command does the work itself.`,
		Example: `  sluice compact /mnt/vol/logs
  sluice compact sqlite3://vol.db --path /logs`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if path != "" {
				if len(args) != 1 {
					return fmt.Errorf("compact --path expects one META-URL (got %d arguments)", len(args))
				}
				return runCompactOffline(cmd.Context(), cmd.OutOrStdout(), args[0], path)
			}
			return runCompactMounted(cmd.Context(), cmd.OutOrStdout(), args)
		},
	}
	cmd.Flags().StringVar(&path, "path", "", "with META-URL: the file or directory in the volume to compact")
	return cmd
}

func runCompactMounted(ctx context.Context, out io.Writer, paths []string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("compact PATH needs root (or use `sluice compact META-URL --path P` on an unmounted volume)")
	}
	for _, p := range paths {
		m, err := control.Find(p)
		if err != nil {
			return fmt.Errorf("compact %s: %w; for a volume that is not mounted use `sluice compact META-URL --path P`", p, err)
		}
		res, err := control.Call(ctx, m.Root, control.Request{Op: "compact", Ino: m.Ino}, nil)
		if err != nil {
			return fmt.Errorf("compact %s: %w", p, err)
		}
		var stats compact.Stats
		if err := json.Unmarshal(res, &stats); err != nil {
			return fmt.Errorf("compact %s: %w", p, err)
		}
		fmt.Fprintf(out, "%s: compacted %d chunks (%d slices into %d, %s written); %d chunks kept changing and were skipped\n",
			p, stats.Chunks, stats.Slices, stats.Chunks, humanBytes(stats.Bytes), stats.Skipped)
	}
	return nil
}

func runCompactOffline(ctx context.Context, out io.Writer, metaURL, path string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	opts := volumeOptions(volume.Client, nil, 0)
	opts.Meta.SessionInfo = meta.SessionInfo{MountPoint: "(sluice compact)", Version: Version}
	v, err := volume.Open(ctx, metaURL, opts)
	if err != nil {
		return err
	}
	defer v.Close(context.WithoutCancel(ctx))
	ino, _, err := meta.LookupPath(ctx, v.Store(), path)
	if err != nil {
		return err
	}
	prog := newProgress()
	stats, err := compact.New(v.Client(), v.Chunks(), compact.Config{Progress: func(s compact.Stats) {
		prog.show("compacted %d chunks, %s written", s.Chunks, humanBytes(s.Bytes))
	}}).Tree(ctx, ino)
	prog.done()
	if cerr := v.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "compacted %d chunks (%d slices into %d, %s written); %d chunks kept changing and were skipped\n",
		stats.Chunks, stats.Slices, stats.Chunks, humanBytes(stats.Bytes), stats.Skipped)
	return nil
}
