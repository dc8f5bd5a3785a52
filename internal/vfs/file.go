package vfs

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/object"
)

// openFile is the state shared by all handles of one regular file: its
// writer, its length as this mount knows it, and the slice lists it read.
type openFile struct {
	ino  meta.Ino
	meta Meta
	view *kernelView
	// committed, when set, is told of each slice committed to the file,
	// with its length.
	committed func(ino meta.Ino, idx uint32, n uint32)
	log       func() *slog.Logger
	writer    *chunk.FileWriter
	reader    *chunk.FileReader

	mu struct {
		sync.Mutex
		refs      int
		length    uint64
		lastWrite time.Time
		chunks    map[uint32][]meta.Slice // committed slice lists read so far
		// gen counts invalidations of chunks, so a list fetched before
		// one is not cached after it.
		gen uint64
		// seen is the version of the file that chunks and the kernel's
		// pages were read at (or later): set at open and when a lock
		// proves them current, moved along by this mount's own commits
		// when nobody else changed the file in between.
		seen meta.Version
		// noCaps records that the file has no security.capability
		// attribute, which the kernel asks for before writes and
		// chown: set when this mount created the file or the engine
		// said so, cleared when this mount sets an attribute
		// (VFS.capsMayChange) or sees another mount's change.
		noCaps bool
		// noXattrs records that the file has no extended attributes at
		// all (cp -a lists them twice per file), kept as noCaps is.
		noXattrs bool
		// xgen counts this mount's xattr changes of the file, so an
		// answer read before one does not set noCaps or noXattrs.
		xgen uint64
		// learnt counts the recordings of attr (see learnt).
		learnt uint64
		// attr is the file's attributes as this mount last saw them,
		// with held-back changes applied (its mode tells KillSetID
		// whether there are setuid and setgid bits to drop).
		attr *meta.Attr
		// held are attribute changes (chown, chmod, utimes) held back
		// to commit with the buffered writes in one transaction, or
		// together (see VFS.SetAttr); heldTimes tells that one of them
		// sets times.
		held      []meta.AttrChange
		heldTimes bool
		heldTimer *time.Timer // applies held changes no commit took; nil when unarmed
		// copy is a copy_file_range(2) into the file, answered and held
		// back to commit with the changes held after it (see
		// VFS.CopyFileRange); nil when none. copiedTo are the files
		// holding a copy from this one, which commit before this one
		// changes.
		copy     *heldCopy
		copiedTo []*openFile
		// copyErr is the failure of a held copy's commit: the copy is
		// lost, and every flush (fsync, close) from then on reports it,
		// as a failed commit of buffered writes is reported (see
		// chunk.FileWriter.Flush), not only the one that tried it.
		copyErr error
		// closed is set when the last handle went and nothing was held:
		// from then on changes go to the engine at once (see hold).
		closed bool
	}
}

// heldCopy is a copy_file_range held back on the file it copies into.
type heldCopy struct {
	meta.HeldCopy
	src *openFile
}

// heldDelay bounds how long a change is held back when no commit of
// buffered writes takes it along: after it the change is applied on its
// own, so other mounts see it about as soon as their attribute caches
// would let them anyway.
const heldDelay = time.Second

var (
	_ chunk.SliceSource = (*openFile)(nil)
	_ chunk.Committer   = (*openFile)(nil)
)

// ReadChunk serves slice lists from the file's cache, filled from meta.
func (f *openFile) ReadChunk(ctx context.Context, ino meta.Ino, idx uint32) ([]meta.Slice, error) {
	f.mu.Lock()
	ss, ok := f.mu.chunks[idx]
	gen := f.mu.gen
	f.mu.Unlock()
	if ok {
		return ss, nil
	}
	ss, err := f.meta.ReadChunk(ctx, ino, idx)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	if f.mu.gen == gen {
		f.mu.chunks[idx] = ss
	}
	f.mu.Unlock()
	return ss, nil
}

// NewSliceID allocates a slice id.
func (f *openFile) NewSliceID(ctx context.Context) (uint64, error) { return f.meta.NewSliceID(ctx) }

// Commit commits a slice and drops the cached list of its chunk. When the
// commit shows that another mount changed the file since this one last
// looked, every cached list goes, and seen stays behind so that the next
// lock also drops the kernel's pages.
func (f *openFile) Commit(ctx context.Context, ino meta.Ino, idx uint32, s meta.Slice, unsynced bool) (*meta.Attr, error) {
	held := f.takeHeld()
	before, a, err := f.meta.WriteSliceAttr(ctx, ino, idx, s, held, unsynced)
	if err == nil && f.committed != nil {
		f.committed(ino, idx, s.Len)
	}
	f.mu.Lock()
	if err != nil {
		f.returnHeldLocked(held) // for the next commit, or Flush
	}
	delete(f.mu.chunks, idx)
	f.mu.gen++
	if err == nil {
		f.view.advance(ino, before, meta.VersionOf(a))
		f.mu.length = max(f.mu.length, a.Length)
		f.setAttrLocked(a)
		if before == f.mu.seen {
			f.mu.seen = meta.VersionOf(a)
		} else {
			f.dropListsLocked()
			f.mu.noCaps, f.mu.noXattrs = false, false
		}
	}
	f.mu.Unlock()
	return a, err
}

// revalidate brings the file up to a, its attributes as of a lock just
// taken. When the file is still at the version this mount last saw, what
// it cached stays (no round trip); otherwise the cached slice lists go
// and revalidate reports true: the kernel's pages must go too.
func (f *openFile) revalidate(a *meta.Attr) bool {
	v := meta.VersionOf(a)
	f.mu.Lock()
	defer f.mu.Unlock()
	if v == f.mu.seen {
		return false
	}
	f.dropListsLocked()
	f.mu.length = max(a.Length, f.pendingEndLocked())
	f.mu.seen = v
	f.mu.noCaps, f.mu.noXattrs = false, false
	f.setAttrLocked(a)
	return true
}

