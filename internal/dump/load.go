package dump

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	jsoniter "github.com/json-iterator/go"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// LoadOptions tune Load.
type LoadOptions struct {
	// Threads is how many batches of records are written at once.
	// Default 4.
	Threads int
	// Progress, when set, is called from time to time, and once at the
	// end, with what has been read.
	Progress func(Progress)
}

// Report describes a finished load.
type Report struct {
	Name string // the volume's name
	// Dumped are the counters the dump states; Loaded those recomputed
	// from its tree and stored.
	Dumped, Loaded Counters
	Entries        int64 // names read (a hard-linked file once per name)
	Dirs           int64
	Files          int64
	Symlinks       int64
	Others         int64
	HardLinks      int64 // names beyond the first of an inode
	Slices         int64 // slice references
	Bytes          int64 // bytes of JSON read
	// Dropped lists what the dump held that Sluice does not keep, with
	// counts.
	Dropped []string
	// Notes lists changes made on the way (secrets removed, an
	// interrupted load wiped first).
	Notes []string
}

// bulkRecords is how many records one bulk write carries.
const bulkRecords = 4096

// Load reads a dump from r into st, which must hold no volume. It decodes
// the stream as it arrives and writes in batches, several at once; what it
// keeps per inode is a few bits (the type of each inode seen, each slice
// seen) and an entry per hard-linked inode and per shared slice. It
// recomputes link counts, usage, the next ids and slice reference counts
// instead of trusting the dump's. The volume's settings are written last,
// in the transaction that ends the load: until then the store holds no
// volume, and a load that fails removes what it wrote (a load that was
// killed is removed by the next one).
func Load(ctx context.Context, st store.Store, r io.Reader, opts LoadOptions) (*Report, error) {
	if opts.Threads <= 0 {
		opts.Threads = 4
	}
	rep := &Report{}
	wiped, err := prepare(ctx, st)
	if err != nil {
		return nil, err
	}
	if wiped {
		rep.Notes = append(rep.Notes, "removed the records of an earlier load that did not finish")
	}
	l := newLoader(ctx, st, opts, rep)
	cr := &countingReader{r: r}
	l.in = cr
	err = l.run(cr)
	if err == nil {
		err = l.finish()
	}
	if err != nil {
		l.stop()
		if werr := wipe(context.WithoutCancel(ctx), st); werr != nil {
			return nil, fmt.Errorf("%w (and removing what was loaded failed too: %v; run the load again to retry, it removes the leftovers first)", err, werr) //lint:nowrap the load's error is the cause; the cleanup's is only reported
		}
		return nil, fmt.Errorf("%w (nothing was loaded: the metadata engine is empty again)", err)
	}
	rep.Bytes = cr.n
	if opts.Progress != nil {
		opts.Progress(Progress{Entries: rep.Entries, Bytes: cr.n})
	}
	return rep, nil
}

// countingReader counts the bytes read.
type countingReader struct {
	r   io.Reader
	n   int64
	eof bool // the input has ended
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err == io.EOF {
		c.eof = true
	}
	return n, err
}

// truncated reports whether a JSON error came from the input's end: the
// parser met the end (it reads it as a NUL) after the input ended.
func (c *countingReader) truncated(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		c.eof && strings.Contains(err.Error(), "\x00")
}

// link is what a hard-linked inode needs for its link count and parent.
type link struct {
	count  uint32
	parent store.Ino // of the names after the first; 0 when they differ
}

// openDir is a directory whose entries are being read.
type openDir struct {
	node    store.Node
	subdirs uint32
	xattrs  []store.Xattr
}

type sliceKey struct {
	id   uint64
	size uint32
}

type loader struct {
	ctx  context.Context
	st   store.Store
	opts LoadOptions
	rep  *Report
	in   *countingReader
	err  error

	// writes
	bulk   *store.Bulk
	send   chan *store.Bulk
	free   chan *store.Bulk
	wg     sync.WaitGroup
	werr   chan error
	cancel context.CancelFunc
	wctx   context.Context
	closed bool

	// what recomputing needs
	types    inoTypes
	links    map[store.Ino]*link
	slices   idSet
	extra    map[sliceKey]int64
	space    int64
	inodes   int64
	maxIno   store.Ino
	maxSlice uint64

	// where the reader is
	path     []string
	stack    []*openDir
	root     *store.Node
	hasTrash bool
	haveTree bool
	format   *meta.Format
	dropped  map[string]int64
}

