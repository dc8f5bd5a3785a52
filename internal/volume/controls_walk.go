package volume

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/sluicefs/sluice/internal/control"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// summary is the "summary" control: the totals of the tree at req.Ino
// and of its entries down to SummaryArgs.Depth, the biggest
// SummaryArgs.Entries of each directory.
func (t *tools) summary(ctx context.Context, req control.Request, progress func(any)) (any, error) {
	args := control.SummaryArgs{Depth: 2, Entries: 10}
	if err := decodeArgs(req, &args); err != nil {
		return nil, err
	}
	if args.Depth < 0 || args.Entries < 1 {
		return nil, fmt.Errorf("summary: depth %d and entries %d: want depth >= 0 and entries >= 1: %w",
			args.Depth, args.Entries, syscall.EINVAL)
	}
	if err := t.checkReach(ctx, req.Ino); err != nil {
		return nil, err
	}
	a, err := t.mc.GetAttr(ctx, req.Ino)
	if err != nil {
		return nil, err
	}
	if a.Type != store.TypeDir {
		n := &control.SummaryNode{Totals: control.Totals{Files: 1}}
		if a.Type == store.TypeFile {
			n.Length = int64(a.Length)
		}
		return &control.SummaryResult{Tree: n}, nil
	}
	w := t.newWalker(ctx, args.Strict)
	w.depth, w.entries = args.Depth, args.Entries
	stop := reportProgress(ctx, progress, w.progress)
	top, _, err := w.top(ctx, a.Ino)
	stop()
	if err != nil {
		return nil, err
	}
	res := &control.SummaryResult{Tree: top}
	res.Failed, res.Failures = w.fails.List()
	return res, nil
}

// walker walks directory trees with the caller's credentials, listing up
// to walkListers directories at once. It adds up what each directory
// holds and, for a summary, keeps the biggest entries down to depth.
type walker struct {
	mc     *meta.Session
	root   bool // the caller is root: no permission checks
	strict bool
	// depth is the levels below the top whose entries are kept (-1:
	// none); entries bounds those kept per directory.
	depth, entries int
	// file, when set, is called with each regular file; an error ends
	// the walk.
	file func(ctx context.Context, e meta.Entry, path string) error
	// fails records the subdirectories skipped, named prefix/path.
	fails  *control.Failures
	prefix string
	tokens chan struct{}

	files, dirs, bytes atomic.Int64 // progress
}

// newWalker returns a walker for the caller in ctx.
func (t *tools) newWalker(ctx context.Context, strict bool) *walker {
	return &walker{mc: t.mc, root: meta.CredOf(ctx).IsRoot(), strict: strict, depth: -1, entries: 1,
		fails: &control.Failures{}, tokens: make(chan struct{}, walkListers-1)}
}

func (w *walker) progress() control.Progress {
	return control.Progress{Files: w.files.Load(), Dirs: w.dirs.Load(), Bytes: w.bytes.Load()}
}

// top walks the directory ino, which the caller must be allowed to list,
// and returns its node and its number of entries.
func (w *walker) top(ctx context.Context, ino meta.Ino) (*control.SummaryNode, int64, error) {
	n, entries, err := w.dir(ctx, ino, "", 0)
	if err != nil {
		return nil, 0, err
	}
	return n, entries, nil
}

