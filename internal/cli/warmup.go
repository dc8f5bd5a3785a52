package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/control"
	"github.com/sluicefs/sluice/internal/meta"
)

// warmupOptions are the flags of `sluice warmup`.
type warmupOptions struct {
	list                     string
	threads                  int
	check, evict, background bool
	cacheGroup               bool
	json                     bool
	batch                    int // paths per request; warmupBatch unless a test sets it
}

// warmupBatch bounds the paths sent to a mount in one request, which
// keeps a request well below control.MaxRequest.
const warmupBatch = 5000

// maxWarmupThreads is the most -p accepts.
const maxWarmupThreads = 256

// validate checks the flags.
func (o *warmupOptions) validate() error {
	switch {
	case o.threads < 1 || o.threads > maxWarmupThreads:
		return fmt.Errorf("-p %d: must be from 1 to %d", o.threads, maxWarmupThreads)
	case o.check && o.evict:
		return errors.New("--check and --evict: choose one")
	case o.cacheGroup && (o.check || o.evict):
		return errors.New("--cache-group warms blocks on their owners: it does not go with --check or --evict, which see this member's caches only")
	case o.background && o.check:
		return errors.New("--check reports what is cached: it cannot run in the background")
	}
	return nil
}

// mode returns the control.Warmup* mode the flags ask for.
func (o *warmupOptions) mode() string {
	switch {
	case o.check:
		return control.WarmupCheck
	case o.evict:
		return control.WarmupEvict
	}
	return control.WarmupFetch
}

func newWarmup() *cobra.Command {
	o := warmupOptions{threads: 4}
	cmd := &cobra.Command{
		Use:   "warmup [PATH...] [-f LISTFILE]",
		Short: "Fetch files' blocks into the mount's local cache, check or evict them",
		Long: `Fetch every block of the given files (directories with their whole trees,
and the paths listed one per line in LISTFILE) from object storage into the
local block cache of the mount they are on, so that later reads are served
locally. The mount does the work, asked through its control channel (the
file .control at its root), -p blocks at once; the data does not pass
through this process or the kernel's page cache. A progress line shows on a
terminal.

Where the blocks go depends on the mount's --cache-dir:
  - a directory (the default): the disk cache, which keeps them across
    mounts up to --cache-size and --free-space-ratio; blocks also pass
    through the memory cache, as a read's do;
  - memory: the memory cache, which holds as much as its size (see
    --buffer-size) and is lost when the mount ends.
Either cache evicts its least recently used blocks to take new ones, so
warming more than it holds keeps only the last part. A mount caches the
blocks it writes only when they are shorter than a block (or all of them
with --cache-large-write), never on file storage (they are local already)
and never with --cache-partial-only, so fresh big files start uncached.

On a member of a cache group (sluice mount --cache-group NAME), each block
is warmed on its owner, so that a warmup from any one member fills the group
with each block once (docs/cachegroup.md); --cache-group says so, and fails
on a mount in no group. --check and --evict see this member's caches only.

--check reports instead, per PATH and in total, how many bytes of the blocks
are cached and what share that is. --evict drops the blocks from both
caches (blocks staged for upload by --writeback stay). --background returns
at once and lets the mount do the work; it logs the result.

Files you may not read are skipped and reported, as are subdirectories you
may not list; the command then fails.`,
		Example: `  sluice warmup /mnt/vol/dataset
  sluice warmup -p 16 -f files.txt
  sluice warmup --check /mnt/vol/dataset
  sluice warmup --evict /mnt/vol/dataset/old`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			paths, err := warmupPaths(args, o.list)
			if err != nil {
				return err
			}
			return runWarmup(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), paths, o)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.list, "file", "f", "", "a file listing paths to warm up, one per line ('-' reads standard input)")
	fl.IntVarP(&o.threads, "threads", "p", o.threads, "blocks the mount fetches (or checks, or evicts) at once")
	fl.BoolVar(&o.check, "check", false, "report how much of the blocks is cached instead of fetching them")
	fl.BoolVar(&o.evict, "evict", false, "drop the blocks from the cache instead of fetching them")
	fl.BoolVar(&o.background, "background", false, "return at once and let the mount do the work")
	fl.BoolVar(&o.cacheGroup, "cache-group", false, "warm each block on its owner in the mount's cache group (what a member does anyway); fail on a mount in no group")
	fl.BoolVar(&o.json, "json", false, "print the result as JSON")
	return cmd
}

// warmupPaths returns args followed by the paths listed in list (one per
// line; blank lines are skipped).
func warmupPaths(args []string, list string) ([]string, error) {
	paths := append([]string(nil), args...)
	if list != "" {
		var r io.Reader = os.Stdin
		if list != "-" {
			f, err := os.Open(list)
			if err != nil {
				return nil, fmt.Errorf("-f: %w", err)
			}
			defer f.Close()
			r = f
		}
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if line := strings.TrimRight(sc.Text(), "\r"); strings.TrimSpace(line) != "" {
				paths = append(paths, line)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("-f %s: %w", list, err)
		}
	}
	if len(paths) == 0 {
		return nil, errors.New("warmup: give PATHs or -f LISTFILE")
	}
	return paths, nil
}

