package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/dump"
	"github.com/sluicefs/sluice/internal/meta/engine/all"
)

func newLoad() *cobra.Command {
	o := dump.LoadOptions{Threads: 4}
	cmd := &cobra.Command{
		Use:   "load META-URL [FILE|-]",
		Short: "Create a volume in an empty metadata engine from a JSON dump",
		Long: `Read a metadata dump (written by 'sluice dump' or 'juicefs dump' of
JuiceFS 1.0 to 1.4) from FILE or standard input (no FILE, or -) into the
metadata engine at META-URL, which must hold no volume. A gzip or zstd
dump is recognised by its content. The volume then mounts on the bucket its
settings name, with the data already there: nothing is copied.

Link counts, used space and inodes, the next inode and slice numbers and
slice reference counts are recomputed from the tree, not taken from the
dump. What Sluice does not keep (quotas, sessions' open files, unknown
settings) is listed at the end. The input is checked as it is read: on a
malformed dump the load stops with the position of the problem and leaves
the engine empty, ready for another try; a load that was killed is cleared
by the next one.`,
		Example: `  sluice load redis://127.0.0.1:6379/2 meta.json.gz
  juicefs dump sqlite3://jfs.db - | sluice load sqlite3://vol.db`,
		Args: rangeArgs(1, 2, "META-URL [FILE|-]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := "-"
			if len(args) == 2 {
				file = args[1]
			}
			return runLoad(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), args[0], file, o)
		},
	}
	cmd.Flags().IntVar(&o.Threads, "threads", o.Threads, "batches of records written at once")
	return cmd
}

func runLoad(ctx context.Context, stdin io.Reader, out io.Writer, metaURL, file string, o dump.LoadOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.Threads <= 0 {
		return errors.New("--threads must be positive")
	}
	in, total := stdin, int64(-1)
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("open dump: %w", err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			total = fi.Size()
		}
		in = f
	}
	// The bar follows the file's bytes (compressed or not).
	counted := &countReader{r: in}
	zr, err := dump.NewReader(counted)
	if err != nil {
		return err
	}
	defer zr.Close()
	st, err := all.Open(ctx, metaURL, true)
	if err != nil {
		return err
	}
	defer st.Close()
	bar := newByteBar("loaded", total)
	o.Progress = func(p dump.Progress) { bar.set(p.Entries, counted.n) }
	rep, err := dump.Load(ctx, st, zr, o)
	bar.finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "loaded volume %q: %d entries (%d directories, %d files, %d symlinks, %d others; %d extra hard-link names), %d slice references\n",
		rep.Name, rep.Entries, rep.Dirs, rep.Files, rep.Symlinks, rep.Others, rep.HardLinks, rep.Slices)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "counter\tdumped\tloaded\t")
	for _, c := range []struct {
		name       string
		dumped, ld int64
	}{
		{"usedSpace", rep.Dumped.UsedSpace, rep.Loaded.UsedSpace},
		{"usedInodes", rep.Dumped.UsedInodes, rep.Loaded.UsedInodes},
		{"nextInode", rep.Dumped.NextInode, rep.Loaded.NextInode},
		{"nextChunk", rep.Dumped.NextChunk, rep.Loaded.NextChunk},
		{"nextSession", rep.Dumped.NextSession, rep.Loaded.NextSession},
	} {
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", c.name, c.dumped, c.ld)
	}
	tw.Flush()
	for _, n := range rep.Notes {
		fmt.Fprintln(out, "note:", n)
	}
	for _, d := range rep.Dropped {
		fmt.Fprintln(out, "not loaded:", d)
	}
	return nil
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
