package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/volume"
)

func newStatus() *cobra.Command {
	metaTimeout := meta.DefaultOpTimeout
	cmd := &cobra.Command{
		Use:   "status META-URL",
		Short: "Show a volume's settings and active mounts",
		Long: `Print the settings of the volume in META-URL (secrets shown as "removed") and
the sessions of the mounts using it: host, mount point, version, process id
and last heartbeat.`,
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
			}{Setting: v.Format().Redacted(), Sessions: []session{}}
			for _, s := range sessions {
				out.Sessions = append(out.Sessions, session{Sid: s.Sid, Host: s.Host, MountPoint: s.MountPoint,
					Version: s.Version, PID: s.PID, Started: time.Unix(s.Started, 0).UTC().Format(time.RFC3339),
					Heartbeat: s.Heartbeat.UTC().Format(time.RFC3339)})
			}
			b, err := json.MarshalIndent(out, "", "  ")
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), string(b))
			return nil
		},
	}
	cmd.Flags().Var(secondsValue{&metaTimeout}, "meta-timeout", metaTimeoutUsage)
	return cmd
}