// learnt returns how many times the file's attributes were recorded
// (setAttrLocked), by this mount's commits among others; 0 for nil. A
// reader of attributes compares it before and after its read to tell
// whether a commit landed meanwhile (VFS.GetAttr).
func (f *openFile) learnt() uint64 {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.learnt
}

// setAttrLocked records a as the file's attributes, unless changes or a
// copy are held back: their preview stays until they commit.
func (f *openFile) setAttrLocked(a *meta.Attr) {
	f.mu.learnt++
	if f.holdsLocked() && f.mu.attr != nil {
		return
	}
	cp := *a
	f.mu.attr = &cp
}

// setAttr refreshes what the file knows from attributes just read or
// changed; a truncation drops cached slice lists.
func (f *openFile) setAttr(a *meta.Attr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a.Length != f.mu.length {
		f.dropListsLocked()
	}
	f.mu.length = a.Length
	f.setAttrLocked(a)
}

// forgetSlices drops the cached slice lists, after the file's chunks
// changed behind it (compaction).
func (f *openFile) forgetSlices() {
	f.mu.Lock()
	f.dropListsLocked()
	f.mu.Unlock()
}

// dropListsLocked drops every cached slice list, including those being
// fetched (see gen); f.mu is held.
func (f *openFile) dropListsLocked() {
	clear(f.mu.chunks)
	f.mu.gen++
}

// pendingEndLocked returns the end of what this mount wrote or copied
// into the file and has not committed yet; f.mu is held.
func (f *openFile) pendingEndLocked() uint64 {
	end := f.writer.PendingEnd()
	if c := f.mu.copy; c != nil {
		end = max(end, c.DstOff+c.Len)
	}
	return end
}

// holdsLocked reports whether anything is held back on f but buffered
// writes: attribute changes or a copy; f.mu is held.
func (f *openFile) holdsLocked() bool {
	return len(f.mu.held) > 0 || f.mu.copy != nil
}

// overlayAttr reports buffered writes, a held copy and held attribute
// changes in a's length and times.
func (f *openFile) overlayAttr(a *meta.Attr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a.Length = max(a.Length, f.pendingEndLocked())
	if p := f.mu.attr; f.holdsLocked() && p != nil {
		a.Mode, a.Uid, a.Gid = p.Mode, p.Uid, p.Gid
		a.Atime, a.Atimensec = p.Atime, p.Atimensec
		a.Ctime, a.Ctimensec = p.Ctime, p.Ctimensec
		if f.mu.heldTimes || f.mu.copy != nil {
			a.Mtime, a.Mtimensec = p.Mtime, p.Mtimensec
			return
		}
	}
	if lw := f.mu.lastWrite; !lw.IsZero() && f.writer.Dirty() {
		if lw.Unix() > a.Mtime || lw.Unix() == a.Mtime && uint32(lw.Nanosecond()) > a.Mtimensec {
			a.Mtime, a.Mtimensec = lw.Unix(), uint32(lw.Nanosecond())
			a.Ctime, a.Ctimensec = a.Mtime, a.Mtimensec
		}
	}
}

// flush commits the buffered writes, then the attribute changes held
// back that no commit took along (to the end, see applyHeld).
func (f *openFile) flush(ctx context.Context) error {
	return f.flushIn(ctx, context.WithoutCancel(ctx))
}

// flushIn is flush with the held changes applied within heldCtx. Copies
// from f held on other files commit first: what calls flush goes on to
// change f, or to close it.
func (f *openFile) flushIn(ctx, heldCtx context.Context) error {
	if err := f.commitCopiesFrom(heldCtx); err != nil {
		return err
	}
	if err := f.writer.Flush(ctx); err != nil {
		return err
	}
	if err := f.applyHeldIn(heldCtx); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.copyErr
}

// commitCopiesFrom commits the copies from f held on other files, with
// what is held after them there.
func (f *openFile) commitCopiesFrom(ctx context.Context) error {
	f.mu.Lock()
	to := slices.Clone(f.mu.copiedTo)
	f.mu.Unlock()
	var first error
	for _, d := range to {
		if err := d.applyHeldIn(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// applyHeld applies the held-back attribute changes in one transaction,
// each with its caller's credentials. A cancelled ctx does not cut the
// transaction short: the request that asked may have given up, but the
// changes it was told were made must still land.
func (f *openFile) applyHeld(ctx context.Context) error {
	return f.applyHeldIn(context.WithoutCancel(ctx))
}

// applyHeldIn is applyHeld within ctx: VFS.Close gives up with it, as a
// mount told to stop on a stalled engine does (the changes are then lost
// with the buffered writes that could not commit either).
func (f *openFile) applyHeldIn(ctx context.Context) error {
	f.mu.Lock()
	if f.mu.heldTimer != nil {
		f.mu.heldTimer.Stop()
		f.mu.heldTimer = nil
	}
	cp := f.mu.copy
	f.mu.Unlock()
	if cp != nil {
		return f.commitCopy(ctx, cp)
	}
	held := f.takeHeld()
	if len(held) == 0 {
		return nil
	}
	a, err := f.meta.ApplyAttrChanges(ctx, f.ino, held)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.returnHeldLocked(held)
		return err
	}
	f.setAttrLocked(a)
	return nil
}

// commitCopy commits cp, the copy held on f, with the changes held after
// it. The copy goes whether it commits or not: one that fails reports
// its error to this flush, as a failed commit of buffered writes does,
// and is not tried again.
func (f *openFile) commitCopy(ctx context.Context, cp *heldCopy) error {
	f.mu.Lock()
	if f.mu.copy != cp { // another flush took it
		f.mu.Unlock()
		return f.applyHeldIn(ctx)
	}
	held := f.mu.held
	f.mu.held, f.mu.heldTimes = nil, false
	f.mu.copy = nil
	f.mu.Unlock()
	cp.src.forgetCopyTo(f)
	before, a, err := f.meta.(CopyCommitter).CommitCopy(ctx, cp.HeldCopy, held)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropListsLocked()
	if err != nil {
		// The preview of the copy is wrong now: make the next GetAttr
		// or lock look again.
		f.mu.seen = meta.Version{}
		f.returnHeldLocked(held)
		if f.mu.copyErr == nil {
			f.mu.copyErr = err
		}
		return err
	}
	f.view.advance(f.ino, before, meta.VersionOf(a))
	if before == f.mu.seen {
		f.mu.seen = meta.VersionOf(a)
	} else {
		f.mu.noCaps, f.mu.noXattrs = false, false
	}
	f.mu.length = max(f.mu.length, a.Length)
	f.setAttrLocked(a)
	return nil
}

// forgetCopyTo drops d from the files holding a copy from f.
func (f *openFile) forgetCopyTo(d *openFile) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i := slices.Index(f.mu.copiedTo, d); i >= 0 {
		f.mu.copiedTo = slices.Delete(f.mu.copiedTo, i, i+1)
	}
}

// holds reports whether attribute changes are held back on f.
func (f *openFile) holds() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.mu.held) > 0
}