func newLoader(ctx context.Context, st store.Store, opts LoadOptions, rep *Report) *loader {
	l := &loader{ctx: ctx, st: st, opts: opts, rep: rep, links: map[store.Ino]*link{},
		extra: map[sliceKey]int64{}, dropped: map[string]int64{}}
	l.wctx, l.cancel = context.WithCancel(ctx)
	l.send = make(chan *store.Bulk, opts.Threads)
	l.free = make(chan *store.Bulk, opts.Threads+2)
	l.werr = make(chan error, opts.Threads)
	for range opts.Threads + 2 {
		l.free <- &store.Bulk{}
	}
	l.bulk = <-l.free
	for range opts.Threads {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for b := range l.send {
				if l.wctx.Err() == nil {
					if err := store.WriteBulk(l.wctx, l.st, b); err != nil {
						select {
						case l.werr <- fmt.Errorf("write records: %w", err):
						default:
						}
						l.cancel()
					}
				}
				b.Reset()
				l.free <- b
			}
		}()
	}
	return l
}

// flushBulk hands the current batch to a writer.
func (l *loader) flushBulk() {
	if l.bulk.Len() == 0 {
		return
	}
	select {
	case l.send <- l.bulk:
	case <-l.wctx.Done():
		l.fail(l.writeErr())
		return
	}
	select {
	case l.bulk = <-l.free:
	case <-l.wctx.Done():
		l.bulk = &store.Bulk{}
		l.fail(l.writeErr())
	}
}

func (l *loader) writeErr() error {
	select {
	case err := <-l.werr:
		return err
	default:
	}
	if err := l.ctx.Err(); err != nil {
		return err
	}
	return errors.New("write records: stopped")
}

// added is called after each record added to the batch.
func (l *loader) added() {
	if l.bulk.Len() >= bulkRecords {
		l.flushBulk()
	}
}

// drain waits for every batch to be written.
func (l *loader) drain() error {
	if l.closed {
		return nil
	}
	l.closed = true
	close(l.send)
	l.wg.Wait()
	select {
	case err := <-l.werr:
		return err
	default:
	}
	return l.ctx.Err()
}

// stop abandons the writes.
func (l *loader) stop() {
	l.cancel()
	if !l.closed {
		l.closed = true
		close(l.send)
		l.wg.Wait()
	}
}

func (l *loader) fail(err error) {
	if l.err == nil && err != nil {
		l.err = err
	}
}

// where names the current position for an error message.
func (l *loader) where() string {
	p := "/" + strings.Join(l.path, "/")
	return fmt.Sprintf("at %s (near byte %d)", p, l.in.n)
}

// failf records a malformed-input error at the current position.
func (l *loader) failf(format string, args ...any) {
	l.fail(fmt.Errorf("bad dump %s: %s", l.where(), fmt.Sprintf(format, args...)))
}

// iterErr turns a JSON error into a positioned one.
func (l *loader) iterErr(it *jsoniter.Iterator, what string) bool {
	if it.Error == nil {
		return false
	}
	if l.in.truncated(it.Error) {
		l.failf("%s: the dump ends too early (truncated?)", what)
	} else {
		l.failf("%s: %v", what, it.Error)
	}
	return true
}

func (l *loader) ok(it *jsoniter.Iterator) bool { return l.err == nil && it.Error == nil }

var jsonAPI = jsoniter.Config{UseNumber: true}.Froze()

