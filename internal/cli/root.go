// Package cli builds the sluice command tree: one file per subcommand,
// each binding its flags to a typed options struct and wiring the
// packages that do the work. Commands return errors; only main prints them
// and sets the exit code.
package cli

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"
)

// Version is the release of this build; the linker may override it.
var Version = "0.1.0-dev"

// NewRoot returns the root command with every subcommand.
func NewRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "sluice",
		Short: "Sluice: a distributed POSIX file system on object storage",
		Long: `Sluice stores file data as blocks in object storage and file metadata in a
database chosen by URL (sqlite3://PATH is the embedded default), and mounts
volumes with FUSE on many hosts at once.

Quick start:
  sluice format sqlite3:///tmp/vol.db vol --bucket /tmp/vol-data
  sluice mount -d sqlite3:///tmp/vol.db /mnt/vol
  sluice umount /mnt/vol`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newFormat(), newMount(), newUmount(), newStatus(), newVersion())
	root.AddCommand(newGC())
	root.AddCommand(newFsck())
	root.AddCommand(newCompact())
	root.AddCommand(newDump(), newLoad())
	root.AddCommand(newObjbench())
	root.AddCommand(newBench())
	root.AddCommand(newConfig(), newDestroy())
	root.AddCommand(newInfo(), newSummary(), newWarmup(), newRmr())
	root.AddCommand(newProfile(), newStats())
	root.AddCommand(newMetaServer())
	root.AddCommand(newWebDAV())
	root.AddCommand(newGateway())
	return root
}

func logger(debug bool) *slog.Logger {
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}
