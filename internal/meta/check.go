package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Whole-volume checks for `sluice fsck` and `sluice gc`.
//
// A full check pages through every inode record (store.Tx.ScanInodes), one
// short View per page, so it works on a volume in use; but then a file
// changed between two pages may look damaged for a moment. Damage an inode
// shows on its own (a bad slice, a chunk past the end, a missing symlink
// target) is therefore confirmed by reading that inode again in one
// transaction before it is reported. Link counts depend on many records;
// run fsck on an idle volume to trust those.
//
// Memory: besides a bounded page, the check keeps a few dozen bytes per
// inode (link counts) and per slice (reference counts), the way gc must
// keep the set of referenced slices to compare the bucket with.

// scanPage is the number of records a scan reads per transaction.
const scanPage = 1000

// internalInoBase starts the inode numbers of internal nodes (trash,
// virtual files), which are linked by rules of their own.
const internalInoBase Ino = 0x7FFFFFFF00000000

// SliceKey names a stored slice: its blocks' keys follow from both.
type SliceKey struct {
	Id   uint64
	Size uint32
}

// SliceUse says how often a slice is named by chunk records, and where
// first.
type SliceUse struct {
	Refs int64
	Ino  Ino
	Idx  uint32
}

// Damage is one problem a check found.
type Damage struct {
	Ino Ino // the inode concerned, 0 for records of no inode
	Msg string
}

// String formats d as one report line.
func (d Damage) String() string {
	if d.Ino == 0 {
		return d.Msg
	}
	return fmt.Sprintf("inode %d: %s", d.Ino, d.Msg)
}

// CheckOptions tune Check.
type CheckOptions struct {
	// Path limits the check to the subtree at this path (from the root);
	// empty checks the whole volume.
	Path string
	// OnDamage receives each problem as it is found. Required.
	OnDamage func(Damage)
	// Progress, when set, is told the number of inodes checked so far,
	// now and then.
	Progress func(inodes int64)
}

// CheckResult summarizes a check.
type CheckResult struct {
	Inodes  int64 // inodes checked
	Damages int64 // problems reported
	// Slices holds every slice named by the chunks checked, for the
	// caller to check their blocks.
	Slices map[SliceKey]SliceUse
}

// ReferencedSlices returns every slice that a chunk record of the volume in
// st names: those of linked files, of files in the trash, of files
// unlinked while open, and of deleted files whose data waits in the
// deletion queue. Progress, when set, is told the records scanned so far.
func ReferencedSlices(ctx context.Context, st store.Store, progress func(records int64)) (map[SliceKey]SliceUse, error) {
	out := map[SliceKey]SliceUse{}
	var n int64
	err := scanInodes(ctx, st, func(r store.InodeRecord) error {
		n++
		if r.Chunk != nil {
			addUses(out, r.Ino, r.Chunk)
		}
		return nil
	}, func() {
		if progress != nil {
			progress(n)
		}
	})
	return out, err
}

func addUses(m map[SliceKey]SliceUse, ino Ino, c *store.ChunkRecord) {
	for _, s := range c.Slices {
		if s.Id == 0 {
			continue
		}
		k := SliceKey{s.Id, s.Size}
		u, ok := m[k]
		if !ok {
			u.Ino, u.Idx = ino, c.Idx
		}
		u.Refs++
		m[k] = u
	}
}

// PendingSlices returns the slices queued for block deletion.
func PendingSlices(ctx context.Context, st store.Store) ([]Slice, error) {
	var out []Slice
	err := scanPages(ctx, st, store.Tx.ScanDelSlices, func(page []Slice) error {
		out = append(out, page...)
		return nil
	})
	return out, err
}

// PendingFiles returns the deleted files whose data is still queued for
// deletion.
func PendingFiles(ctx context.Context, st store.Store) ([]store.DelFile, error) {
	var out []store.DelFile
	err := scanPages(ctx, st, store.Tx.ScanDelFiles, func(page []store.DelFile) error {
		out = append(out, page...)
		return nil
	})
	return out, err
}

