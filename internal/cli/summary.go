package cli

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/control"
)

// summaryOptions are the flags of `sluice summary`.
type summaryOptions struct {
	depth, entries int
	csv, json      bool
	strict         bool
}

// validate checks the flags.
func (o *summaryOptions) validate() error {
	switch {
	case o.depth < 0:
		return fmt.Errorf("--depth %d: must be 0 or more", o.depth)
	case o.entries < 1:
		return fmt.Errorf("--entries %d: must be 1 or more", o.entries)
	case o.csv && o.json:
		return errors.New("--csv and --json: choose one")
	}
	return nil
}

func newSummary() *cobra.Command {
	o := summaryOptions{depth: 2, entries: 10}
	cmd := &cobra.Command{
		Use:   "summary PATH",
		Short: "Show where the bytes and files of a tree are",
		Long: `Show the size (the sum of file lengths), the number of files (entries that
are not directories) and of directories (each counting itself) of PATH and of
its entries down to --depth levels below it, the biggest --entries of each
directory, biggest first; the others of a directory are summed in one line
named "...". Sizes are shown in powers of 1024 (KiB, MiB, ...); --csv and
--json give bytes.

The mount computes the summary in one walk of the tree, asked through its
control channel (the file .control at its root); a progress line shows on a
terminal. The walk uses your permissions: subdirectories you may not list
are skipped and reported, or fail the command with --strict.`,
		Example: `  sluice summary /mnt/vol
  sluice summary --depth 1 --entries 5 /mnt/vol/data
  sluice summary --csv /mnt/vol > usage.csv`,
		Args: exactArgs(1, "one PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return runSummary(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], o)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.depth, "depth", o.depth, "levels of directories shown below PATH (0: PATH only)")
	fl.IntVar(&o.entries, "entries", o.entries, "entries shown per directory, the biggest; the rest are summed as \"...\"")
	fl.BoolVar(&o.csv, "csv", false, "print CSV (path,size,files,dirs; size in bytes)")
	fl.BoolVar(&o.json, "json", false, "print the tree as JSON")
	fl.BoolVar(&o.strict, "strict", false, "fail at a subdirectory you may not list instead of skipping it")
	return cmd
}

func runSummary(ctx context.Context, out, errOut io.Writer, path string, o summaryOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	m, err := control.Find(path)
	if err != nil {
		return fmt.Errorf("summary %s: %w", path, err)
	}
	var res control.SummaryResult
	args := control.SummaryArgs{Depth: o.depth, Entries: o.entries, Strict: o.strict}
	err = callMount(ctx, m.Root, control.OpSummary, m.Ino, args, &res, func(p control.Progress) string {
		return fmt.Sprintf("walked %d files, %d directories, %s", p.Files, p.Dirs, humanBytes(p.Bytes))
	})
	if err != nil {
		return fmt.Errorf("summary %s: %w", path, err)
	}
	if res.Tree == nil {
		return fmt.Errorf("summary %s: the mount returned no tree", path)
	}
	printFailures(errOut, "summary", path, res.Failed, res.Failures)
	switch {
	case o.json:
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	case o.csv:
		return writeSummaryCSV(out, summaryRows(path, res.Tree))
	}
	return writeSummaryTable(out, summaryRows(path, res.Tree))
}

// summaryRow is one line of a summary.
type summaryRow struct {
	path                string
	length, files, dirs int64
}

// summaryRows flattens the tree under top, which is shown as path, in
// the order of a listing: each directory, then its entries.
func summaryRows(path string, top *control.SummaryNode) []summaryRow {
	var rows []summaryRow
	var walk func(n *control.SummaryNode)
	walk = func(n *control.SummaryNode) {
		p := path
		if n.Path != "" {
			p = strings.TrimSuffix(path, "/") + "/" + n.Path
		}
		switch {
		case n.Others > 0:
			p += fmt.Sprintf(" (%d more)", n.Others)
		case n.Dir && !strings.HasSuffix(p, "/"):
			p += "/"
		}
		rows = append(rows, summaryRow{path: p, length: n.Length, files: n.Files, dirs: n.Dirs})
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(top)
	return rows
}

// writeSummaryTable prints rows as an aligned table.
func writeSummaryTable(w io.Writer, rows []summaryRow) error {
	width := [4]int{len("PATH"), len("SIZE"), len("FILES"), len("DIRS")}
	cells := make([][4]string, len(rows))
	for i, r := range rows {
		cells[i] = [4]string{r.path, humanBytes(r.length), strconv.FormatInt(r.files, 10), strconv.FormatInt(r.dirs, 10)}
		for j, c := range cells[i] {
			width[j] = max(width[j], len(c))
		}
	}
	line := func(c [4]string) error {
		_, err := fmt.Fprintf(w, "%-*s  %*s  %*s  %*s\n", width[0], c[0], width[1], c[1], width[2], c[2], width[3], c[3])
		return err
	}
	if err := line([4]string{"PATH", "SIZE", "FILES", "DIRS"}); err != nil {
		return err
	}
	for _, c := range cells {
		if err := line(c); err != nil {
			return err
		}
	}
	return nil
}

// writeSummaryCSV prints rows as CSV, sizes in bytes.
func writeSummaryCSV(w io.Writer, rows []summaryRow) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"path", "size", "files", "dirs"})
	for _, r := range rows {
		_ = cw.Write([]string{r.path, strconv.FormatInt(r.length, 10), strconv.FormatInt(r.files, 10), strconv.FormatInt(r.dirs, 10)})
	}
	cw.Flush()
	return cw.Error()
}