// holdsAccessChange reports whether a change of mode or owner is held
// back on f: one that decides who may open it.
func (f *openFile) holdsAccessChange() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.mu.held {
		if ch.Mask&(meta.SetMode|meta.SetUid|meta.SetGid) != 0 {
			return true
		}
	}
	return false
}

// takeHeld takes the held-back changes, for a commit to apply; none
// while a copy is held, which they came after (commitCopy takes them).
func (f *openFile) takeHeld() []meta.AttrChange {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.copy != nil {
		return nil
	}
	held := f.mu.held
	f.mu.held, f.mu.heldTimes = nil, false
	return held
}

// returnHeldLocked puts back changes whose commit failed, before those
// held since.
func (f *openFile) returnHeldLocked(held []meta.AttrChange) {
	if len(held) > 0 {
		f.mu.held = append(held, f.mu.held...)
		f.mu.heldTimes = true
	}
}

// applyHeldLater runs heldDelay after a change was held: it applies what
// no commit took along, unless writes are still buffered (their commit
// will, and times must not land before it).
func (f *openFile) applyHeldLater() {
	if f.writer.Dirty() {
		f.mu.Lock()
		if f.mu.heldTimer != nil {
			f.mu.heldTimer.Reset(heldDelay)
		}
		f.mu.Unlock()
		return
	}
	if err := f.applyHeld(context.Background()); err != nil {
		f.log().Warn("apply held-back attribute changes", "ino", f.ino, "err", err)
	}
}

// hold holds back the attribute change mask/in by the caller in ctx, when
// it can be decided here, to commit with buffered writes or with the
// changes that follow it (see VFS.SetAttr); it returns the file's
// attributes after it.
func (f *openFile) hold(ctx context.Context, mask uint32, in *meta.Attr) (*meta.Attr, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.closed {
		// Release already committed what was held: a change held now
		// would reach the engine only when the timer fired, after a
		// caller that found no open file read the old attributes.
		return nil, false
	}
	out, ok := f.meta.PreviewAttr(ctx, f.mu.attr, mask, in)
	if !ok {
		return nil, false
	}
	ch := meta.AttrChange{Cred: meta.CredOf(ctx), Mask: mask, In: *in}
	// "Now" is when the caller asked, not when the change commits: make
	// and rsync compare these times.
	if mask&meta.SetAtimeNow != 0 {
		ch.Mask = ch.Mask&^meta.SetAtimeNow | meta.SetAtime
		ch.In.Atime, ch.In.Atimensec = out.Atime, out.Atimensec
	}
	if mask&meta.SetMtimeNow != 0 {
		ch.Mask = ch.Mask&^meta.SetMtimeNow | meta.SetMtime
		ch.In.Mtime, ch.In.Mtimensec = out.Mtime, out.Mtimensec
	}
	f.mu.held = append(f.mu.held, ch)
	if mask&(meta.SetAtime|meta.SetMtime|meta.SetAtimeNow|meta.SetMtimeNow) != 0 {
		f.mu.heldTimes = true
	}
	f.mu.attr = out
	if f.mu.heldTimer == nil {
		f.mu.heldTimer = time.AfterFunc(heldDelay, f.applyHeldLater)
	}
	cp := *out
	return &cp, true
}

// openFileRef returns the open file of ino, creating it, with one more
// reference.
func (v *VFS) openFileRef(a *meta.Attr) *openFile {
	v.mu.Lock()
	defer v.mu.Unlock()
	f := v.mu.files[a.Ino]
	if f == nil {
		f = &openFile{ino: a.Ino, meta: v.meta, view: v.view, log: v.log}
		if v.compact != nil {
			f.committed = v.compact.committed
		}
		f.writer = v.data.NewWriter(a.Ino, f)
		f.reader = v.data.NewReader(a.Ino)
		f.mu.chunks = map[uint32][]meta.Slice{}
		v.mu.files[a.Ino] = f
	}
	f.mu.Lock()
	f.mu.refs++
	// Close-to-open: a new open sees what other mounts committed (the
	// kernel drops its pages of the file at every open).
	f.dropListsLocked()
	f.mu.length = max(a.Length, f.pendingEndLocked())
	if v := meta.VersionOf(a); v != f.mu.seen {
		f.mu.noCaps, f.mu.noXattrs = false, false
		f.mu.seen = v
	}
	f.setAttrLocked(a)
	f.mu.Unlock()
	return f
}

