package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/control"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/mountinfo"
)

func newUmount() *cobra.Command {
	var force, flush bool
	cmd := &cobra.Command{
		Use:     "umount MOUNTPOINT",
		Aliases: []string{"unmount"},
		Short:   "Unmount a volume",
		Long: `Unmount the volume mounted at MOUNTPOINT. Data written by closed files is
already committed; the mounting process finishes and ends its session. A busy
mount point (open files, a shell inside it) is refused unless --force is
given, which detaches it at once.

A mount with --writeback may hold blocks staged in its cache directory that
are not uploaded yet; without --flush they stay there and the next mount of
that cache directory uploads them. --flush waits until every staged block is
uploaded before unmounting; it asks the mount through its control channel
(the file .control at its root), which only root may do.`,
		Example: `  sluice umount /mnt/vol
  sluice umount --flush /mnt/vol     # a --writeback mount: upload staged blocks first
  sluice umount --force /mnt/vol     # detach a busy mount`,
		Args: exactArgs(1, "MOUNTPOINT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if flush {
				if err := flushStaged(cmd.Context(), cmd.ErrOrStderr(), args[0]); err != nil {
					return err
				}
			}
			return runUmount(args[0], force)
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "unmount even if busy (lazy detach; processes using it get errors)")
	cmd.Flags().BoolVar(&flush, "flush", false, "upload every block staged by --writeback before unmounting")
	return cmd
}

// flushStaged asks the mount at mp to upload its staged blocks and waits
// until it has, through the mount's control channel.
func flushStaged(ctx context.Context, log io.Writer, mp string) error {
	abs, err := filepath.Abs(mp)
	if err != nil {
		return err
	}
	if _, ok := mountedAt(abs); !ok {
		return fmt.Errorf("%s is not mounted", abs)
	}
	fmt.Fprintf(log, "Uploading the blocks staged by %s ...\n", abs)
	if _, err := control.Call(ctx, abs, control.Request{Op: "flush", Ino: meta.RootIno}, nil); err != nil {
		if errors.Is(err, syscall.EPERM) {
			return fmt.Errorf("--flush %s: only root can ask a mount to flush", abs)
		}
		return fmt.Errorf("--flush %s: %w", abs, err)
	}
	return nil
}

func runUmount(mp string, force bool) error {
	abs, err := filepath.Abs(mp)
	if err != nil {
		return err
	}
	if _, ok := mountedAt(abs); !ok {
		return fmt.Errorf("%s is not mounted", abs)
	}
	flags := 0
	if force {
		flags = syscall.MNT_DETACH
	}
	err = syscall.Unmount(abs, flags)
	if errors.Is(err, syscall.EPERM) {
		if path, lerr := exec.LookPath("fusermount3"); lerr == nil {
			args := []string{"-u", abs}
			if force {
				args = []string{"-uz", abs}
			}
			if out, ferr := exec.Command(path, args...).CombinedOutput(); ferr != nil {
				return fmt.Errorf("unmount %s: %s", abs, strings.TrimSpace(string(out)))
			}
			err = nil
		}
	}
	if errors.Is(err, syscall.EBUSY) {
		return fmt.Errorf("%s is busy: close files and leave directories in it, or use --force", abs)
	}
	if err != nil {
		return fmt.Errorf("unmount %s: %w", abs, err)
	}
	// Wait briefly for the kernel to drop the mount from the table.
	for i := 0; i < 50; i++ {
		if _, ok := mountedAt(abs); !ok {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// mountedAt reports whether a file system is mounted at path, and its
// source.
func mountedAt(path string) (string, bool) {
	m, ok := mountinfo.At(path)
	return m.Source, ok
}