// run reads the whole dump.
func (l *loader) run(r io.Reader) error {
	it := jsoniter.Parse(jsonAPI, r, 256<<10)
	if it.WhatIsNext() != jsoniter.ObjectValue {
		if !l.iterErr(it, "top level") {
			l.failf("not a dump: it does not start with a JSON object")
		}
		return l.err
	}
	var dumped Counters
	it.ReadObjectCB(func(it *jsoniter.Iterator, key string) bool {
		switch key {
		case "Setting":
			raw := it.SkipAndReturnBytes()
			if l.iterErr(it, "Setting") {
				return false
			}
			l.setting(raw)
		case "Counters":
			raw := it.SkipAndReturnBytes()
			if l.iterErr(it, "Counters") {
				return false
			}
			dumped = readCounters(raw)
			l.rep.Dumped = dumped
		case "Sustained", "DelFiles", "Quotas", "UserQuotas", "GroupQuotas", "DirQuotas":
			n := skipCount(it)
			if l.iterErr(it, key) {
				return false
			}
			if n > 0 {
				l.dropped[droppedWhy[key]] += int64(n)
			}
		case "FSTree":
			if l.haveTree {
				l.failf("two FSTree keys")
				return false
			}
			l.haveTree = true
			l.path = l.path[:0]
			l.entry(it, nil, 0, topTree)
		case "Trash":
			l.path = append(l.path[:0], ".trash")
			l.entry(it, []byte(meta.TrashName), 0, topTrash)
			l.path = l.path[:0]
		default:
			it.Skip()
			if l.iterErr(it, key) {
				return false
			}
			l.dropped["unknown top-level key "+key]++
		}
		return l.ok(it)
	})
	if l.err == nil {
		l.iterErr(it, "top level")
	}
	if l.err == nil {
		// Only the input's end may follow: skipping a value there fails
		// on the NUL (0) the parser reads at the end.
		it.Skip()
		if it.Error == nil || !l.in.eof || !strings.Contains(it.Error.Error(), "skip: 0,") {
			l.failf("unexpected data after the dump's object")
		}
		it.Error = nil
	}
	if l.err != nil {
		return l.err
	}
	if !l.haveTree {
		return errors.New("bad dump: no FSTree (is this a metadata dump?)")
	}
	if l.format == nil {
		return errors.New("bad dump: no Setting (the volume's settings)")
	}
	return nil
}

// droppedWhy says why the load does not carry over what a top-level key
// holds.
var droppedWhy = map[string]string{
	"Sustained":   "files kept open after unlink (Sustained): their sessions do not move with the volume",
	"DelFiles":    "files waiting for data deletion (DelFiles): run sluice gc --delete to reclaim their objects",
	"Quotas":      "Quotas (Sluice has no quotas yet)",
	"UserQuotas":  "UserQuotas (Sluice has no quotas yet)",
	"GroupQuotas": "GroupQuotas (Sluice has no quotas yet)",
	"DirQuotas":   "DirQuotas (Sluice has no quotas yet)",
}

// skipCount skips an array or object and returns how many elements or
// members it had.
func skipCount(it *jsoniter.Iterator) int {
	n := 0
	if it.WhatIsNext() == jsoniter.ObjectValue {
		it.ReadMapCB(func(it *jsoniter.Iterator, _ string) bool {
			n++
			it.Skip()
			return true
		})
		return n
	}
	it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
		n++
		it.Skip()
		return true
	})
	return n
}

// readCounters reads the Counters object, accepting the names of every
// JuiceFS 1.x version.
func readCounters(raw []byte) Counters {
	var m map[string]json.Number
	var c Counters
	if json.Unmarshal(raw, &m) != nil {
		return c
	}
	get := func(names ...string) int64 {
		for _, n := range names {
			if v, ok := m[n]; ok {
				i, _ := v.Int64()
				return i
			}
		}
		return 0
	}
	c.UsedSpace = get("usedSpace")
	c.UsedInodes = get("usedInodes")
	c.NextInode = get("nextInodes", "nextInode")
	c.NextChunk = get("nextChunk")
	c.NextSession = get("nextSession")
	c.NextTrash = get("nextTrash")
	c.NextCleanupSlices = get("nextCleanupSlices")
	c.LastChangelog = get("lastChangelog")
	return c
}

// setting reads the volume's settings and checks them before anything is
// written.
func (l *loader) setting(raw []byte) {
	var f meta.Format
	if err := json.Unmarshal(raw, &f); err != nil {
		l.fail(fmt.Errorf("bad dump: Setting: %w", err))
		return
	}
	var all map[string]json.RawMessage
	_ = json.Unmarshal(raw, &all)
	knownKeys := map[string]bool{}
	for _, fld := range reflect.VisibleFields(reflect.TypeFor[meta.Format]()) {
		knownKeys[fld.Name] = true
	}
	var unknown []string
	for k, v := range all {
		if _, ok := knownKeys[k]; ok {
			continue
		}
		if s := string(v); s == "0" || s == "false" || s == `""` || s == "null" || s == "[]" || s == "{}" {
			continue // an unset option
		}
		unknown = append(unknown, k)
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		l.dropped["setting "+k+"="+string(all[k])]++
	}
	for _, p := range []*string{&f.SecretKey, &f.SessionToken} {
		if *p == "removed" {
			*p = ""
			l.rep.Notes = append(l.rep.Notes, "the dump has no object storage secret (written as \"removed\"): give it at mount (--secret-key or the environment), or dump with --keep-secret-key")
		}
	}
	if err := unsealSecrets(&f); err != nil {
		l.fail(fmt.Errorf("bad dump: %w", err))
		return
	}
	if f.BlockSize == 0 {
		f.BlockSize = 4096
	}
	if f.MetaVersion > meta.MetaVersion {
		l.fail(fmt.Errorf("bad dump: Setting: metadata version %d is newer than this build knows (%d): upgrade sluice", f.MetaVersion, meta.MetaVersion))
		return
	}
	f.MetaVersion = meta.MetaVersion
	if err := f.Validate(); err != nil {
		l.fail(fmt.Errorf("bad dump: Setting: %w", err))
		return
	}
	l.format = &f
	l.rep.Name = f.Name
}