// Create makes and opens a regular file.
func (v *VFS) Create(ctx context.Context, parent meta.Ino, name []byte, mode, umask uint16, flags uint32) (*meta.Attr, uint64, error) {
	if f := internalByName(parent, name); f != nil {
		if flags&syscall.O_EXCL != 0 {
			return nil, 0, syscall.EEXIST
		}
		return v.openInternal(ctx, f, flags)
	}
	nn := meta.NewNode{Type: store.TypeFile, Mode: mode, Umask: umask}
	cr, counted := v.meta.(Creator)
	var a *meta.Attr
	var err error
	if counted {
		a, err = cr.Create(ctx, parent, name, nn)
	} else {
		a, err = v.meta.Mknod(ctx, parent, name, nn)
	}
	if meta.Errno(err) == syscall.EEXIST && flags&syscall.O_EXCL == 0 {
		// The kernel believed the name missing (another mount created it
		// since): open(2) without O_EXCL opens what is there.
		return v.openExisting(ctx, parent, name, flags)
	}
	if err != nil {
		return nil, 0, err
	}
	v.view.entry(parent, name, a)
	if !counted {
		v.meta.Created(a.Ino)
	}
	f := v.openFileRef(a)
	f.mu.Lock()
	f.mu.noCaps = true // a new file has no attributes but inherited ACLs
	f.mu.noXattrs = a.Flags&meta.FlagACL == 0
	f.mu.Unlock()
	return a, v.addHandle(&handle{ino: a.Ino, flags: flags, file: f}), nil
}

// Tmpfile makes and opens an unnamed regular file in directory parent
// (open(2) with O_TMPFILE): it has no link until Link gives it a name,
// and goes at its last release otherwise. A Meta without the ability
// (TmpfileCreator) fails it with EOPNOTSUPP, which the kernel reports.
func (v *VFS) Tmpfile(ctx context.Context, parent meta.Ino, mode, umask uint16, flags uint32) (*meta.Attr, uint64, error) {
	tc, ok := v.meta.(TmpfileCreator)
	if !ok {
		return nil, 0, syscall.EOPNOTSUPP
	}
	if IsInternal(parent) {
		return nil, 0, syscall.ENOTDIR
	}
	a, err := tc.Tmpfile(ctx, parent, meta.NewNode{Type: store.TypeFile, Mode: mode, Umask: umask})
	if err != nil {
		return nil, 0, err
	}
	v.view.attr(a)
	f := v.openFileRef(a)
	f.mu.Lock()
	f.mu.noCaps = true // a new file has no attributes but inherited ACLs
	f.mu.noXattrs = a.Flags&meta.FlagACL == 0
	f.mu.Unlock()
	return a, v.addHandle(&handle{ino: a.Ino, flags: flags, file: f}), nil
}

// openExisting opens the file name in parent for a create that found it
// there. The kernel neither checks permissions nor truncates after a
// create, so Open does both.
func (v *VFS) openExisting(ctx context.Context, parent meta.Ino, name []byte, flags uint32) (*meta.Attr, uint64, error) {
	a, err := v.meta.Lookup(ctx, parent, name)
	if err != nil {
		return nil, 0, err
	}
	switch a.Type {
	case store.TypeFile:
	case store.TypeDir:
		return nil, 0, syscall.EISDIR
	default:
		return nil, 0, syscall.EEXIST
	}
	a, fh, err := v.Open(ctx, a.Ino, flags&^syscall.O_CREAT)
	if err != nil {
		return nil, 0, err
	}
	v.view.entry(parent, name, a)
	return a, fh, nil
}