// dir walks directory ino at path, depth levels below the top. It
// returns the directory's node (counting at least the directory itself)
// and its number of entries; an error is the first the walk met, with
// the path it concerns.
func (w *walker) dir(ctx context.Context, ino meta.Ino, path string, depth int) (*control.SummaryNode, int64, error) {
	node := &control.SummaryNode{Path: path, Dir: true, Totals: control.Totals{Dirs: 1}}
	w.dirs.Add(1)
	if !w.root {
		if err := w.mc.Access(ctx, ino, meta.MayRead|meta.MayExec); err != nil {
			return node, 0, pathError(path, err)
		}
	}
	kids := &children{keep: depth < w.depth, max: w.entries, others: control.SummaryNode{Path: joinPath(path, "...")}}
	var entries int64
	var mu sync.Mutex // guards node and kids
	add := func(n *control.SummaryNode) {
		mu.Lock()
		defer mu.Unlock()
		node.Totals.Add(n.Totals)
		kids.add(n)
	}
	var errMu sync.Mutex
	var walkErr error
	setErr := func(err error) {
		errMu.Lock()
		walkErr = cmp.Or(walkErr, err)
		errMu.Unlock()
	}
	var after []byte
	for {
		es, err := w.mc.ReadDir(ctx, ino, after, walkPage, true)
		if err != nil {
			return node, entries, pathError(path, err)
		}
		entries += int64(len(es))
		var wg sync.WaitGroup
		for _, e := range es {
			if e.Attr == nil {
				continue // removed since the listing
			}
			p := joinPath(path, string(e.Name))
			if e.Type != store.TypeDir {
				n := &control.SummaryNode{Path: p, Totals: control.Totals{Files: 1}}
				if e.Type == store.TypeFile {
					n.Length = int64(e.Attr.Length)
					if w.file != nil {
						if err := w.file(ctx, e, p); err != nil {
							setErr(err)
						}
					}
				}
				w.files.Add(1)
				w.bytes.Add(n.Length)
				add(n)
				continue
			}
			sub := func() {
				n, _, err := w.dir(ctx, e.Ino, p, depth+1)
				if err = w.skip(p, err); err != nil {
					setErr(err)
				}
				add(n)
			}
			select {
			case w.tokens <- struct{}{}:
				wg.Add(1)
				go func() {
					defer func() { <-w.tokens; wg.Done() }()
					sub()
				}()
			default:
				sub()
			}
		}
		wg.Wait()
		if walkErr != nil {
			return node, entries, walkErr
		}
		if err := ctx.Err(); err != nil {
			return node, entries, err
		}
		if len(es) < walkPage {
			break
		}
		after = es[len(es)-1].Name
	}
	node.Children = kids.list()
	return node, entries, nil
}

// skip decides about the error of a subdirectory's walk: a directory the
// caller may not list is recorded and skipped unless the walk is strict,
// one removed meanwhile is skipped; any other error ends the walk.
func (w *walker) skip(path string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ENOENT):
		return nil
	case !w.strict && (errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)):
		var pe *walkPathError
		if errors.As(err, &pe) {
			err = pe.err
		}
		w.fails.Add(joinPath(w.prefix, path), err)
		return nil
	}
	return err
}

// pathError wraps err with the relative path it concerns (none for the
// top), unless it already names one.
func pathError(path string, err error) error {
	var pe *walkPathError
	if path == "" || errors.As(err, &pe) {
		return err
	}
	return &walkPathError{path: path, err: err}
}

// walkPathError is an error of a walk at a path below its top.
type walkPathError struct {
	path string
	err  error
}

func (e *walkPathError) Error() string { return e.path + ": " + e.err.Error() }
func (e *walkPathError) Unwrap() error { return e.err }

// children keeps the biggest entries of a directory for a summary and
// sums the others.
type children struct {
	keep   bool
	max    int
	kept   []*control.SummaryNode
	others control.SummaryNode
}

func (c *children) add(n *control.SummaryNode) {
	if !c.keep {
		return
	}
	c.kept = append(c.kept, n)
	if len(c.kept) >= 2*c.max+walkPage {
		c.trim()
	}
}

// trim keeps the max biggest entries and sums the rest in others.
func (c *children) trim() {
	slices.SortFunc(c.kept, func(a, b *control.SummaryNode) int {
		return cmp.Or(cmp.Compare(b.Length, a.Length), cmp.Compare(b.Files+b.Dirs, a.Files+a.Dirs), strings.Compare(a.Path, b.Path))
	})
	if len(c.kept) <= c.max {
		return
	}
	for _, n := range c.kept[c.max:] {
		c.others.Totals.Add(n.Totals)
		c.others.Others++
	}
	clear(c.kept[c.max:])
	c.kept = c.kept[:c.max]
}

// list returns the entries kept, biggest first, and the sum of the
// others as a last entry "...".
func (c *children) list() []*control.SummaryNode {
	if !c.keep {
		return nil
	}
	c.trim()
	if c.others.Others > 0 {
		return append(c.kept, &c.others)
	}
	return c.kept
}
