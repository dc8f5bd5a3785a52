package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/sluicefs/sluice/internal/accesslog"
	"github.com/sluicefs/sluice/internal/control"
	"github.com/sluicefs/sluice/internal/vfs"
)

type profileOptions struct {
	interval      time.Duration
	uid, gid, pid string
}

func newProfile() *cobra.Command {
	o := profileOptions{interval: 2 * time.Second}
	cmd := &cobra.Command{
		Use:   "profile MOUNTPOINT|LOGFILE",
		Short: "Show which operations a mount spends its time on, from its access log",
		Long: `Add up the FUSE requests of a mount per operation, from its access log, and
show for each operation the requests (COUNT), the time the mount took to
answer them (TOTAL, in milliseconds), the average (AVG) and the share of
all the time spent (TIME%), the operation that takes the most time first.
It is how to find why a workload is slow: many lookups and getattrs call
for longer --entry-cache and --attr-cache (see 'sluice mount --help'),
slow reads and writes for the data path ('sluice stats' shows which part).

With MOUNTPOINT (a Sluice mount, or any path in one), read its internal
file .accesslog, which shows one line per request while it is open (only
root may read it), and redraw the table every --interval seconds with the
totals since the command started. On a terminal the table is redrawn in
place; press q or Ctrl-C to quit, any other key to redraw at once.
Otherwise (output to a pipe or a file) a new table follows every
interval, after a line with the time.

With LOGFILE, a copy of the access log saved earlier, replay it: with
--interval 0 print the totals of the whole file once; with an interval,
print the totals so far after each interval of the log's own time (as
fast as the file reads, not in real time) and the whole at the end.
Recording first and replaying later keeps the profile out of the
workload's way:

  cat /mnt/vol/.accesslog > access.log    # Ctrl-C once the workload is done
  sluice profile access.log --interval 0

A line of the access log looks like

  2026.11.26 14:30:15.581554 [uid:0,gid:0,pid:7393] create (1,"x",0644): OK (2,fh 3) <0.000564>

(when the request ended, the caller, the operation and its arguments, the
result and what the reply carried, the latency in seconds). --uid, --gid
and --pid keep only the requests of those callers (comma-separated lists;
a request must match every list given). The pid FUSE reports is that of
the calling thread: a multithreaded program's requests carry the ids of
its threads (see /proc/PID/task). Comment lines (such as the note the
mount writes when the reader was too slow and lines were dropped) and
lines that do not parse are skipped and counted, and the command says
how many.`,
		Example: `  sluice profile /mnt/vol                          # live, redrawn every 2 seconds
  sluice profile /mnt/vol --uid 1000 --interval 5  # only the requests of uid 1000
  cat /mnt/vol/.accesslog > access.log             # record (Ctrl-C to stop) ...
  sluice profile access.log --interval 0           # ... and replay it at once
  sluice profile access.log --pid 4231,4232        # a table per 2 s of the log's time, two processes only`,
		Args: exactArgs(1, "MOUNTPOINT or LOGFILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var f accesslog.Filter
			var err error
			for _, l := range []struct {
				flag, val string
				dst       *[]uint32
			}{{"--uid", o.uid, &f.Uids}, {"--gid", o.gid, &f.Gids}, {"--pid", o.pid, &f.Pids}} {
				if *l.dst, err = accesslog.ParseIDs(l.val); err != nil {
					return fmt.Errorf("%s: %w", l.flag, err)
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runProfile(ctx, cmd.OutOrStdout(), args[0], o.interval, f)
		},
	}
	cmd.Flags().Var(secondsValue{&o.interval}, "interval", "seconds between tables; 0 (only with LOGFILE) prints the totals once")
	cmd.Flags().StringVar(&o.uid, "uid", "", "only the requests of these user ids (comma-separated)")
	cmd.Flags().StringVar(&o.gid, "gid", "", "only the requests of these group ids (comma-separated)")
	cmd.Flags().StringVar(&o.pid, "pid", "", "only the requests of these process (thread) ids (comma-separated)")
	return cmd
}

// runProfile profiles the mount path lies on, or replays the log file
// path.
func runProfile(ctx context.Context, out io.Writer, path string, interval time.Duration, f accesslog.Filter) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	if fi.Mode().IsRegular() {
		lf, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("profile: %w", err)
		}
		defer lf.Close()
		return replayProfile(out, lf, path, interval, f)
	}
	if !fi.IsDir() {
		return fmt.Errorf("profile: %s is neither a Sluice mount point nor an access log file", path)
	}
	m, err := control.Find(path)
	if err != nil {
		return fmt.Errorf("profile: %s is neither a Sluice mount point nor an access log file: %w", path, err)
	}
	if interval <= 0 {
		return errors.New("profile: --interval must be above 0 for a mount point (0 replays a saved LOGFILE at once)")
	}
	return followProfile(ctx, out, m.Root, interval, f)
}

// replayProfile adds up the access log in r (called name) and prints the
// totals: after each interval of the log's time when interval > 0, and
// at the end.
func replayProfile(out io.Writer, r io.Reader, name string, interval time.Duration, f accesslog.Filter) error {
	w := bufio.NewWriter(out)
	defer w.Flush()
	p := &accesslog.Profile{Filter: f}
	err := p.Replay(r, name, interval, func(end time.Time) {
		fmt.Fprintf(w, "--- %s (log time)\n", end.Format("2006.01.02 15:04:05.000"))
		writeProfileTable(w, p, 0)
	})
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	if interval > 0 {
		fmt.Fprintf(w, "--- end of %s\n", name)
	}
	fmt.Fprintln(w, replayTitle(p, name))
	writeProfileTable(w, p, 0)
	fmt.Fprintln(w, skippedSummary(p))
	return w.Flush()
}