// Open opens ino with open(2) flags.
//
// The kernel opens the inode its cached entry names, which another mount
// may have unlinked or replaced since (a rename over the name, the way
// git, editors and package managers update files), or whose attributes
// it cached before another mount changed the file (it would then read
// only up to the old length, and append at the old end). Such an open
// fails once with ESTALE: the kernel then looks every name of the path up
// again, which also refreshes the attributes, and retries, and gets the
// file the name leads to now. A retry that reaches the same inode without
// a new lookup (a file opened in the trash, or through /proc/PID/fd) goes
// through.
func (v *VFS) Open(ctx context.Context, ino meta.Ino, flags uint32) (*meta.Attr, uint64, error) {
	if f := internalByIno(ino); f != nil {
		return v.openInternal(ctx, f, flags)
	}
	if f := v.fileOf(ino); f != nil && f.holdsAccessChange() {
		// The open checks permissions against the engine's mode and
		// owner, which must include a chmod or chown held on the file
		// (an execve right after a chmod +x, a chmod 600 before
		// another user's open). The kernel was shown the change when
		// it was held: what it caches is what the commit wrote.
		if err := f.applyHeld(ctx); err != nil {
			return nil, 0, err
		}
		f.mu.Lock()
		a := f.mu.attr
		f.mu.Unlock()
		if a != nil {
			v.view.attr(a)
		}
	}
	xgen := v.xattrGen.Load()
	a, err := v.openMeta(ctx, ino, flags)
	if err != nil {
		return nil, 0, v.staleIfGone(ctx, ino, err)
	}
	pid := meta.CredOf(ctx).Pid
	stalePages := false
	if gone, changed := unlinked(a), a.Type == store.TypeFile && v.view.attrChanged(a); gone || changed {
		if v.stale.refuse(ino, pid) {
			v.meta.Release(context.WithoutCancel(ctx), ino)
			v.forgetAhead(ino) // the lookup again must reach the engine
			return nil, 0, syscall.ESTALE
		}
		if changed {
			// A retry without a new lookup: at least make the kernel
			// fetch the attributes again before it reads, and drop its
			// pages (see keep below).
			v.invalidateInode(ino, false)
			stalePages = true
		}
	} else {
		v.stale.passed(ino, pid)
	}
	if a.Type == store.TypeDir {
		v.meta.Release(context.WithoutCancel(ctx), ino)
		return nil, 0, syscall.EISDIR
	}
	if a.Type != store.TypeFile {
		// Fifos, sockets and devices are served by the kernel; a handle
		// only keeps the inode alive.
		return a, v.addHandle(&handle{ino: ino, flags: flags}), nil
	}
	f := v.openFileRef(a)
	if v.meta.NoXattrs(a) {
		// The open read the file as having no extended attributes: the
		// kernel's GETXATTR of its capabilities before a write and cp
		// -a's listing need not ask the engine while it is open, unless
		// this mount set one since the read began. (Another mount's
		// setxattr changes the ctime, so openFileRef already forgot
		// what this mount knew when the version it read is new.)
		f.mu.Lock()
		if v.xattrGen.Load() == xgen {
			f.mu.noCaps, f.mu.noXattrs = true, true
		}
		f.mu.Unlock()
	}
	// The kernel's cached attributes are the file's version in the
	// engine (or have expired: it fetches them again before it reads),
	// and it drops its pages itself when attributes it fetches show a
	// new mtime or length (FUSE_AUTO_INVAL_DATA): so its pages are this
	// version's, and re-reading an unchanged file need not come here.
	keep := flags&syscall.O_TRUNC == 0 && !stalePages
	h := &handle{ino: ino, flags: flags, file: f, keep: keep}
	if keep && flags&syscall.O_ACCMODE != syscall.O_WRONLY {
		// The kernel may serve every read of this open from its pages,
		// so no read may come here to count as the access: the open
		// counts instead, judged on the attributes it found (in the
		// default noatime mode, or when relatime says no, this costs
		// nothing).
		h.read.Store(true)
		v.touchAtime(ctx, ino, f, a)
	}
	fh := v.addHandle(h)
	if flags&syscall.O_TRUNC != 0 && a.Length > 0 {
		if a, err = v.SetAttr(ctx, ino, meta.SetSize|meta.SetViaHandle, &meta.Attr{}); err != nil {
			v.Release(ctx, fh, 0)
			return nil, 0, err
		}
	}
	return a, fh, nil
}

// openMeta opens ino in the metadata client: from its open cache
// (OpenCacher) when what that holds is the version the kernel was given
// and the file still has a name, otherwise from the engine.
func (v *VFS) openMeta(ctx context.Context, ino meta.Ino, flags uint32) (*meta.Attr, error) {
	if oc, ok := v.meta.(OpenCacher); ok {
		if a, ok := oc.OpenCached(ctx, ino, flags); ok {
			if !unlinked(a) && !v.view.attrChanged(a) {
				return a, nil
			}
			v.meta.Release(context.WithoutCancel(ctx), ino)
		}
	}
	return v.meta.Open(ctx, ino, flags)
}

// KeepCache reports whether the kernel may keep the pages it caches of
// the file fh opened (FOPEN_KEEP_CACHE): they are of the version the open
// found. Otherwise the kernel drops them at the open.
func (v *VFS) KeepCache(fh uint64) bool {
	h, err := v.handle(fh)
	return err == nil && h.keep
}

// DirectIO reports whether the kernel must send every read and write of
// the file fh opened here, bypassing its page cache: so it must for the
// internal files, whose content is made as it is read.
func (v *VFS) DirectIO(fh uint64) bool {
	h, err := v.handle(fh)
	return err == nil && h.internal != nil
}

// readRetries bounds how often a read whose block is gone reads the slice
// lists again. Each retry reads them from the engine; a block still
// missing from a list just read is lost, not moved.
const readRetries = 8

// Read reads up to len(p) bytes at off into p and returns the number of
// bytes read; fewer at the end of the file.
func (v *VFS) Read(ctx context.Context, fh uint64, off uint64, p []byte) (int, error) {
	pieces, release, err := v.read(ctx, fh, off, p, false)
	defer release()
	if err != nil {
		return 0, err
	}
	return chunk.Gather(p, pieces), nil
}

// ReadVec is Read that returns the bytes as pieces, in order, each either
// a part of p or memory of the block cache, which stays unchanged until
// release is called: a reply can then be written from the cached blocks
// without copying them into p first. Fewer than len(p) bytes in all at
// the end of the file. The caller must call release once, also after an
// error; the memory of cached blocks is reused only after that.
func (v *VFS) ReadVec(ctx context.Context, fh uint64, off uint64, p []byte) (pieces [][]byte, release func(), err error) {
	return v.read(ctx, fh, off, p, true)
}

func noRelease() {}