// scanPages pages through one scan of the store, one View per page of
// scanPage records, and hands each page to fn.
func scanPages[T any](ctx context.Context, st store.Store, scan func(tx store.Tx, cursor []byte, limit int) ([]T, []byte, error), fn func(page []T) error) error {
	var cursor []byte
	for {
		var page []T
		err := st.View(ctx, func(tx store.Tx) error {
			var err error
			page, cursor, err = scan(tx, cursor, scanPage)
			return err
		})
		if err != nil {
			return err
		}
		if err := fn(page); err != nil {
			return err
		}
		if cursor == nil {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// scanInodes calls fn for every inode record, one View per page, and
// pageDone after each page.
func scanInodes(ctx context.Context, st store.Store, fn func(store.InodeRecord) error, pageDone func()) error {
	return scanPages(ctx, st, store.Tx.ScanInodes, func(page []store.InodeRecord) error {
		for _, r := range page {
			if err := fn(r); err != nil {
				return err
			}
		}
		pageDone()
		return nil
	})
}

// Check checks the metadata of the volume in st and reports each problem
// to opts.OnDamage: entries naming missing inodes or giving the wrong type,
// link counts that differ from the entries (directories: 2 plus their
// subdirectories), wrong parent pointers, inodes no entry names that no
// session holds open, chunk records of missing inodes, slices out of
// range, data past the end of a file, records that do not decode, and
// reference counts that differ from the chunks. With opts.Path only that
// subtree is checked, and link counts only of its directories.
func Check(ctx context.Context, st store.Store, opts CheckOptions) (*CheckResult, error) {
	if opts.OnDamage == nil {
		return nil, errors.New("check: OnDamage is required")
	}
	res := &CheckResult{Slices: map[SliceKey]SliceUse{}}
	report := func(d Damage) {
		res.Damages++
		opts.OnDamage(d)
	}
	progress := func() {
		if opts.Progress != nil {
			opts.Progress(res.Inodes)
		}
	}
	if p := strings.Trim(opts.Path, "/"); p != "" {
		root, typ, err := LookupPath(ctx, st, p)
		if err != nil {
			return nil, err
		}
		err = checkTree(ctx, st, root, typ, res, report, progress)
		return res, err
	}
	c := &checker{st: st, res: res, report: report, inodes: map[Ino]inodeState{}}
	if err := c.run(ctx, progress); err != nil {
		return nil, err
	}
	return res, nil
}

// LookupPath finds the inode at p, a slash-separated path from the root,
// and the type its entry gives, without permission checks (for
// administration commands).
func LookupPath(ctx context.Context, st store.Store, p string) (Ino, uint8, error) {
	ino, typ := RootIno, store.TypeDir
	err := st.View(ctx, func(tx store.Tx) error {
		ino, typ = RootIno, store.TypeDir
		for _, name := range strings.Split(p, "/") {
			if name == "" || name == "." {
				continue
			}
			if typ != store.TypeDir {
				return fmt.Errorf("resolve %s: %s is not a directory: %w", p, name, syscall.ENOTDIR)
			}
			e, err := edge(tx, ino, []byte(name))
			if err != nil {
				return fmt.Errorf("resolve %s: %w", p, err)
			}
			ino, typ = e.Ino, e.Type
		}
		return nil
	})
	return ino, typ, err
}

// inodeState is what a full check remembers of one inode until the end.
// Scans need not list records in order (redis lists its keyspace), so
// everything is gathered first and judged at the end.
type inodeState struct {
	typ        uint8 // from the attributes; 0 when none were found
	flags      uint8 // has* bits
	truncating bool  // chunks past the length wait to be dropped
	edgeType   uint8 // type the first entry naming it gives
	nlink      uint32
	links      uint32 // entries naming the inode
	subdirs    uint32 // entries of the directory naming directories
	lastData   uint32 // 1 + index of the last chunk holding data; 0 for none
	parent     Ino
	edgeParent Ino // directory of the first entry naming it
	length     uint64
}

const (
	hasChunks     = 1 << iota // chunk records
	hasSymlink                // a symlink target record
	hasEntries                // directory entries of its own
	hasBadSlice               // a slice out of range
	hasBadEdgeTyp             // entries disagree about its type
)

// checker is the state of one full check.
type checker struct {
	st     store.Store
	res    *CheckResult
	report func(Damage)
	inodes map[Ino]inodeState
	// deleted and sustained hold inodes whose data is legitimately kept
	// without a name: queued for deletion, or open after unlink.
	deleted, sustained map[Ino]bool
	suspects           []Ino // inodes to read again in one transaction
}

func (c *checker) run(ctx context.Context, progress func()) error {
	if err := c.loadKept(ctx); err != nil {
		return err
	}
	if err := scanInodes(ctx, c.st, c.record, progress); err != nil {
		return err
	}
	c.judge()
	if err := c.checkRefs(ctx); err != nil {
		return err
	}
	return c.confirmSuspects(ctx)
}

// loadKept reads the deletion queue and the inodes sessions hold open.
func (c *checker) loadKept(ctx context.Context) error {
	files, err := PendingFiles(ctx, c.st)
	if err != nil {
		return err
	}
	c.deleted = map[Ino]bool{}
	for _, f := range files {
		c.deleted[f.Ino] = true
	}
	c.sustained = map[Ino]bool{}
	return c.st.View(ctx, func(tx store.Tx) error {
		clear(c.sustained)
		ss, err := tx.Sessions()
		if err != nil {
			return err
		}
		for _, s := range append(ss, store.Session{Sid: orphanSid}) {
			inos, err := tx.Sustained(s.Sid)
			if err != nil {
				return err
			}
			for _, ino := range inos {
				c.sustained[ino] = true
			}
		}
		return nil
	})
}

// record takes one scanned record.
func (c *checker) record(r store.InodeRecord) error {
	if r.Err != nil {
		c.report(Damage{Ino: r.Ino, Msg: "broken record: " + r.Err.Error()})
		return nil
	}
	if r.Edge != nil {
		c.edge(r.Ino, r.Edge)
		return nil
	}
	st := c.inodes[r.Ino]
	switch {
	case r.Node != nil:
		if st.typ == 0 {
			c.res.Inodes++
		}
		st.typ, st.nlink, st.parent, st.length = r.Node.Type, r.Node.Nlink, r.Node.Parent, r.Node.Length
		st.truncating = r.Node.Flags&flagTruncating != 0
	case r.Chunk != nil:
		st.flags |= hasChunks
		addUses(c.res.Slices, r.Ino, r.Chunk)
		if len(chunkDamage(r.Chunk)) > 0 {
			st.flags |= hasBadSlice
		}
		if hasData(r.Chunk.Slices) {
			st.lastData = max(st.lastData, r.Chunk.Idx+1)
		}
	case r.Symlink != nil:
		st.flags |= hasSymlink
	}
	c.inodes[r.Ino] = st
	return nil
}

// edge counts an entry of directory parent.
func (c *checker) edge(parent Ino, e *store.Edge) {
	p := c.inodes[parent]
	p.flags |= hasEntries
	if e.Type == store.TypeDir {
		p.subdirs++
	}
	c.inodes[parent] = p
	if e.Ino == 0 {
		c.report(Damage{Ino: parent, Msg: fmt.Sprintf("entry %q names inode 0", e.Name)})
		return
	}
	st := c.inodes[e.Ino]
	if st.links == 0 {
		st.edgeParent, st.edgeType = parent, e.Type
	} else if st.edgeType != e.Type {
		st.flags |= hasBadEdgeTyp
	}
	st.links++
	c.inodes[e.Ino] = st
}

// judge checks what the scan gathered: each inode's own records (suspects
// are confirmed later) and link counts against the entries counted.
func (c *checker) judge() {
	for ino, st := range c.inodes {
		if st.typ == 0 {
			c.judgeMissing(ino, st)
			continue
		}
		lastData := uint64(st.lastData)
		if st.flags&hasBadSlice != 0 ||
			(st.typ == store.TypeSymlink) != (st.flags&hasSymlink != 0) ||
			(st.typ != store.TypeFile && st.flags&hasChunks != 0) ||
			(st.typ == store.TypeFile && !st.truncating && lastData > 0 && (lastData-1)*ChunkSize >= st.length) {
			c.suspects = append(c.suspects, ino)
		}
		if ino >= internalInoBase {
			continue
		}
		if st.links > 0 && (st.flags&hasBadEdgeTyp != 0 || st.edgeType != st.typ) {
			c.report(Damage{Ino: ino, Msg: fmt.Sprintf("entry in directory %d gives type %d, the inode has type %d", st.edgeParent, st.edgeType, st.typ)})
		}
		if st.typ == store.TypeDir {
			c.checkDirLinks(ino, st)
			continue
		}
		if st.links == 0 {
			if !c.sustained[ino] {
				c.report(Damage{Ino: ino, Msg: fmt.Sprintf("no entry names it (link count %d) and no session holds it open", st.nlink)})
			}
			continue
		}
		if st.nlink != st.links {
			c.report(Damage{Ino: ino, Msg: fmt.Sprintf("link count %d, but %d entries name it", st.nlink, st.links)})
		} else if st.links == 1 && st.parent != 0 && st.parent != st.edgeParent {
			c.report(Damage{Ino: ino, Msg: fmt.Sprintf("parent is %d, but its entry is in directory %d", st.parent, st.edgeParent)})
		}
	}
}

// judgeMissing checks the records of an inode without attributes.
func (c *checker) judgeMissing(ino Ino, st inodeState) {
	if st.links > 0 && !c.deleted[ino] {
		c.report(Damage{Ino: ino, Msg: fmt.Sprintf("missing, but named by %d entries (one in directory %d)", st.links, st.edgeParent)})
	}
	if (st.flags&hasChunks != 0 && !c.deleted[ino]) || st.flags&(hasSymlink|hasEntries) != 0 {
		c.suspects = append(c.suspects, ino)
	}
}

func (c *checker) checkDirLinks(ino Ino, st inodeState) {
	if want := 2 + st.subdirs; st.nlink != want {
		c.report(Damage{Ino: ino, Msg: fmt.Sprintf("directory link count %d, want %d (2 + %d subdirectories)", st.nlink, want, st.subdirs)})
	}
	wantLinks := uint32(1)
	if ino == RootIno {
		wantLinks = 0
	}
	if st.links != wantLinks {
		c.report(Damage{Ino: ino, Msg: fmt.Sprintf("directory named by %d entries, want %d", st.links, wantLinks)})
		return
	}
	want := st.edgeParent
	if ino == RootIno {
		want = RootIno
	}
	if st.parent != want {
		c.report(Damage{Ino: ino, Msg: fmt.Sprintf("directory parent is %d, but its entry is in directory %d", st.parent, want)})
	}
}

// checkRefs compares the stored reference counts with the chunks, and the
// deletion queue with the referenced slices.
func (c *checker) checkRefs(ctx context.Context) error {
	counted := map[SliceKey]bool{}
	err := scanPages(ctx, c.st, store.Tx.ScanSliceRefs, func(page []store.SliceRefRecord) error {
		for _, r := range page {
			k := SliceKey{r.Id, r.Size}
			counted[k] = true
			u := c.res.Slices[k]
			if u.Refs == 0 {
				c.report(Damage{Msg: fmt.Sprintf("slice %d (%d bytes): reference count record (%d extra) but no chunk names it", r.Id, r.Size, r.Extra)})
			} else if u.Refs != r.Extra+1 {
				c.report(Damage{Ino: u.Ino, Msg: fmt.Sprintf("slice %d (%d bytes): %d chunk entries name it, but its reference count says %d", r.Id, r.Size, u.Refs, r.Extra+1)})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for k, u := range c.res.Slices {
		if u.Refs > 1 && !counted[k] {
			c.report(Damage{Ino: u.Ino, Msg: fmt.Sprintf("slice %d (%d bytes): %d chunk entries name it, but it has no reference count record", k.Id, k.Size, u.Refs)})
		}
	}
	pending, err := PendingSlices(ctx, c.st)
	if err != nil {
		return err
	}
	for _, s := range pending {
		if u, ok := c.res.Slices[SliceKey{s.Id, s.Size}]; ok {
			c.report(Damage{Ino: u.Ino, Msg: fmt.Sprintf("slice %d (%d bytes) is queued for deletion but chunk %d still names it", s.Id, s.Size, u.Idx)})
		}
	}
	return nil
}

// confirmSuspects reads each suspect inode again in one transaction and
// reports what is still wrong.
func (c *checker) confirmSuspects(ctx context.Context) error {
	for _, ino := range c.suspects {
		var msgs []string
		err := c.st.View(ctx, func(tx store.Tx) error {
			var err error
			msgs, err = checkInodeTx(tx, ino, nil)
			if err != nil || len(msgs) == 0 || !strings.HasPrefix(msgs[0], msgMissing) {
				return err
			}
			// Without attributes, chunk records are fine while the file
			// waits in the deletion queue.
			queued, err := inDeletionQueue(tx, ino)
			if queued {
				msgs = nil
			}
			return err
		})
		if err != nil {
			return err
		}
		for _, m := range msgs {
			c.report(Damage{Ino: ino, Msg: m})
		}
	}
	return nil
}

const msgMissing = "no attribute record"

// inDeletionQueue reports whether the data of ino waits for deletion.
func inDeletionQueue(tx store.Tx, ino Ino) (bool, error) {
	var cursor []byte
	for {
		fs, next, err := tx.ScanDelFiles(cursor, scanPage)
		if err != nil {
			return false, err
		}
		for _, f := range fs {
			if f.Ino == ino {
				return true, nil
			}
		}
		if next == nil {
			return false, nil
		}
		cursor = next
	}
}

// checkInodeTx checks the records of one inode inside one transaction: its
// attributes, symlink target, chunk slices and, for a directory, the link
// count against its entries. uses, when set, is called for each slice.
func checkInodeTx(tx store.Tx, ino Ino, uses func(*store.ChunkRecord)) ([]string, error) {
	var msgs []string
	n, err := tx.Node(ino)
	if errors.Is(err, store.ErrNotFound) {
		n = nil
	} else if err != nil {
		return []string{"broken record: " + err.Error()}, nil
	}
	_, err = tx.Symlink(ino)
	hasTarget := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	var chunks, lastData int64 = 0, -1
	for from := uint32(0); ; {
		idxs, err := tx.ChunkIndexes(ino, from, scanPage)
		if err != nil {
			return nil, err
		}
		for _, idx := range idxs {
			ss, err := tx.Chunk(ino, idx)
			if err != nil {
				msgs = append(msgs, "broken record: "+err.Error())
				continue
			}
			cr := &store.ChunkRecord{Idx: idx, Slices: ss}
			chunks++
			msgs = append(msgs, chunkDamage(cr)...)
			if hasData(ss) {
				lastData = int64(idx)
			}
			if uses != nil {
				uses(cr)
			}
		}
		if len(idxs) < scanPage {
			break
		}
		from = idxs[len(idxs)-1] + 1
	}
	if n == nil {
		switch {
		case chunks > 0:
			msgs = append([]string{fmt.Sprintf("%s, but %d chunk records", msgMissing, chunks)}, msgs...)
		case hasTarget:
			msgs = append([]string{msgMissing + ", but a symlink target"}, msgs...)
		}
		es, err := tx.Edges(ino, nil, 1)
		if err != nil {
			return nil, err
		}
		if len(es) > 0 {
			msgs = append(msgs, fmt.Sprintf("%s, but directory entries (%q, ...)", msgMissing, es[0].Name))
		}
		return msgs, nil
	}
	if n.Type == store.TypeSymlink && !hasTarget {
		msgs = append(msgs, "symlink without a target record")
	}
	if n.Type != store.TypeSymlink && hasTarget {
		msgs = append(msgs, fmt.Sprintf("type %d, but a symlink target record", n.Type))
	}
	if n.Type != store.TypeFile && chunks > 0 {
		msgs = append(msgs, fmt.Sprintf("type %d, but %d chunk records", n.Type, chunks))
	}
	// An unfinished truncation leaves chunks past the end on purpose.
	if n.Type == store.TypeFile && n.Flags&flagTruncating == 0 && lastData >= 0 && uint64(lastData)*ChunkSize >= n.Length {
		msgs = append(msgs, fmt.Sprintf("chunk %d holds data past the end of the file (length %d)", lastData, n.Length))
	}
	return msgs, nil
}

// chunkDamage checks the slices of one chunk record.
func chunkDamage(c *store.ChunkRecord) []string {
	var msgs []string
	for i, s := range c.Slices {
		switch {
		case uint64(s.Pos)+uint64(s.Len) > ChunkSize:
			msgs = append(msgs, fmt.Sprintf("chunk %d slice #%d (id %d): range %d+%d leaves the chunk", c.Idx, i, s.Id, s.Pos, s.Len))
		case s.Id != 0 && uint64(s.Off)+uint64(s.Len) > uint64(s.Size):
			msgs = append(msgs, fmt.Sprintf("chunk %d slice #%d (id %d): reads %d+%d of a %d-byte slice", c.Idx, i, s.Id, s.Off, s.Len, s.Size))
		case s.Id != 0 && s.Size > ChunkSize:
			msgs = append(msgs, fmt.Sprintf("chunk %d slice #%d (id %d): size %d exceeds a chunk", c.Idx, i, s.Id, s.Size))
		}
	}
	return msgs
}

func hasData(ss []Slice) bool {
	for _, s := range ss {
		if s.Id != 0 && s.Len > 0 {
			return true
		}
	}
	return false
}

// checkTree checks the subtree at root, whose entry gives type typ.
func checkTree(ctx context.Context, st store.Store, root Ino, typ uint8, res *CheckResult, report func(Damage), progress func()) error {
	if err := checkOne(ctx, st, root, typ, res, report); err != nil || typ != store.TypeDir {
		return err
	}
	stack := []Ino{root}
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		var after []byte
		var subdirs uint32
		for {
			var es []store.Edge
			if err := st.View(ctx, func(tx store.Tx) error {
				var err error
				es, err = tx.Edges(d, after, scanPage)
				return err
			}); err != nil {
				return err
			}
			for _, e := range es {
				if e.Type == store.TypeDir {
					subdirs++
					stack = append(stack, e.Ino)
					if err := checkDirParent(ctx, st, e.Ino, d, report); err != nil {
						return err
					}
				}
				if err := checkOne(ctx, st, e.Ino, e.Type, res, report); err != nil {
					return err
				}
			}
			progress()
			if len(es) < scanPage {
				break
			}
			after = bytes.Clone(es[len(es)-1].Name)
		}
		var n *Attr
		if err := st.View(ctx, func(tx store.Tx) error {
			var err error
			n, err = tx.Node(d)
			return err
		}); err == nil && n.Nlink != 2+subdirs {
			report(Damage{Ino: d, Msg: fmt.Sprintf("directory link count %d, want %d (2 + %d subdirectories)", n.Nlink, 2+subdirs, subdirs)})
		}
	}
	return nil
}

// checkOne checks one inode of a subtree, named by an entry of type typ.
func checkOne(ctx context.Context, st store.Store, ino Ino, typ uint8, res *CheckResult, report func(Damage)) error {
	var msgs []string
	var n *Attr
	err := st.View(ctx, func(tx store.Tx) error {
		var err error
		n, _ = tx.Node(ino)
		msgs, err = checkInodeTx(tx, ino, func(c *store.ChunkRecord) { addUses(res.Slices, ino, c) })
		return err
	})
	if err != nil {
		return err
	}
	res.Inodes++
	if n == nil {
		msgs = append([]string{"missing, but named by an entry"}, msgs...)
	} else if n.Type != typ {
		msgs = append(msgs, fmt.Sprintf("entry gives type %d, the inode has type %d", typ, n.Type))
	}
	for _, m := range msgs {
		report(Damage{Ino: ino, Msg: m})
	}
	return nil
}

func checkDirParent(ctx context.Context, st store.Store, ino, parent Ino, report func(Damage)) error {
	var n *Attr
	err := st.View(ctx, func(tx store.Tx) error {
		var err error
		n, err = tx.Node(ino)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil // reported by checkOne
	}
	if err != nil {
		return err
	}
	if n.Parent != parent {
		report(Damage{Ino: ino, Msg: fmt.Sprintf("directory parent is %d, but its entry is in directory %d", n.Parent, parent)})
	}
	return nil
}

// InodePath returns a path of ino from the root, following parent
// pointers and finding each name among the parent's entries; "?" stands
// for a part it cannot find. It is meant for reports, not hot paths.
func InodePath(ctx context.Context, st store.Store, ino Ino) string {
	var parts []string
	for i := 0; ino != RootIno && i < 256; i++ {
		var n *Attr
		var name []byte
		err := st.View(ctx, func(tx store.Tx) error {
			var err error
			if n, err = tx.Node(ino); err != nil || n.Parent == 0 {
				return err
			}
			for after := []byte(nil); ; {
				es, err := tx.Edges(n.Parent, after, scanPage)
				if err != nil {
					return err
				}
				for _, e := range es {
					if e.Ino == ino {
						name = e.Name
						return nil
					}
				}
				if len(es) < scanPage {
					return nil
				}
				after = es[len(es)-1].Name
			}
		})
		if err != nil || n == nil || n.Parent == 0 || name == nil {
			parts = append(parts, "?")
			break
		}
		parts = append(parts, string(name))
		ino = n.Parent
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return path.Join(append([]string{"/"}, parts...)...)
}