// replayTitle describes the requests of a replay.
func replayTitle(p *accesslog.Profile, name string) string {
	t := p.Total()
	s := fmt.Sprintf("%s: %d requests", name, t.Count)
	if t.Count > 0 {
		s += fmt.Sprintf(" from %s to %s (%.3f s)", p.First.Format(accesslog.TimeLayout),
			p.Last.Format(accesslog.TimeLayout), p.Last.Sub(p.First).Seconds())
	}
	if !p.Filter.Empty() {
		s += fmt.Sprintf(" of %s; %d other requests left out", p.Filter, p.Filtered)
	}
	return s
}

// skippedSummary says how many lines were skipped and why, and how many
// the mount dropped.
func skippedSummary(p *accesslog.Profile) string {
	s := fmt.Sprintf("skipped %d of %s (%s, %d that do not parse)", p.Skipped(), countWord(p.Lines, "line"), countWord(p.Comments, "comment"), p.Bad)
	if p.Dropped > 0 {
		s += fmt.Sprintf("; the mount dropped %d lines because the reader was too slow, so the figures are short", p.Dropped)
	}
	return s
}

// countWord returns "1 line", "2 lines".
func countWord(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// writeProfileTable writes the table of p; maxRows > 0 limits the
// operations shown (the total row always is).
func writeProfileTable(w io.Writer, p *accesslog.Profile, maxRows int) {
	ops := p.Ops()
	width := len("OPERATION")
	for _, s := range ops {
		width = max(width, len(s.Op))
	}
	row := func(op, count, total, avg, share string) {
		fmt.Fprintf(w, "%-*s %10s %12s %10s %7s\n", width, op, count, total, avg, share)
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)) }
	stats := func(s accesslog.OpStats) {
		row(s.Op, fmt.Sprint(s.Count), ms(s.Total), ms(s.Average()), fmt.Sprintf("%.1f", p.Share(s)))
	}
	row("OPERATION", "COUNT", "TOTAL(ms)", "AVG(ms)", "TIME%")
	hidden := 0
	if maxRows > 0 && len(ops) > maxRows {
		hidden = len(ops) - maxRows
		ops = ops[:maxRows]
	}
	for _, s := range ops {
		stats(s)
	}
	if hidden > 0 {
		fmt.Fprintf(w, "(%d more operations)\n", hidden)
	}
	t := p.Total()
	if p.Total().Total == 0 {
		row(t.Op, fmt.Sprint(t.Count), ms(0), ms(0), "-")
		return
	}
	stats(t)
}

// followProfile reads the access log of the mount at root and redraws
// the totals every interval until ctx ends (or q is pressed on a
// terminal).
func followProfile(ctx context.Context, out io.Writer, root string, interval time.Duration, f accesslog.Filter) error {
	logPath := filepath.Join(root, vfs.AccessLogName)
	// Open once here, so that a user who may not read the log hears it
	// at once.
	first, err := os.Open(logPath)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return fmt.Errorf("profile: %w (only root may read the access log)", err)
		}
		return fmt.Errorf("profile: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []string, 16)
	failed := make(chan error, 1)
	go func() { failed <- accesslog.Follow(ctx, first, logPath, batches) }()

	term := terminalOf(out)
	keys, restore := readKeys(term)
	defer restore()

	p := &accesslog.Profile{Filter: f}
	start := time.Now()
	draw := func() {
		var b bytes.Buffer
		now := time.Now()
		if term != nil {
			b.WriteString("\033[H\033[2J")
			fmt.Fprintf(&b, "> Sluice profile of %s  refresh every %v  up %v  (q or Ctrl-C quits)\n",
				root, interval, now.Sub(start).Truncate(time.Second))
		} else {
			fmt.Fprintf(&b, "--- %s  %s  up %v\n", now.Format("2006-01-02 15:04:05"), root, now.Sub(start).Truncate(time.Second))
		}
		fmt.Fprintf(&b, "%d requests", p.Total().Count)
		if !f.Empty() {
			fmt.Fprintf(&b, " of %s (%d others left out)", f, p.Filtered)
		}
		fmt.Fprintf(&b, "; %s\n", skippedSummary(p))
		rows := 0
		if term != nil {
			if ws, err := unix.IoctlGetWinsize(int(term.Fd()), unix.TIOCGWINSZ); err == nil && ws.Row > 6 {
				rows = int(ws.Row) - 6
			}
		}
		writeProfileTable(&b, p, rows)
		out.Write(b.Bytes())
	}
	if term != nil {
		draw()
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case lines := <-batches:
			for _, l := range lines {
				p.AddLine(l)
			}
		case <-tick.C:
			draw()
		case k := <-keys:
			if k == 'q' || k == 'Q' {
				return nil
			}
			draw()
		case err := <-failed:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("profile: %w", err)
		case <-ctx.Done():
			return nil
		}
	}
}

// terminalOf returns out as a terminal, or nil when it is not one.
func terminalOf(out io.Writer) *os.File {
	if f, ok := out.(*os.File); ok && isTerminal(f) {
		return f
	}
	return nil
}

// readKeys, when term is not nil and stdin is a terminal too, switches
// stdin to reading single keys without echo and sends each key read;
// restore switches it back. Otherwise no key ever comes.
func readKeys(term *os.File) (keys <-chan byte, restore func()) {
	ch := make(chan byte, 1)
	if term == nil {
		return ch, func() {}
	}
	fd := int(os.Stdin.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return ch, func() {}
	}
	raw := *old
	raw.Lflag &^= unix.ICANON | unix.ECHO
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return ch, func() {}
	}
	go func() {
		b := make([]byte, 1)
		for {
			if n, err := os.Stdin.Read(b); err != nil || n == 0 {
				return
			}
			ch <- b[0]
		}
	}()
	return ch, func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }
}