func (v *VFS) read(ctx context.Context, fh uint64, off uint64, p []byte, vec bool) ([][]byte, func(), error) {
	h, err := v.handle(fh)
	if err != nil {
		return nil, noRelease, err
	}
	if h.internal != nil {
		n, err := h.internal.read(ctx, off, p)
		if err != nil {
			return nil, noRelease, err
		}
		return [][]byte{p[:n]}, noRelease, nil
	}
	if h.file == nil {
		return nil, noRelease, syscall.EBADF
	}
	if h.flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		return nil, noRelease, syscall.EBADF
	}
	f := h.file
	f.mu.Lock()
	copying := f.mu.copy != nil
	// No byte lies past the largest file size (a file an older version
	// let grow further reads as ending there).
	length := min(max(f.mu.length, f.pendingEndLocked()), meta.MaxFileSize)
	f.mu.Unlock()
	if copying {
		// The copy's slices are not in the file's lists yet.
		if err := f.applyHeld(ctx); err != nil {
			return nil, noRelease, err
		}
	}
	if off >= length {
		return nil, noRelease, nil
	}
	n := min(uint64(len(p)), length-off)
	f.reader.Readahead(ctx, f, off, n, length)
	read := func() ([][]byte, func(), error) {
		if vec {
			return f.writer.ReadVec(ctx, f, p[:n], off)
		}
		return [][]byte{p[:n]}, noRelease, f.writer.Read(ctx, f, p[:n], off)
	}
	pieces, release, err := read()
	for retry := 0; retry < readRetries && errors.Is(err, object.ErrNotFound); retry++ {
		// A block named by a cached slice list is gone: another mount
		// compacted the chunk and deleted what it replaced. Read the
		// lists again (again if it compacted once more meanwhile).
		release()
		f.forgetSlices()
		if retry > 0 {
			time.Sleep(time.Duration(retry) * 5 * time.Millisecond) // an engine's cache may lag a moment
		}
		pieces, release, err = read()
	}
	if err != nil {
		release()
		return nil, noRelease, err
	}
	if len(pieces) > maxReadPieces {
		chunk.Gather(p, pieces)
		release()
		pieces, release = [][]byte{p[:n]}, noRelease
	}
	v.accessed(ctx, h)
	return pieces, release, nil
}

// maxReadPieces bounds the pieces of a ReadVec, far below the system's
// limit on a writev (1,024): a read of a file made of many small slices
// is gathered into its buffer instead.
const maxReadPieces = 64

// WriteLimit returns how many of n bytes a write at off may write: all of
// them when they end at or before meta.MaxFileSize, those before it when
// they cross it (a local file system cuts such a write short too), and
// EFBIG when the write starts at or past it.
func WriteLimit(off uint64, n int) (int, error) {
	if off >= meta.MaxFileSize {
		return 0, syscall.EFBIG
	}
	return int(min(uint64(n), meta.MaxFileSize-off)), nil
}

// Write writes data at off. It writes all of data or, failing, none:
// once the bytes are in the file's buffers they will be committed, so a
// cancellation of ctx (an interrupted request) counts only before. A
// write that would reach past meta.MaxFileSize fails with EFBIG (see
// WriteLimit for one cut short instead).
func (v *VFS) Write(ctx context.Context, fh uint64, off uint64, data []byte) error {
	h, err := v.handle(fh)
	if err != nil {
		return err
	}
	if h.internal != nil {
		return h.internal.write(ctx, data)
	}
	if h.file == nil || h.flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		return syscall.EBADF
	}
	if n, err := WriteLimit(off, len(data)); err != nil || n < len(data) {
		return syscall.EFBIG
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	f := h.file
	f.mu.Lock()
	// Times set after earlier writes must not cover this one's, a copy
	// held on f must not land over it, and one held from f must not see
	// it.
	flush := f.mu.heldTimes || f.mu.copy != nil || len(f.mu.copiedTo) > 0
	f.mu.Unlock()
	if flush {
		if err := f.flush(ctx); err != nil {
			return err
		}
	}
	if err := f.writer.Write(context.WithoutCancel(ctx), data, off); err != nil {
		return err
	}
	f.mu.Lock()
	f.mu.length = max(f.mu.length, off+uint64(len(data)))
	f.mu.lastWrite = time.Now()
	f.mu.Unlock()
	return nil
}

// HasSetID reports whether the handle's file has setuid or setgid bits,
// as this mount last saw it.
func (v *VFS) HasSetID(fh uint64) bool {
	h, err := v.handle(fh)
	return err == nil && h.hasSetID()
}

// hasSetID reports whether h is of a regular file with setuid or setgid
// bits, as this mount last saw it.
func (h *handle) hasSetID() bool {
	if h.file == nil {
		return false
	}
	h.file.mu.Lock()
	defer h.file.mu.Unlock()
	return h.file.mu.attr != nil && meta.HasSetID(h.file.mu.attr.Mode)
}

// KillSetID drops setuid, and setgid when the group may execute, from
// the handle's file, as a write or truncation by a process without
// CAP_FSETID must: the FUSE kernel leaves it to the file system when it
// hands that job over (FUSE_HANDLE_KILLPRIV_V2), which spares it a
// GETXATTR before every write. It costs a transaction only when the mode
// this mount last saw of the file has such bits.
func (v *VFS) KillSetID(ctx context.Context, fh uint64) error {
	h, err := v.handle(fh)
	if err != nil {
		return err
	}
	if !h.hasSetID() {
		return nil
	}
	if _, err := v.SetAttr(ctx, h.ino, meta.SetKillSetID|meta.SetViaHandle, &meta.Attr{}); err != nil {
		return err
	}
	// The kernel does not expect the mode to change under a write: make
	// it ask, so stat(2) right after the write shows the bits gone.
	v.invalidateInode(h.ino, false)
	return nil
}

// Flush commits the handle's buffered writes (close(2) of a descriptor)
// and, when lockOwner is not 0, drops the POSIX locks that owner holds on
// the file, as closing any descriptor of it does. The handle forgets the
// owner (see "Record lock owners" in lock.go): a FLUSH carries a
// process's owner, never an OFD lock's. A cancellation of ctx (the
// closing process was killed) ends the wait for the commit, which goes
// on in the background, and never keeps the locks.
func (v *VFS) Flush(ctx context.Context, fh uint64, lockOwner uint64) error {
	h, err := v.handle(fh)
	if err != nil || h.internal != nil {
		return err
	}
	// Commit before the locks go, so that the next holder reads it.
	if h.file != nil {
		err = h.file.flush(ctx)
	}
	if lockOwner != 0 {
		v.closedBy(h, lockOwner)
		if lerr := v.meta.ReleaseLocks(context.WithoutCancel(ctx), h.ino, lockOwner); err == nil {
			err = lerr
		}
	}
	return err
}

