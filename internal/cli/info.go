package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/control"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// infoOptions are the flags of `sluice info`.
type infoOptions struct {
	raw, recursive, strict, json bool
}

func newInfo() *cobra.Command {
	var o infoOptions
	cmd := &cobra.Command{
		Use:   "info PATH...",
		Short: "Show the inode, attributes and data layout of files and directories",
		Long: `Show, for each PATH on a Sluice mount, its inode, type, mode, owner, link
count, length and times, as the mount's metadata holds them; for a file also
its chunks (64 MiB ranges of the file) and how many slices each holds, and
with --raw each slice (id, size, offset and length in the slice, position in
the chunk) with the object keys of the blocks that hold its bytes.

For a directory, -r walks its tree and adds totals: files (every entry that
is not a directory), directories (itself included), the sum of the lengths
of its files, and the number of its own entries. The mount does the walk,
asked through its control channel (the file .control at its root), so a big
tree costs no system call per entry; a progress line shows on a terminal.
Subdirectories you may not list are skipped and reported, or fail the
command with --strict.

Any user may run it on what they can reach: the mount checks the caller's
permissions as system calls would (search permission on the directories
above PATH, read permission on a file to show its chunks, read and search
permission on each directory walked).`,
		Example: `  sluice info /mnt/vol/data/file.bin
  sluice info --raw --json /mnt/vol/data/file.bin
  sluice info -r /mnt/vol/data`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runInfo(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args, o)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&o.raw, "raw", false, "list each chunk's slices and the object keys of their blocks")
	fl.BoolVarP(&o.recursive, "recursive", "r", false, "for a directory, walk its tree and show totals")
	fl.BoolVar(&o.strict, "strict", false, "with -r, fail at a subdirectory you may not list instead of skipping it")
	fl.BoolVar(&o.json, "json", false, "print a JSON array with one object per PATH, for scripts")
	return cmd
}

// infoEntry is one PATH of `sluice info --json`.
type infoEntry struct {
	Path string `json:"path"`
	*control.InfoResult
}

