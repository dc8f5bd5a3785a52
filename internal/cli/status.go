package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/volume"
)

func newStatus() *cobra.Command {
	metaTimeout := meta.DefaultOpTimeout
	var more bool
	cmd := &cobra.Command{
		Use:   "status META-URL",
		Short: "Show a volume's settings and active mounts",
		Long: `Print the settings of the volume in META-URL (secrets shown as "removed") and
the sessions of the mounts using it: host, mount point, version, process id
and last heartbeat.

With --more, also scan the whole volume's metadata (which takes a while on
a big one) and add a "Space" object: the distinct stored slices the chunk
lists name and their bytes (ReferencedBytes), the bytes those lists read
from them (VisibleBytes; DetachedBytes of it belong to deleted files and
replaced slice lists not yet dropped), the difference
(AmplificationBytes: overwritten or cut-off bytes still stored, negative
when files share slices) and ReferencedBytes/VisibleBytes
(AmplificationRatio), and the deletion backlog: slices queued for their
blocks to be deleted, and files whose chunks are still to be dropped
(WaitingFiles of them not yet expired).`,
		Example: `  sluice status sqlite3://vol.db
  sluice status sqlite3://vol.db --more`,
		Args: exactArgs(1, "META-URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			v, err := openVolume(ctx, args[0], volume.Metadata, metaTimeout)
			if err != nil {
				return err
			}
			defer v.Close(context.WithoutCancel(ctx))
			sessions, err := meta.Sessions(ctx, v.Store())
			if err != nil {
				return fmt.Errorf("list sessions: %w", err)
			}
			type session struct {
				Sid        uint64
				Host       string
				MountPoint string
				Version    string
				PID        int
				Started    string
				Heartbeat  string
			}
			out := struct {
				Setting  *meta.Format
				Sessions []session
				Space    *spaceStatus `json:",omitempty"`
			}{Setting: v.Format().Redacted(), Sessions: []session{}}
			for _, s := range sessions {
				out.Sessions = append(out.Sessions, session{Sid: s.Sid, Host: s.Host, MountPoint: s.MountPoint,
					Version: s.Version, PID: s.PID, Started: time.Unix(s.Started, 0).UTC().Format(time.RFC3339),
					Heartbeat: s.Heartbeat.UTC().Format(time.RFC3339)})
			}
			if more {
				prog := newProgress()
				r, err := meta.SpaceUsage(ctx, v.Store(), meta.SpaceOptions{
					Progress: func(n int64) { prog.show("scanned %d metadata records", n) },
				})
				prog.done()
				if err != nil {
					return fmt.Errorf("scan volume: %w", err)
				}
				out.Space = newSpaceStatus(r)
			}
			b, err := json.MarshalIndent(out, "", "  ")
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), string(b))
			return nil
		},
	}
	cmd.Flags().BoolVar(&more, "more", false, "also scan the volume for its space figures (stored, visible, amplification, deletion backlog)")
	cmd.Flags().Var(secondsValue{&metaTimeout}, "meta-timeout", metaTimeoutUsage)
	return cmd
}

// spaceStatus is the "Space" object of `status --more` (see
// meta.SpaceReport).
type spaceStatus struct {
	Files, Chunks, SliceEntries, Slices int64
	ReferencedBytes                     int64
	VisibleBytes                        int64
	DetachedBytes                       int64
	AmplificationBytes                  int64
	AmplificationRatio                  float64 // 0 when nothing is visible
	Backlog                             spaceBacklog
}

// spaceBacklog is the deletion backlog in spaceStatus.
type spaceBacklog struct {
	Slices, SliceBytes             int64
	Files, FileBytes               int64
	WaitingFiles, WaitingFileBytes int64 // files not yet expired
}

func newSpaceStatus(r *meta.SpaceReport) *spaceStatus {
	s := &spaceStatus{Files: r.Files, Chunks: r.Chunks, SliceEntries: r.SliceEntries, Slices: r.Slices,
		ReferencedBytes: r.Referenced, VisibleBytes: r.Visible, DetachedBytes: r.Detached,
		AmplificationBytes: r.Amplification(), AmplificationRatio: math.Round(r.Ratio()*1e4) / 1e4}
	b := r.Backlog
	s.Backlog = spaceBacklog{Slices: b.Slices, SliceBytes: b.SliceBytes, Files: b.Files, FileBytes: b.FileBytes,
		WaitingFiles: b.Waiting, WaitingFileBytes: b.WaitingBytes}
	return s
}