// Fsync makes the file's writes durable in the volume.
func (v *VFS) Fsync(ctx context.Context, fh uint64) error {
	if err := v.Flush(ctx, fh, 0); err != nil {
		return err
	}
	if err := v.data.Sync(ctx); err != nil {
		v.log().Error("fsync: sync stored blocks", "err", err)
		return syscall.EIO
	}
	return nil
}

// Release closes a handle (the last close of an open file description);
// the last handle of a file commits its writes. A flock held by
// flockOwner (not 0) is released, and so are the OFD locks taken through
// the handle, for which the kernel sends no owner (see "Record lock
// owners" in lock.go). Release runs to the end whatever becomes of ctx
// (only its credentials count): no process waits for it that could give
// up — the kernel sends it after the last close, and a failed open cleans
// up with it — and what comes next, the next holder of the lock or the
// next open, must find the writes committed and the handle gone.
func (v *VFS) Release(ctx context.Context, fh uint64, flockOwner uint64) error {
	ctx = context.WithoutCancel(ctx)
	v.mu.Lock()
	h, ok := v.mu.handles[fh]
	delete(v.mu.handles, fh)
	var owners map[uint64]struct{}
	counted := false
	if ok && h.internal == nil {
		// At once, with the handle: lock requests that come after
		// this RELEASE must find its locks gone.
		owners, counted = v.beginReleaseLocked(h, flockOwner != 0)
	}
	v.mu.Unlock()
	if !ok {
		return syscall.EBADF
	}
	if h.internal != nil {
		v.releaseInternal(h.internal)
		return nil
	}
	if counted {
		defer v.endRelease(h.ino)
	}
	var err error
	if f := h.file; f != nil {
		// Commit before the locks go, so that the next holder reads it.
		err = f.flush(ctx)
	}
	if flockOwner != 0 {
		if _, ferr := v.meta.Flock(ctx, h.ino, flockOwner, meta.LockUnlock, false); err == nil {
			err = ferr
		}
	}
	if counted && testHookReleasingLocks != nil {
		testHookReleasingLocks(h.ino)
	}
	if lerr := v.releaseRecordLocks(ctx, h.ino, owners); err == nil {
		err = lerr
	}
	if f := h.file; f != nil {
		if testHookReleaseFlushed != nil {
			testHookReleaseFlushed(h.ino)
		}
		if ferr := v.unref(ctx, f); err == nil {
			err = ferr
		}
	}
	if rerr := v.meta.Release(ctx, h.ino); err == nil {
		err = rerr
	}
	return err
}

// testHookReleaseFlushed, when set by a test, runs in Release between the
// flush and the release of the file's reference.
var testHookReleaseFlushed func(meta.Ino)

// unref drops a handle's reference to f. The last one takes f out of the
// open files only once nothing is held back on it: a SetAttr that found f
// open may have held a change after Release flushed, and that change must
// reach the engine before a caller can miss f and read the engine.
func (v *VFS) unref(ctx context.Context, f *openFile) error {
	var err error
	for {
		v.mu.Lock()
		f.mu.Lock()
		last := f.mu.refs == 1
		if last && f.holdsLocked() && err == nil {
			f.mu.Unlock()
			v.mu.Unlock()
			err = f.applyHeld(ctx)
			continue
		}
		f.mu.refs--
		if last {
			delete(v.mu.files, f.ino)
			if len(f.mu.held) == 0 {
				f.mu.closed = true
			} else if f.mu.heldTimer == nil {
				// What failed to apply stays with f, for a timer to retry.
				f.mu.heldTimer = time.AfterFunc(heldDelay, f.applyHeldLater)
			}
		}
		f.mu.Unlock()
		v.mu.Unlock()
		return err
	}
}

// Fallocate applies fallocate(2) (meta.Fallocate modes) to the handle's
// file, after committing its buffered writes so that they land before a
// hole punched over them.
func (v *VFS) Fallocate(ctx context.Context, fh uint64, mode uint32, off, length uint64) error {
	h, err := v.writableFile(fh)
	if err != nil {
		return err
	}
	if err := h.file.flush(ctx); err != nil {
		return err
	}
	if err := v.meta.Fallocate(ctx, h.ino, mode, off, length); err != nil {
		return err
	}
	return v.refresh(ctx, h.file)
}

// CopyFileRange copies a range between two open files by sharing their
// stored slices (copy_file_range(2)); nothing is copied in object storage.
//
// When the metadata client can (CopyCommitter), a copy into another file
// is answered at once and held back, as buffered writes are: it commits
// at close, fsync or heldDelay later, in one transaction with the owner,
// mode and times that cp -a sets right after it (or before anything else
// reads, writes or changes either file through this mount). This mount
// sees the copy at once; other mounts at the commit, as they see writes.
// The bytes copied are counted from the source's length as this mount
// knows it; a failure to commit (a full quota) is reported by the close
// or fsync, as for writes.
func (v *VFS) CopyFileRange(ctx context.Context, fhIn, offIn, fhOut, offOut, length uint64) (uint64, error) {
	in, err := v.handle(fhIn)
	if err != nil {
		return 0, err
	}
	if in.file == nil || in.flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		return 0, syscall.EBADF
	}
	out, err := v.writableFile(fhOut)
	if err != nil {
		return 0, err
	}
	if out.flags&syscall.O_APPEND != 0 {
		return 0, syscall.EBADF
	}
	if err := meta.CheckCopyRange(in.ino, offIn, out.ino, offOut, length); err != nil {
		return 0, err
	}
	for _, f := range []*openFile{in.file, out.file} {
		if err := f.flush(ctx); err != nil {
			return 0, err
		}
	}
	if n, ok := v.holdCopy(ctx, in, offIn, out, offOut, length); ok {
		return n, nil
	}
	n, a, err := v.meta.CopyFileRange(ctx, in.ino, offIn, out.ino, offOut, length)
	if err != nil {
		return 0, err
	}
	v.refreshed(out.file, a)
	return n, nil
}