func runInfo(ctx context.Context, out, errOut io.Writer, paths []string, o infoOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	var entries []infoEntry
	var errs []error
	for _, p := range paths {
		res, err := infoOf(ctx, p, o)
		if err != nil {
			errs = append(errs, fmt.Errorf("info %s: %w", p, err))
			continue
		}
		printFailures(errOut, "info", p, res.Failed, res.Failures)
		if o.json {
			entries = append(entries, infoEntry{Path: p, InfoResult: res})
			continue
		}
		printInfo(out, p, res)
	}
	if o.json && entries != nil {
		b, err := json.MarshalIndent(entries, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s\n", b)
	}
	return errors.Join(errs...)
}

// infoOf asks the mount of path about it.
func infoOf(ctx context.Context, path string, o infoOptions) (*control.InfoResult, error) {
	m, err := infoTarget(path)
	if err != nil {
		return nil, err
	}
	var res control.InfoResult
	args := control.InfoArgs{Raw: o.raw, Recursive: o.recursive, Strict: o.strict}
	err = callMount(ctx, m.Root, control.OpInfo, m.Ino, args, &res, func(p control.Progress) string {
		return fmt.Sprintf("walked %d files, %d directories, %s", p.Files, p.Dirs, humanBytes(p.Bytes))
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// infoTarget finds the mount of path and the inode info describes: that
// of path itself, a symbolic link rather than what it points to, as
// stat(1) shows it.
func infoTarget(path string) (*control.Mount, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return nil, fmt.Errorf("lstat %s: %w", path, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		return control.Find(path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	m, err := control.Find(filepath.Dir(abs))
	if err != nil {
		return nil, err
	}
	m.Ino = meta.Ino(st.Ino)
	return m, nil
}

// printInfo prints what info found about path.
func printInfo(w io.Writer, path string, r *control.InfoResult) {
	fmt.Fprintf(w, "%s:\n", path)
	line := func(k, format string, args ...any) {
		fmt.Fprintf(w, "  %-8s %s\n", k+":", fmt.Sprintf(format, args...))
	}
	line("inode", "%d", r.Ino)
	line("type", "%s", r.Type)
	line("mode", "%s (%04o)", modeString(r.Type, r.Mode), r.Mode)
	line("owner", "%s, group %s", userName(r.Uid), groupName(r.Gid))
	line("links", "%d", r.Nlink)
	line("length", "%s", bytesAndExact(int64(r.Length)))
	for _, t := range []struct {
		k string
		v time.Time
	}{{"atime", r.Atime}, {"mtime", r.Mtime}, {"ctime", r.Ctime}} {
		line(t.k, "%s", t.v.Local().Format("2006-01-02 15:04:05.000000000 -0700"))
	}
	if r.Target != "" {
		line("target", "%s", r.Target)
	}
	if r.Type == control.TypeName(store.TypeFile) {
		line("chunks", "%d", len(r.Chunks))
		for _, c := range r.Chunks {
			printChunk(w, c)
		}
	}
	if r.Tree != nil {
		line("entries", "%d", *r.Entries)
		line("files", "%d", r.Tree.Files)
		line("dirs", "%d", r.Tree.Dirs)
		line("size", "%s", bytesAndExact(r.Tree.Length))
		if r.Failed > 0 {
			line("skipped", "%d directories you may not list", r.Failed)
		}
	}
}

// printChunk prints one chunk of info, with its slices and blocks when
// info has them.
func printChunk(w io.Writer, c control.ChunkInfo) {
	start := int64(c.Index) * meta.ChunkSize
	fmt.Fprintf(w, "    chunk %d (bytes %d to %d): %d %s\n", c.Index, start, start+meta.ChunkSize, c.Count, plural(c.Count, "slice"))
	for _, s := range c.Slices {
		if s.ID == 0 {
			fmt.Fprintf(w, "      hole: pos %d, len %d\n", s.Pos, s.Len)
			continue
		}
		fmt.Fprintf(w, "      slice %d: pos %d, size %d, off %d, len %d\n", s.ID, s.Pos, s.Size, s.Off, s.Len)
		for _, b := range s.Blocks {
			fmt.Fprintf(w, "        %s (%d bytes)\n", b.Key, b.Len)
		}
	}
}

// plural returns word, in the plural unless n is 1.
func plural(n int, word string) string {
	switch {
	case n == 1:
		return word
	case strings.HasSuffix(word, "y"):
		return strings.TrimSuffix(word, "y") + "ies"
	}
	return word + "s"
}

// bytesAndExact formats n as "1.5 MiB (1572864 bytes)".
func bytesAndExact(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%s (%d bytes)", humanBytes(n), n)
}

// modeString formats a node's type and mode bits as ls -l does.
func modeString(typ string, mode uint16) string {
	kind := map[string]byte{"directory": 'd', "symlink": 'l', "fifo": 'p', "socket": 's',
		"block device": 'b', "character device": 'c'}[typ]
	if kind == 0 {
		kind = '-'
	}
	b := []byte{kind}
	for shift, special := range []struct {
		bit       uint16
		set, bare byte
	}{{0o4000, 's', 'S'}, {0o2000, 's', 'S'}, {0o1000, 't', 'T'}} {
		perms := mode >> (6 - 3*shift) & 7
		b = append(b, "-r"[perms>>2&1], "-w"[perms>>1&1])
		switch x := perms&1 != 0; {
		case mode&special.bit != 0 && x:
			b = append(b, special.set)
		case mode&special.bit != 0:
			b = append(b, special.bare)
		case x:
			b = append(b, 'x')
		default:
			b = append(b, '-')
		}
	}
	return string(b)
}

// userName returns "name (uid)", or the number alone when this host does
// not know it.
func userName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return u.Username + " (" + id + ")"
	}
	return id
}

// groupName is userName for groups.
func groupName(gid uint32) string {
	id := strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(id); err == nil {
		return g.Name + " (" + id + ")"
	}
	return id
}

// callMount sends the control op with args about inode ino to the mount
// at root and decodes its result into res. On a terminal it shows the
// mount's progress reports as describe formats them.
func callMount(ctx context.Context, root, op string, ino meta.Ino, args, res any, describe func(control.Progress) string) error {
	raw, err := json.Marshal(args)
	if err != nil {
		return err
	}
	prog := newProgress()
	defer prog.done()
	out, err := control.Call(ctx, root, control.Request{Op: op, Ino: ino, Args: raw}, func(b json.RawMessage) {
		var p control.Progress
		if json.Unmarshal(b, &p) == nil && describe != nil {
			prog.show("%s", describe(p))
		}
	})
	if err != nil {
		var ce *control.Error
		if errors.As(err, &ce) {
			return &mountError{msg: strings.TrimPrefix(ce.Msg, op+": "), errno: ce.Errno}
		}
		return err
	}
	if err := json.Unmarshal(out, res); err != nil {
		return fmt.Errorf("%s: bad result from the mount: %w", op, err)
	}
	return nil
}

// printFailures prints the entries an operation on base could not
// handle, their paths relative to base, and how many more there were.
func printFailures(w io.Writer, cmd, base string, n int64, fails []control.Failure) {
	for _, f := range fails {
		fmt.Fprintf(w, "%s: %s: %s\n", cmd, filepath.Join(base, f.Path), f.Err)
	}
	if more := n - int64(len(fails)); more > 0 {
		fmt.Fprintf(w, "%s: ... and %d more\n", cmd, more)
	}
}

// mountError is a failure a mount reported, without the name of the
// operation, which the command's own message gives.
type mountError struct {
	msg   string
	errno syscall.Errno
}

func (e *mountError) Error() string { return e.msg }

// Unwrap returns the errno, so that errors.Is(err, syscall.EACCES) works.
func (e *mountError) Unwrap() error {
	if e.errno == 0 {
		return nil
	}
	return e.errno
}