// warmupTarget is a path to warm up with the mount it is on.
type warmupTarget struct {
	path string
	ino  meta.Ino
}

func runWarmup(ctx context.Context, out, errOut io.Writer, paths []string, o warmupOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	// Group the paths by mount, in the order the mounts first appear.
	var roots []string
	byRoot := map[string][]warmupTarget{}
	var failed int64
	for _, p := range paths {
		m, err := control.Find(p)
		if err != nil {
			fmt.Fprintf(errOut, "warmup: %v\n", err)
			failed++
			continue
		}
		if _, ok := byRoot[m.Root]; !ok {
			roots = append(roots, m.Root)
		}
		byRoot[m.Root] = append(byRoot[m.Root], warmupTarget{path: p, ino: m.Ino})
	}
	total := control.WarmupResult{Mode: o.mode()}
	batch := o.batch
	if batch <= 0 {
		batch = warmupBatch
	}
	var done control.Progress // of the requests before the current one
	for _, root := range roots {
		targets := byRoot[root]
		for len(targets) > 0 {
			n := min(batch, len(targets))
			res, err := warmupBatchAt(ctx, root, targets[:n], o, done)
			if err != nil {
				return fmt.Errorf("warmup on %s: %w", root, err)
			}
			targets = targets[n:]
			mergeWarmup(&total, res)
			done.Files += res.Total.Files
			done.Bytes += res.Total.Bytes
			printFailures(errOut, "warmup", "", res.Failed, res.Failures)
		}
	}
	total.Failed += failed
	if err := printWarmup(out, &total, o); err != nil {
		return err
	}
	if total.Failed > 0 {
		return fmt.Errorf("warmup: %d %s failed", total.Failed, plural(int(total.Failed), "path"))
	}
	return nil
}

// warmupBatchAt sends one request for targets to the mount at root; done
// is what earlier requests did, for the progress line.
func warmupBatchAt(ctx context.Context, root string, targets []warmupTarget, o warmupOptions, done control.Progress) (*control.WarmupResult, error) {
	args := control.WarmupArgs{Mode: o.mode(), Threads: o.threads, Background: o.background, CacheGroup: o.cacheGroup}
	for _, t := range targets {
		args.Inos = append(args.Inos, t.ino)
		args.Paths = append(args.Paths, t.path)
	}
	verb := map[string]string{control.WarmupFetch: "warmed", control.WarmupCheck: "checked", control.WarmupEvict: "evicted"}[args.Mode]
	var res control.WarmupResult
	err := callMount(ctx, root, control.OpWarmup, meta.RootIno, args, &res, func(p control.Progress) string {
		return fmt.Sprintf("%s %d files, %s", verb, done.Files+p.Files, humanBytes(done.Bytes+p.Bytes))
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// mergeWarmup adds the result of one request to total.
func mergeWarmup(total, res *control.WarmupResult) {
	total.Paths = append(total.Paths, res.Paths...)
	total.Total.Add(res.Total)
	total.Fetched += res.Fetched
	total.Tiers = res.Tiers
	total.Background = total.Background || res.Background
	total.Failed += res.Failed
	total.Failures = append(total.Failures, res.Failures...)
}

// printWarmup prints the result of a warmup.
func printWarmup(w io.Writer, r *control.WarmupResult, o warmupOptions) error {
	if o.json {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	t := r.Total
	files := fmt.Sprintf("%d %s", t.Files, plural(int(t.Files), "file"))
	switch {
	case r.Background:
		fmt.Fprintf(w, "the mount goes on in the background with %d %s; it logs the result\n", len(r.Paths), plural(len(r.Paths), "path"))
	case r.Mode == control.WarmupCheck:
		for _, p := range r.Paths {
			fmt.Fprintf(w, "%s: %s\n", p.Path, cachedLine(p.WarmupTotals))
		}
		if len(r.Paths) > 1 {
			fmt.Fprintf(w, "total: %s\n", cachedLine(t))
		}
	case r.Mode == control.WarmupEvict:
		fmt.Fprintf(w, "evicted %s of %s (%s of blocks) from the cache\n", humanBytes(t.Cached), files, humanBytes(t.Bytes))
	default:
		tier := "memory"
		if len(r.Tiers) > 0 {
			tier = r.Tiers[len(r.Tiers)-1]
		}
		fmt.Fprintf(w, "warmed up %s: %s in %d blocks in the %s cache, %s fetched from object storage\n",
			files, humanBytes(t.Cached), t.Blocks, tier, humanBytes(r.Fetched))
	}
	return nil
}

// cachedLine formats what --check found: "1.0 MiB of 2.0 MiB cached
// (50.0%), 3 files".
func cachedLine(t control.WarmupTotals) string {
	return fmt.Sprintf("%s of %s cached (%s), %d %s, %d %s", humanBytes(t.Cached), humanBytes(t.Bytes),
		percent(t.Cached, t.Bytes), t.Files, plural(int(t.Files), "file"), t.Blocks, plural(int(t.Blocks), "block"))
}

// percent formats part/whole as a percentage; nothing of nothing is all.
func percent(part, whole int64) string {
	if whole == 0 {
		return "100.0%"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}