// holdCopy holds back the copy of length bytes of in at offIn to out at
// offOut (see CopyFileRange) and returns the bytes it copies; false when
// it cannot be held: the client cannot commit it so, the copy is within
// one file, out's flags may refuse it, or out holds a copy already.
func (v *VFS) holdCopy(ctx context.Context, in *handle, offIn uint64, out *handle, offOut, length uint64) (uint64, bool) {
	if _, ok := v.meta.(CopyCommitter); !ok || in.ino == out.ino {
		return 0, false
	}
	src, dst := in.file, out.file
	src.mu.Lock()
	srcLen := max(src.mu.length, src.pendingEndLocked())
	src.mu.Unlock()
	if offIn >= srcLen {
		return 0, true // nothing to copy: the file ends before
	}
	n := min(length, srcLen-offIn)
	now := time.Now()
	cp := &heldCopy{src: src, HeldCopy: meta.HeldCopy{Src: in.ino, SrcOff: offIn, Dst: out.ino, DstOff: offOut, Len: n,
		Mtime: now.Unix(), Mtimensec: uint32(now.Nanosecond())}}
	// Known to the source first: a write to it from now on commits the
	// copy before it lands (a write racing the copy may land either side).
	src.mu.Lock()
	src.mu.copiedTo = append(src.mu.copiedTo, dst)
	src.mu.Unlock()
	dst.mu.Lock()
	p := dst.mu.attr
	if dst.mu.copy != nil || dst.mu.closed || p == nil || p.Flags&(meta.FlagImmutable|meta.FlagAppend) != 0 {
		dst.mu.Unlock()
		src.forgetCopyTo(dst)
		return 0, false
	}
	dst.mu.copy = cp
	// The preview every reply shows until the copy commits (see
	// overlayAttr), as the commit will stamp it.
	pv := *p
	pv.Length = max(pv.Length, offOut+n)
	pv.Mtime, pv.Mtimensec = cp.Mtime, cp.Mtimensec
	pv.Ctime, pv.Ctimensec = cp.Mtime, cp.Mtimensec
	dst.mu.attr = &pv
	dst.mu.length = max(dst.mu.length, offOut+n)
	if dst.mu.heldTimer == nil {
		dst.mu.heldTimer = time.AfterFunc(heldDelay, dst.applyHeldLater)
	}
	dst.mu.Unlock()
	// The commit reads the source's slice lists. Read them now, beside
	// the caller's next requests (cp -a sets times and mode before its
	// close): the source keeps them, and an engine whose client caches
	// what it read (Redis) then serves the commit's reads without a
	// round trip. A failure here costs nothing but that.
	go func(ctx context.Context) {
		first, last := offIn/meta.ChunkSize, (offIn+n-1)/meta.ChunkSize
		for idx := first; idx <= min(last, first+copyReadAhead-1); idx++ {
			if _, err := src.ReadChunk(ctx, src.ino, uint32(idx)); err != nil {
				return
			}
		}
	}(context.WithoutCancel(ctx))
	return n, true
}

// copyReadAhead bounds the source chunks whose slice lists a held copy
// reads ahead of its commit.
const copyReadAhead = 4

// writableFile returns the handle fh of a regular file open for writing.
func (v *VFS) writableFile(fh uint64) (*handle, error) {
	h, err := v.handle(fh)
	if err != nil {
		return nil, err
	}
	if h.file == nil || h.flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		return nil, syscall.EBADF
	}
	return h, nil
}

// refresh re-reads a file's attributes after a change made in metadata
// behind its writer, dropping its cached slice lists.
func (v *VFS) refresh(ctx context.Context, f *openFile) error {
	a, err := v.meta.GetAttr(ctx, f.ino)
	if err != nil {
		return err
	}
	v.refreshed(f, a)
	return nil
}

// refreshed records a, the attributes of a change made in metadata behind
// the writer of f, dropping its cached slice lists.
func (v *VFS) refreshed(f *openFile, a *meta.Attr) {
	f.mu.Lock()
	f.dropListsLocked()
	f.mu.length = a.Length
	f.mu.Unlock()
	// The kernel applied the change to its own attributes (or dropped
	// them); the next open need not send it looking again.
	v.view.attr(a)
}

// accessed records the first read through a handle as an access, for the
// atime mode of the mount. A failure to record it does not fail the read.
func (v *VFS) accessed(ctx context.Context, h *handle) {
	if h.read.Swap(true) {
		return
	}
	v.touchAtime(ctx, h.ino, h.file, nil)
}

// touchAtime records an access to ino, open as f (nil for a directory),
// whose attributes are a (nil: the engine's). Attribute changes held back
// on f were asked for before the access (a utimes after a write, then a
// read): they land first, or they would overwrite its atime when they do.
func (v *VFS) touchAtime(ctx context.Context, ino meta.Ino, f *openFile, a *meta.Attr) {
	if !v.meta.RecordsAtime() {
		return
	}
	if f != nil && f.holds() {
		if err := f.flush(ctx); err != nil {
			f.log().Warn("apply held-back attribute changes before an access", "ino", ino, "err", err)
		}
		a = nil
	}
	if err := v.meta.TouchAtime(ctx, ino, a); err != nil {
		v.log().Debug("record an access time", "ino", ino, "err", err)
	}
}
