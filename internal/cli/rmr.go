package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/control"
)

func newRmr() *cobra.Command {
	var verbose bool
	cmd := &cobra.Command{
		Use:   "rmr PATH...",
		Short: "Remove directory trees quickly, through the mount",
		Long: `Remove each PATH and, for a directory, everything below it, as rm -rf does,
but done by the mount itself: it walks the tree depth first and removes
entries several at a time, without a system call per entry. A progress line
shows on a terminal.

Every entry is removed with your permissions, the sticky bit and the trash
applying as they would to rm: on a volume with a trash (format --trash-days)
removed files go to .trash, where they stay until it expires, and
directories are removed. An entry that cannot be removed is reported with its
path and the rest of the tree is still removed; the directories above it
stay, and the command fails. A symbolic link is removed itself, not what it
points to. The root of a mount cannot be removed.`,
		Example: `  sluice rmr /mnt/vol/tmp/build
  sluice rmr -v /mnt/vol/old-logs /mnt/vol/old-data`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var errs []error
			for _, p := range args {
				if err := runRmr(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), p, verbose); err != nil {
					errs = append(errs, fmt.Errorf("rmr %s: %w", p, err))
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print how many entries each PATH had")
	return cmd
}

// rmrTarget resolves path for removal: the directory that holds it
// (symbolic links in it followed) and its name there, which is not
// followed. It refuses the root of a mount.
func rmrTarget(path string) (dir, name string, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", err
	}
	if _, err := os.Lstat(abs); err != nil {
		return "", "", err
	}
	if abs == "/" {
		return "", "", errors.New("refusing to remove /")
	}
	dir, err = filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return "", "", err
	}
	name = filepath.Base(abs)
	if m, err := control.Find(filepath.Join(dir, name)); err == nil && m.Root == filepath.Join(dir, name) {
		return "", "", errors.New("refusing to remove the root of a mount (remove its entries instead, or unmount it)")
	}
	return dir, name, nil
}

func runRmr(ctx context.Context, out, errOut io.Writer, path string, verbose bool) error {
	if ctx == nil {
		ctx = context.Background()
	}
	dir, name, err := rmrTarget(path)
	if err != nil {
		return err
	}
	m, err := control.Find(dir)
	if err != nil {
		return err
	}
	var res control.RmrResult
	err = callMount(ctx, m.Root, control.OpRmr, m.Ino, control.RmrArgs{Name: name}, &res, func(p control.Progress) string {
		return fmt.Sprintf("removed %d entries", p.Removed)
	})
	if err != nil {
		return err
	}
	printFailures(errOut, "rmr", filepath.Dir(filepath.Clean(path)), res.Failed, res.Failures)
	if verbose {
		fmt.Fprintf(out, "%s: removed %d %s\n", path, res.Removed, plural(int(res.Removed), "entry"))
	}
	if res.Failed > 0 {
		return fmt.Errorf("%d %s could not be removed", res.Failed, plural(int(res.Failed), "entry"))
	}
	return nil
}
