package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/meta/engine/sluice"
)

// newMemberCommands returns the commands that change the membership of a
// replicated group of metadata servers.
func newMemberCommands() []*cobra.Command {
	add := &cobra.Command{
		Use:   "add-member META-URL ID RAFT-ADDRESS",
		Short: "Add a member to a replicated group of metadata servers, or change its address",
		Long: `Add the member ID, whose --raft-listen (or --raft-advertise) address is
RAFT-ADDRESS, to the group META-URL names (sluice://h1:9400,h2:9400,...).
Start the new member first, with --raft-listen and --id but no --peers: it
waits to be added, then receives the group's newest snapshot and the log
after it while the leader keeps serving. Add the new member's client
address to the URL of mounts afterwards.

To replace a member, add the new one, then remove the old one: the group
keeps a majority throughout.`,
		Example: `  sluice meta-server --dir /var/lib/sluice/meta --listen h4:9400 --id h4 --raft-listen h4:9401
  sluice meta-server add-member sluice://h1:9400,h2:9400,h3:9400/myvol h4 h4:9401`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			return changeMember(cmd.Context(), args[0], func(ctx context.Context, db *sluice.DB) error {
				return db.AddMember(ctx, args[1], args[2])
			}, fmt.Sprintf("member %s (%s) added", args[1], args[2]))
		},
	}
	remove := &cobra.Command{
		Use:   "remove-member META-URL ID",
		Short: "Remove a member from a replicated group of metadata servers",
		Long: `Remove the member ID from the group META-URL names. The group must keep a
majority of the members that remain: remove one member at a time. A
removed member stops taking part; stop its process and remove it from the
URL of mounts.`,
		Example: `  sluice meta-server remove-member sluice://h1:9400,h2:9400,h3:9400/myvol h3`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return changeMember(cmd.Context(), args[0], func(ctx context.Context, db *sluice.DB) error {
				return db.RemoveMember(ctx, args[1])
			}, fmt.Sprintf("member %s removed", args[1]))
		},
	}
	return []*cobra.Command{add, remove}
}

// changeMember opens the group's URL and runs change on its leader.
func changeMember(ctx context.Context, url string, change func(context.Context, *sluice.DB) error, done string) error {
	if !strings.HasPrefix(url, "sluice://") {
		return fmt.Errorf("%s: membership is of a group of metadata servers: want sluice://HOST:PORT[,HOST:PORT...]/NAME", redactURL(url))
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	db, err := sluice.Open(ctx, url, false)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := change(ctx, db); err != nil {
		return fmt.Errorf("%s: %w", db.Name(), err)
	}
	fmt.Println(done)
	return nil
}