// finish writes what needed the whole dump: link counts of hard-linked
// inodes, slice reference counts, the root, then counters and settings.
func (l *loader) finish() error {
	for k, extra := range l.extra {
		l.bulk.SliceRefs = append(l.bulk.SliceRefs, store.SliceRefRecord{Id: k.id, Size: k.size, Extra: extra})
		l.added()
	}
	l.flushBulk()
	if err := l.drain(); err != nil {
		return err
	}
	if l.err != nil {
		return l.err
	}
	if err := l.fixLinks(); err != nil {
		return err
	}
	if err := store.AnalyzeAfterBulk(l.ctx, l.st); err != nil {
		return err
	}
	root := l.root
	if root == nil {
		return errors.New("bad dump: FSTree has no root directory")
	}
	if l.hasTrash {
		root.Nlink++
	}
	c := Counters{
		UsedSpace:   l.space,
		UsedInodes:  l.inodes,
		NextInode:   max(l.rep.Dumped.NextInode, int64(l.maxIno)+1, 2),
		NextChunk:   max(l.rep.Dumped.NextChunk, int64(l.maxSlice)+1, 1),
		NextSession: max(l.rep.Dumped.NextSession, 1),
	}
	setting, err := json.Marshal(l.format)
	if err != nil {
		return fmt.Errorf("encode settings: %w", err)
	}
	err = l.st.Update(l.ctx, func(tx store.Tx) error {
		if _, err := tx.Setting(); err == nil {
			return errors.New("a volume was formatted in the metadata engine while the load ran")
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		tx.SetNode(root)
		tx.SetCounter(meta.CounterUsedSpace, c.UsedSpace)
		tx.SetCounter(meta.CounterUsedInodes, c.UsedInodes)
		tx.SetCounter(meta.CounterNextInode, c.NextInode)
		tx.SetCounter(meta.CounterNextSlice, c.NextChunk)
		tx.SetCounter(meta.CounterNextSession, c.NextSession)
		tx.SetCounter(counterLoading, 0)
		tx.SetSetting(setting)
		return nil
	})
	if err != nil {
		return fmt.Errorf("write counters and settings: %w", err)
	}
	l.rep.Loaded = c
	for what, n := range l.dropped {
		l.rep.Dropped = append(l.rep.Dropped, fmt.Sprintf("%s: %d", what, n))
	}
	sort.Strings(l.rep.Dropped)
	return nil
}

// fixLinks sets the link count and parent of every hard-linked inode,
// which were written as a single name's.
func (l *loader) fixLinks() error {
	inos := make([]store.Ino, 0, len(l.links))
	for ino := range l.links {
		inos = append(inos, ino)
	}
	sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] })
	per := 500
	if m := store.LimitsOf(l.st).MaxTxnOps; m > 0 {
		per = max(1, m/2)
	}
	for len(inos) > 0 {
		part := inos[:min(per, len(inos))]
		inos = inos[len(part):]
		err := l.st.Update(l.ctx, func(tx store.Tx) error {
			nodes, err := tx.Nodes(part)
			if err != nil {
				return err
			}
			for i, n := range nodes {
				if n == nil {
					return fmt.Errorf("inode %d vanished during the load", part[i])
				}
				lk := l.links[part[i]]
				n.Nlink = lk.count
				if lk.parent != n.Parent {
					n.Parent = 0
				}
				tx.SetNode(n)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("set link counts: %w", err)
		}
	}
	return nil
}

// trashHourIno returns the inode Sluice gives the trash directory of an
// hour named YYYY-MM-DD-HH.
func trashHourIno(name []byte) (store.Ino, bool) {
	t, err := time.Parse("2006-01-02-15", string(name))
	if err != nil {
		return 0, false
	}
	return meta.TrashHourIno(t), true
}
