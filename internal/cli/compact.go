package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/compact"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/volume"
)

// CompactXattr is the extended attribute that asks a mount to compact the
// file or tree it is set on.
const CompactXattr = "trusted.sluice.compact"

func newCompact() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "compact PATH... | compact META-URL --path P",
		Short: "Rewrite fragmented files as few slices",
		Long: `Rewrite every chunk with more than one slice of the given files and
directory trees as one slice, so reads replay fewer slices and overwritten
data is freed.

On a mount, pass the paths: the mount does the work (setting the extended
attribute ` + CompactXattr + `, which needs root). Without a mount, pass the
volume's META-URL and --path, a path inside the volume; then this command
does the work itself.`,
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
			return runCompactMounted(cmd.OutOrStdout(), args)
		},
	}
	cmd.Flags().StringVar(&path, "path", "", "with META-URL: the file or directory in the volume to compact")
	return cmd
}

func runCompactMounted(out io.Writer, paths []string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("compact PATH needs root: it sets the %s attribute (or use `sluice compact META-URL --path P` on an unmounted volume)", CompactXattr)
	}
	for _, p := range paths {
		if err := onSluiceMount(p); err != nil {
			return fmt.Errorf("compact %s: %w", p, err)
		}
		err := syscall.Setxattr(p, CompactXattr, []byte("1"), 0)
		if errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EPERM) {
			return fmt.Errorf("compact %s: the mount does not support compaction (%v)", p, err)
		}
		if err != nil {
			return fmt.Errorf("compact %s: %w", p, err)
		}
		fmt.Fprintf(out, "%s: compaction requested from the mount\n", p)
	}
	return nil
}

// onSluiceMount checks that p lies on a sluice mount, so that the
// attribute is not set on some other file system, which would keep it.
func onSluiceMount(p string) error {
	abs, err := filepath.Abs(p)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return err
	}
	for d := abs; ; d = filepath.Dir(d) {
		if src, ok := mountedAt(d); ok {
			if strings.HasPrefix(src, "sluice:") {
				return nil
			}
			return fmt.Errorf("not on a sluice mount (%s is mounted from %s); for a volume that is not mounted use `sluice compact META-URL --path P`", d, src)
		}
		if d == "/" || d == "." {
			return errors.New("not on a sluice mount")
		}
	}
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
