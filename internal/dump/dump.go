package dump

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// Options tune Dump.
type Options struct {
	// Subdir, when not empty, dumps only the tree of that directory (a
	// path from the volume's root), as the root of the dump.
	Subdir string
	// KeepSecretKey writes the object storage secrets; by default they
	// are written as "removed".
	KeepSecretKey bool
	// SkipTrash leaves the trash out.
	SkipTrash bool
	// Threads is how many batches are fetched at once. Default 10.
	Threads int
	// Fast reads each batch in its own transaction, several at once,
	// instead of reading the whole volume in one snapshot on one
	// goroutine: faster, but a volume changed meanwhile may dump in a
	// state it never had. Engines without snapshots (Redis) always dump
	// this way.
	Fast bool
	// Progress, when set, is called from time to time, and once at the
	// end, with what has been done.
	Progress func(Progress)
}

// Progress is what a dump or load has done so far.
type Progress struct {
	Entries int64 // names written or read
	Bytes   int64 // bytes of JSON written or read (before compression)
}

// Stats describes a finished dump.
type Stats struct {
	Entries  int64 // names (a hard-linked file counts once per name)
	Dirs     int64
	Files    int64
	Symlinks int64
	Others   int64
	Bytes    int64 // bytes of JSON
	// Skipped counts entries whose inode vanished while a fast dump ran
	// (or, in a consistent dump, entries naming no inode: run fsck).
	Skipped int64
	// Consistent says the dump read one snapshot of the volume.
	Consistent bool
}

// batchSize is how many entries one batch fetches.
const batchSize = 1000

// Dump writes the metadata of the volume in st to w as the JSON dump of
// the spec, streaming: what it holds in memory is bounded by the batches
// in flight, whatever the size of the volume or of one directory.
func Dump(ctx context.Context, st store.Store, w io.Writer, opts Options) (*Stats, error) {
	if opts.Threads <= 0 {
		opts.Threads = 10
	}
	d := &dumper{st: st, opts: opts, out: newOutput(w, opts.Progress)}
	d.out.entries = &d.stats.Entries
	fast := opts.Fast || store.LimitsOf(st).NoSnapshot
	var err error
	if fast {
		err = d.run(ctx)
	} else {
		d.stats.Consistent = true
		err = st.View(ctx, func(tx store.Tx) error {
			d.tx = tx
			return d.run(ctx)
		})
	}
	if err != nil {
		return nil, err
	}
	d.stats.Bytes = d.out.n
	d.out.report()
	return &d.stats, nil
}

// dumper is one dump in progress.
type dumper struct {
	st    store.Store
	opts  Options
	tx    store.Tx // the snapshot of a consistent dump; nil in a fast one
	out   *output
	stats Stats
}

// view runs fn in the dump's snapshot, or in a View of its own.
func (d *dumper) view(ctx context.Context, fn func(store.Tx) error) error {
	if d.tx != nil {
		return fn(d.tx)
	}
	return d.st.View(ctx, fn)
}

