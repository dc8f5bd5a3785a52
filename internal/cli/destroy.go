package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/volume"
)

type destroyOptions struct {
	yes         bool
	force       bool
	threads     int
	metaTimeout time.Duration
}

func newDestroy() *cobra.Command {
	o := destroyOptions{threads: 10, metaTimeout: meta.DefaultOpTimeout}
	cmd := &cobra.Command{
		Use:   "destroy META-URL UUID",
		Short: "Delete a volume: all its objects and all its metadata",
		Long: `Delete the volume in META-URL for good: first every object under NAME/ in
its bucket (blocks, metadata backups, the volume marker), then every
record of its metadata. Nothing can be recovered afterwards. The
metadata database itself stays (a SQLite file remains, empty), and a new
volume may be formatted in it.

UUID must be the volume's (` + "`sluice status META-URL`" + ` or ` + "`sluice config META-URL`" + `
shows it), so that a mistyped META-URL cannot destroy another volume.

Destroy refuses while the volume has live mounts (sessions whose last
heartbeat is under 5 minutes old; they are listed) unless --force is
given: unmount them first, since a running mount would write to a volume
being deleted. Read-only mounts have no session and are not seen.

On a terminal, destroy shows the volume's name, UUID and how many objects
and bytes it holds, and asks for confirmation unless --yes is given;
without a terminal (in a script) it refuses unless --yes is given. A
destroy that stops half-way (an error, Ctrl-C) can be run again: the
metadata goes last.`,
		Example: `  sluice destroy sqlite3://vol.db 0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0
  sluice destroy --yes redis://127.0.0.1/1 0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0`,
		Args: exactArgs(2, "META-URL and UUID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDestroy(cmd.Context(), cmd.OutOrStdout(), newPrompt(cmd, o.yes), args[0], args[1], &o)
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&o.yes, "yes", "y", false, "destroy without asking")
	fl.BoolVar(&o.force, "force", false, "destroy even while mounts are live")
	fl.IntVar(&o.threads, "threads", o.threads, "number of concurrent object deletions")
	fl.Var(secondsValue{&o.metaTimeout}, "meta-timeout", metaTimeoutUsage)
	return cmd
}

// runDestroy deletes the volume at metaURL, whose UUID must be uuid.
func runDestroy(ctx context.Context, out io.Writer, p prompt, metaURL, uuid string, o *destroyOptions) error {
	if o.threads < 1 {
		return fmt.Errorf("--threads %d: use 1 or more", o.threads)
	}
	v, err := openVolume(ctx, metaURL, volume.Metadata, o.metaTimeout)
	if err != nil {
		return err
	}
	defer v.Close(context.WithoutCancel(ctx))
	f := v.Format()
	if uuid != f.UUID {
		return fmt.Errorf("volume %q in %s has UUID %s, not %s: refusing to destroy it (check META-URL and UUID)", f.Name, v.Store().Name(), f.UUID, uuid)
	}
	if err := checkSessions(ctx, p, v, o.force); err != nil {
		return err
	}
	objs, err := volumeObjects(f)
	if err != nil {
		return err
	}
	count, size, err := countObjects(ctx, objs, newProgress())
	if err != nil {
		return err
	}
	what := fmt.Sprintf("destroy volume %q (UUID %s): delete its %d objects (%s) under %s/ in %s, and all its metadata in %s",
		f.Name, f.UUID, count, humanBytes(size), f.Name, objs, v.Store().Name())
	if err := p.confirm(what, "Destroy the volume? Nothing can be recovered."); err != nil {
		return err
	}
	bar := newByteBar("destroy: deleted", size)
	deleted, freed, err := deleteObjects(ctx, objs, o.threads, bar.set)
	bar.finish()
	if err != nil {
		return fmt.Errorf("destroy volume %q: deleted %d objects, then: %w (run destroy again to finish)", f.Name, deleted, err)
	}
	prog := newProgress()
	records, err := meta.Destroy(ctx, v.Store(), uuid, meta.DestroyOptions{
		Progress: func(n int64) { prog.show("destroy: deleted %d metadata records", n) },
	})
	prog.done()
	if err != nil {
		return fmt.Errorf("%w (its objects are deleted; run destroy again to finish)", err)
	}
	fmt.Fprintf(out, "Volume %q (UUID %s) destroyed: %d objects (%s) and %d metadata records deleted.\n",
		f.Name, f.UUID, deleted, humanBytes(freed), records)
	return nil
}

// checkSessions refuses to go on while the volume has live sessions,
// listing them, unless force; with force it only warns on p.
func checkSessions(ctx context.Context, p prompt, v *volume.Volume, force bool) error {
	sessions, err := meta.Sessions(ctx, v.Store())
	if err != nil {
		return fmt.Errorf("list sessions: %w", err)
	}
	now := time.Now()
	var live []string
	for _, s := range sessions {
		if meta.SessionLive(s.Heartbeat, now, meta.DefaultSessionTimeout) {
			live = append(live, fmt.Sprintf("session %d on %s at %s, pid %d, heartbeat %s ago",
				s.Sid, s.Host, s.MountPoint, s.PID, now.Sub(s.Heartbeat).Round(time.Second)))
		}
	}
	if len(live) == 0 {
		return nil
	}
	if !force {
		return fmt.Errorf("volume %q has %d live mounts (%s): unmount them first, or pass --force", v.Format().Name, len(live), strings.Join(live, "; "))
	}
	fmt.Fprintf(p.out, "warning: destroying volume %q under %d live mounts (%s)\n", v.Format().Name, len(live), strings.Join(live, "; "))
	return nil
}

// listPage is how many objects one List call asks for.
const listPage = 1000

// countObjects counts the objects of s and their bytes, showing progress.
func countObjects(ctx context.Context, s object.Store, prog *progress) (count, size int64, err error) {
	defer prog.done()
	marker := ""
	for {
		page, err := s.List(ctx, "", marker, listPage)
		if err != nil {
			return count, size, fmt.Errorf("list %s: %w", s, err)
		}
		for _, o := range page {
			count++
			size += o.Size
		}
		prog.show("destroy: counted %d objects (%s)", count, humanBytes(size))
		if len(page) < listPage {
			return count, size, nil
		}
		marker = page[len(page)-1].Key
	}
}

// maxDeletePasses bounds the listings deleteObjects makes.
const maxDeletePasses = 3

// deleteObjects deletes every object of s, threads at a time, calling
// progress with the objects and bytes deleted so far. It lists s again
// until a listing finds nothing, and fails when objects keep appearing (a
// mount still writes).
func deleteObjects(ctx context.Context, s object.Store, threads int, progress func(count, bytes int64)) (int64, int64, error) {
	var count, size atomic.Int64
	for pass := 0; ; pass++ {
		marker, found := "", false
		for {
			page, err := s.List(ctx, "", marker, listPage)
			if err != nil {
				return count.Load(), size.Load(), fmt.Errorf("list %s: %w", s, err)
			}
			if len(page) > 0 {
				found = true
				if pass == maxDeletePasses {
					return count.Load(), size.Load(), fmt.Errorf("objects keep appearing under %s (e.g. %s): is a mount still writing?", s, page[0].Key)
				}
			}
			g, gctx := errgroup.WithContext(ctx)
			g.SetLimit(threads)
			for _, o := range page {
				g.Go(func() error {
					if err := s.Delete(gctx, o.Key); err != nil && !errors.Is(err, object.ErrNotFound) {
						return fmt.Errorf("delete %s: %w", o.Key, err)
					}
					progress(count.Add(1), size.Add(o.Size))
					return nil
				})
			}
			if err := g.Wait(); err != nil {
				return count.Load(), size.Load(), err
			}
			if len(page) < listPage {
				break
			}
			marker = page[len(page)-1].Key
		}
		if !found {
			return count.Load(), size.Load(), nil
		}
	}
}