func (d *dumper) run(ctx context.Context) error {
	if err := d.header(ctx); err != nil {
		return err
	}
	root, err := d.resolveSubdir(ctx)
	if err != nil {
		return err
	}
	d.out.raw(",\n  \"FSTree\": ")
	if err := d.tree(ctx, root, root == store.RootIno); err != nil {
		return err
	}
	if !d.opts.SkipTrash && d.opts.Subdir == "" {
		var has bool
		err := d.view(ctx, func(tx store.Tx) error {
			_, err := tx.Node(meta.TrashIno)
			has = err == nil
			if errors.Is(err, store.ErrNotFound) {
				err = nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("read trash: %w", err)
		}
		if has {
			d.out.raw(",\n  \"Trash\": ")
			if err := d.tree(ctx, meta.TrashIno, false); err != nil {
				return err
			}
		}
	}
	d.out.raw("\n}\n")
	return d.out.flush()
}

// header writes Setting, Counters, Sustained and DelFiles.
func (d *dumper) header(ctx context.Context) error {
	var setting []byte
	var c Counters
	var sustained []sustainedJSON
	var delFiles []store.DelFile
	err := d.view(ctx, func(tx store.Tx) error {
		var err error
		if setting, err = tx.Setting(); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return errors.New("no volume here: the metadata engine holds no settings (format it, or load a dump into it)")
			}
			return fmt.Errorf("read settings: %w", err)
		}
		for _, x := range []struct {
			name string
			v    *int64
		}{{meta.CounterUsedSpace, &c.UsedSpace}, {meta.CounterUsedInodes, &c.UsedInodes}, {meta.CounterNextInode, &c.NextInode},
			{meta.CounterNextSlice, &c.NextChunk}, {meta.CounterNextSession, &c.NextSession}} {
			if *x.v, err = tx.Counter(x.name); err != nil {
				return fmt.Errorf("read counter %s: %w", x.name, err)
			}
		}
		// The deletion queue is read through its own listing: a
		// whole-family scan walks the whole keyspace on Redis. It is
		// held in memory, 24 bytes a queued file.
		if delFiles, err = tx.DelFiles(0); err != nil {
			return fmt.Errorf("read files waiting for deletion: %w", err)
		}
		sessions, err := tx.Sessions()
		if err != nil {
			return fmt.Errorf("read sessions: %w", err)
		}
		sustained = sustained[:0]
		for _, s := range sessions {
			inos, err := tx.Sustained(s.Sid)
			if err != nil {
				return fmt.Errorf("read inodes kept by session %d: %w", s.Sid, err)
			}
			if len(inos) > 0 {
				sustained = append(sustained, sustainedJSON{s.Sid, inos})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	f, err := meta.DecodeFormat(setting)
	if err != nil {
		return err
	}
	if !d.opts.KeepSecretKey {
		for _, p := range []*string{&f.SecretKey, &f.SessionToken} {
			if *p != "" {
				*p = "removed"
			}
		}
	}
	if f.Storage == "file" && f.Bucket != "" && !strings.HasSuffix(f.Bucket, "/") {
		// A directory, as the dump format writes it: JuiceFS reads a
		// path without the slash as a directory and a key prefix.
		f.Bucket += "/"
	}
	// The dump's records are of the one layout the format knows; the
	// node flags of later metadata versions are not written (load sets
	// them again), and JuiceFS refuses settings of a version past its 1.
	f.MetaVersion = dumpMetaVersion
	if err := sealSecrets(f); err != nil {
		return err
	}
	sb, err := json.MarshalIndent(f, "  ", "  ")
	if err != nil {
		return fmt.Errorf("encode settings: %w", err)
	}
	cb, _ := json.MarshalIndent(c, "  ", "  ")
	if sustained == nil {
		sustained = []sustainedJSON{}
	}
	ub, _ := json.Marshal(sustained)
	d.out.raw("{\n  \"Setting\": ")
	d.out.write(sb)
	d.out.raw(",\n  \"Counters\": ")
	d.out.write(cb)
	d.out.raw(",\n  \"Sustained\": ")
	d.out.write(ub)
	d.out.raw(",\n  \"DelFiles\": [")
	first := true
	for _, f := range delFiles {
		if !first {
			d.out.raw(",")
		}
		first = false
		b := d.out.buf[:0]
		b = append(b, "\n    {\"inode\":"...)
		b = strconv.AppendUint(b, uint64(f.Ino), 10)
		b = append(b, ",\"length\":"...)
		b = strconv.AppendUint(b, f.Length, 10)
		b = append(b, ",\"expire\":"...)
		b = strconv.AppendInt(b, f.Expire, 10)
		b = append(b, '}')
		d.out.buf = b
		d.out.write(b)
	}
	if !first {
		d.out.raw("\n  ")
	}
	d.out.raw("]")
	return nil
}

type sustainedJSON struct {
	Sid    uint64      `json:"sid"`
	Inodes []store.Ino `json:"inodes"`
}

// resolveSubdir returns the inode of Options.Subdir.
func (d *dumper) resolveSubdir(ctx context.Context) (store.Ino, error) {
	ino := store.RootIno
	for _, name := range strings.Split(d.opts.Subdir, "/") {
		if name == "" || name == "." {
			continue
		}
		err := d.view(ctx, func(tx store.Tx) error {
			e, err := tx.Edge(ino, []byte(name))
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("subdirectory %q: %q not found", d.opts.Subdir, name)
			}
			if err != nil {
				return err
			}
			if e.Type != store.TypeDir {
				return fmt.Errorf("subdirectory %q: %q is not a directory", d.opts.Subdir, name)
			}
			ino = e.Ino
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	return ino, nil
}

// Jobs: the walk cuts the tree into jobs, each written in the order the
// walk made them; their records are fetched in that order in a
// consistent dump, and by several workers at once in a fast one.
const (
	jobDir   = iota // open a directory: its attributes, then "entries": {
	jobFiles        // a run of non-directory entries of one directory
	jobClose        // close the directory opened last
)

type job struct {
	kind  int
	level int // nesting of the entries written: the top directory is 1
	top   bool
	edges []store.Edge
	// fetched
	nodes    []*store.Node
	xattrs   [][]store.Xattr
	chunks   [][]store.Slice // per chunk key, in order of keys
	keys     []store.ChunkKey
	symlinks map[store.Ino][]byte
	err      error
	done     chan struct{}
}

// tree writes the tree of directory ino as the value of the current key.
func (d *dumper) tree(ctx context.Context, ino store.Ino, skipTrash bool) error {
	top := store.Edge{Ino: ino, Type: store.TypeDir}
	if d.tx != nil {
		emit := func(j *job) error {
			if err := d.fetch(d.tx, j); err != nil {
				return err
			}
			return d.write(j)
		}
		return d.walk(ctx, top, skipTrash, emit)
	}
	return d.parallel(ctx, top, skipTrash)
}

// parallel runs a fast dump's walk, its fetches on Threads workers and
// its writes in order.
func (d *dumper) parallel(ctx context.Context, top store.Edge, skipTrash bool) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan *job, d.opts.Threads*2)
	order := make(chan *job, d.opts.Threads*4)
	var wg sync.WaitGroup
	for range d.opts.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				if ctx.Err() == nil {
					j.err = d.st.View(ctx, func(tx store.Tx) error { return d.fetch(tx, j) })
				} else {
					j.err = context.Cause(ctx)
				}
				close(j.done)
			}
		}()
	}
	walkErr := make(chan error, 1)
	go func() {
		defer close(order)
		defer close(work)
		walkErr <- d.walk(ctx, top, skipTrash, func(j *job) error {
			j.done = make(chan struct{})
			select {
			case order <- j:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			if j.kind == jobClose {
				close(j.done)
				return nil
			}
			select {
			case work <- j:
			case <-ctx.Done():
				close(j.done)
				return context.Cause(ctx)
			}
			return nil
		})
	}()
	var err error
	for j := range order {
		if err != nil {
			continue // drain
		}
		<-j.done
		if err = j.err; err == nil {
			err = d.write(j)
		}
		if err != nil {
			cancel(err)
		}
	}
	wg.Wait()
	if werr := <-walkErr; err == nil {
		err = werr
	}
	return err
}

// walk visits the tree under top depth-first in name order and emits its
// jobs.
func (d *dumper) walk(ctx context.Context, top store.Edge, skipTrash bool, emit func(*job) error) error {
	if err := emit(&job{kind: jobDir, level: 1, top: true, edges: []store.Edge{top}}); err != nil {
		return err
	}
	if err := d.walkDir(ctx, top.Ino, 1, skipTrash, emit); err != nil {
		return err
	}
	return emit(&job{kind: jobClose, level: 1})
}

func (d *dumper) walkDir(ctx context.Context, dir store.Ino, level int, skipTrash bool, emit func(*job) error) error {
	var after []byte
	for {
		var edges []store.Edge
		err := d.view(ctx, func(tx store.Tx) error {
			var err error
			edges, err = tx.Edges(dir, after, batchSize)
			return err
		})
		if err != nil {
			return fmt.Errorf("list directory %d: %w", dir, err)
		}
		var run []store.Edge
		flush := func() error {
			if len(run) == 0 {
				return nil
			}
			j := &job{kind: jobFiles, level: level + 2, edges: run}
			run = nil
			return emit(j)
		}
		for _, e := range edges {
			if skipTrash && dir == store.RootIno && e.Ino == meta.TrashIno {
				continue
			}
			if e.Type != store.TypeDir {
				run = append(run, e)
				continue
			}
			if err := flush(); err != nil {
				return err
			}
			if err := emit(&job{kind: jobDir, level: level + 2, edges: []store.Edge{e}}); err != nil {
				return err
			}
			if err := d.walkDir(ctx, e.Ino, level+2, false, emit); err != nil {
				return err
			}
			if err := emit(&job{kind: jobClose, level: level + 2}); err != nil {
				return err
			}
		}
		if err := flush(); err != nil {
			return err
		}
		if len(edges) < batchSize {
			return nil
		}
		after = edges[len(edges)-1].Name
	}
}

// fetch reads the records of a job's entries: their nodes and extended
// attributes, then the chunks of the files and the targets of the
// symlinks.
func (d *dumper) fetch(tx store.Tx, j *job) error {
	if j.kind == jobClose {
		return nil
	}
	inos := make([]store.Ino, len(j.edges))
	for i, e := range j.edges {
		inos[i] = e.Ino
	}
	var err error
	if j.nodes, err = tx.Nodes(inos); err != nil {
		return fmt.Errorf("read nodes: %w", err)
	}
	if j.xattrs, err = store.ReadXattrs(tx, inos); err != nil {
		return fmt.Errorf("read extended attributes: %w", err)
	}
	var links []store.Ino
	j.keys = j.keys[:0]
	for _, n := range j.nodes {
		switch {
		case n == nil:
		case n.Type == store.TypeFile:
			if j.keys, err = appendChunkKeys(j.keys, tx, n.Ino, n.Length); err != nil {
				return fmt.Errorf("list chunks of inode %d: %w", n.Ino, err)
			}
		case n.Type == store.TypeSymlink:
			links = append(links, n.Ino)
		}
	}
	if len(j.keys) > 0 {
		if j.chunks, err = store.ReadChunks(tx, j.keys); err != nil {
			return fmt.Errorf("read chunks: %w", err)
		}
	}
	if len(links) > 0 {
		targets, err := store.ReadSymlinks(tx, links)
		if err != nil {
			return fmt.Errorf("read symlinks: %w", err)
		}
		j.symlinks = make(map[store.Ino][]byte, len(links))
		for i, ino := range links {
			j.symlinks[ino] = targets[i]
		}
	}
	return nil
}

// denseChunks is the most chunks a file may span for the dump to read
// every one of its chunk indexes in the job's batch; the chunks of a
// longer file, which is mostly holes when it is huge (a sparse file of
// petabytes spans hundreds of millions), are listed by the engine.
const denseChunks = 1024

// appendChunkKeys appends to keys those of the chunks of file ino, length
// bytes long, that the dump reads.
func appendChunkKeys(keys []store.ChunkKey, tx store.Tx, ino store.Ino, length uint64) ([]store.ChunkKey, error) {
	count := (min(length, meta.MaxFileSize) + meta.ChunkSize - 1) / meta.ChunkSize
	if count <= denseChunks {
		for idx := uint64(0); idx < count; idx++ {
			keys = append(keys, store.ChunkKey{Ino: ino, Idx: uint32(idx)})
		}
		return keys, nil
	}
	for from := uint32(0); ; {
		idxs, err := tx.ChunkIndexes(ino, from, denseChunks)
		if err != nil {
			return nil, err
		}
		for _, idx := range idxs {
			if uint64(idx) >= count {
				return keys, nil
			}
			keys = append(keys, store.ChunkKey{Ino: ino, Idx: idx})
		}
		if len(idxs) < denseChunks {
			return keys, nil
		}
		from = idxs[len(idxs)-1] + 1
	}
}

// write writes a fetched job.
func (d *dumper) write(j *job) error {
	o := d.out
	switch j.kind {
	case jobClose:
		o.closeDir(j.level)
		return nil
	case jobDir:
		n := j.nodes[0]
		e := j.edges[0]
		if n == nil {
			return fmt.Errorf("directory %q (inode %d) has no attributes: run sluice fsck", e.Name, e.Ino)
		}
		if n.Type != store.TypeDir {
			return fmt.Errorf("entry %q says directory but inode %d is a %s: run sluice fsck", e.Name, e.Ino, typeNames[n.Type])
		}
		if !j.top {
			o.key(j.level, e.Name)
		}
		if err := d.entryBody(j, 0, true); err != nil {
			return err
		}
		o.openEntries(j.level)
		d.stats.Dirs++
		d.count()
		return nil
	}
	ci := 0
	for i, e := range j.edges {
		n := j.nodes[i]
		if n == nil {
			d.stats.Skipped++
			continue
		}
		if n.Type == store.TypeDir {
			return fmt.Errorf("entry %q says %s but inode %d is a directory: run sluice fsck", e.Name, typeNames[e.Type], e.Ino)
		}
		o.key(j.level, e.Name)
		if err := d.entryBody(j, i, false); err != nil {
			return err
		}
		if n.Type == store.TypeFile {
			var chunks []store.ChunkKey
			start := ci
			for ci < len(j.keys) && j.keys[ci].Ino == n.Ino {
				chunks = append(chunks, j.keys[ci])
				ci++
			}
			o.chunks(j.level, chunks, j.chunks[start:ci])
		}
		o.endEntry(j.level)
		switch n.Type {
		case store.TypeFile:
			d.stats.Files++
		case store.TypeSymlink:
			d.stats.Symlinks++
		default:
			d.stats.Others++
		}
		d.count()
	}
	return nil
}

func (d *dumper) count() {
	d.stats.Entries++
	if d.stats.Entries%4096 == 0 {
		d.out.report()
	}
}

// entryBody writes an entry's opening brace and its fields before chunks
// and entries: attr, symlink, xattrs and ACLs.
func (d *dumper) entryBody(j *job, i int, dir bool) error {
	o := d.out
	n := j.nodes[i]
	ind := indent(j.level + 1)
	b := o.buf[:0]
	b = append(b, "{\n"...)
	b = append(b, ind...)
	b = append(b, `"attr": `...)
	b = appendAttr(b, n)
	if n.Type == store.TypeSymlink {
		t := j.symlinks[n.Ino]
		b = append(b, ",\n"...)
		b = append(b, ind...)
		b = append(b, `"symlink": "`...)
		b = appendEscaped(b, t)
		b = append(b, '"')
	}
	var acls [2][]byte
	first := true
	for _, x := range j.xattrs[i] {
		switch x.Name {
		case meta.XattrACLAccess:
			acls[0] = x.Value
			continue
		case meta.XattrACLDefault:
			acls[1] = x.Value
			continue
		}
		if first {
			b = append(b, ",\n"...)
			b = append(b, ind...)
			b = append(b, `"xattrs": [`...)
		} else {
			b = append(b, ',')
		}
		first = false
		b = append(b, `{"name":`...)
		nb, _ := json.Marshal(x.Name)
		b = append(b, nb...)
		b = append(b, `,"value":"`...)
		b = appendEscaped(b, x.Value)
		b = append(b, `"}`...)
	}
	if !first {
		b = append(b, ']')
	}
	for k, name := range []string{"posix_acl_access", "posix_acl_default"} {
		if acls[k] == nil {
			continue
		}
		a, err := aclFromXattr(acls[k])
		if err != nil {
			return fmt.Errorf("inode %d: %s: %w", n.Ino, name, err)
		}
		b = append(b, ",\n"...)
		b = append(b, ind...)
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `": `...)
		b = appendACL(b, a)
	}
	o.buf = b
	o.write(b)
	return nil
}

// indent returns the indentation of a line at level.
func indent(level int) string {
	const spaces = "                                                                "
	if 2*level <= len(spaces) {
		return spaces[:2*level]
	}
	return strings.Repeat(" ", 2*level)
}

// output writes the JSON text, counting bytes and tracking the commas
// between the entries of each open directory.
type output struct {
	w        *bufio.Writer
	n        int64
	err      error
	buf      []byte
	first    []bool // per open directory: no entry written yet
	progress func(Progress)
	entries  *int64
}

func newOutput(w io.Writer, progress func(Progress)) *output {
	return &output{w: bufio.NewWriterSize(w, 1<<20), progress: progress, buf: make([]byte, 0, 4096)}
}

func (o *output) write(b []byte) {
	if o.err != nil {
		return
	}
	n, err := o.w.Write(b)
	o.n += int64(n)
	if err != nil {
		o.err = fmt.Errorf("write dump: %w", err)
	}
}

func (o *output) raw(s string) {
	if o.err != nil {
		return
	}
	n, err := o.w.WriteString(s)
	o.n += int64(n)
	if err != nil {
		o.err = fmt.Errorf("write dump: %w", err)
	}
}

func (o *output) flush() error {
	if o.err == nil {
		if err := o.w.Flush(); err != nil {
			o.err = fmt.Errorf("write dump: %w", err)
		}
	}
	return o.err
}

func (o *output) report() {
	if o.progress != nil && o.entries != nil {
		o.progress(Progress{Entries: *o.entries, Bytes: o.n})
	}
}

// key starts an entry of the directory open at level-1: the comma after
// its previous sibling, the indentation and the escaped name.
func (o *output) key(level int, name []byte) {
	b := o.buf[:0]
	if k := len(o.first) - 1; k >= 0 {
		if !o.first[k] {
			b = append(b, ',')
		}
		o.first[k] = false
	}
	b = append(b, '\n')
	b = append(b, indent(level)...)
	b = append(b, '"')
	b = appendEscaped(b, name)
	b = append(b, `": `...)
	o.buf = b
	o.write(b)
}

// openEntries ends a directory's fields with its "entries" object, left
// open.
func (o *output) openEntries(level int) {
	o.raw(",\n" + indent(level+1) + `"entries": {`)
	o.first = append(o.first, true)
}

// closeDir closes the entries of the directory open at level and the
// directory's entry.
func (o *output) closeDir(level int) {
	k := len(o.first) - 1
	empty := o.first[k]
	o.first = o.first[:k]
	if empty {
		o.raw("}\n" + indent(level) + "}")
		return
	}
	o.raw("\n" + indent(level+1) + "}\n" + indent(level) + "}")
}

// chunks writes a file's chunks: one line for one chunk, one line each
// for several.
func (o *output) chunks(level int, keys []store.ChunkKey, lists [][]store.Slice) {
	var b []byte
	b = append(o.buf[:0], ",\n"...)
	b = append(b, indent(level+1)...)
	b = append(b, `"chunks": [`...)
	written := 0
	for i, k := range keys {
		if len(lists[i]) == 0 {
			continue
		}
		if written > 0 {
			b = append(b, ',')
		}
		if len(keys) > 1 {
			b = append(b, '\n')
			b = append(b, indent(level+2)...)
		}
		written++
		b = append(b, `{"index":`...)
		b = strconv.AppendUint(b, uint64(k.Idx), 10)
		b = append(b, `,"slices":[`...)
		for si, s := range lists[i] {
			if si > 0 {
				b = append(b, ',')
			}
			b = appendSlice(b, s)
		}
		b = append(b, "]}"...)
	}
	if written == 0 {
		o.buf = b
		return // no data: no chunks field
	}
	if len(keys) > 1 {
		b = append(b, '\n')
		b = append(b, indent(level+1)...)
	}
	b = append(b, ']')
	o.buf = b
	o.write(b)
}

// endEntry closes a non-directory entry.
func (o *output) endEntry(level int) {
	o.raw("\n" + indent(level) + "}")
}
