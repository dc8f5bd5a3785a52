// Package vfs is the kernel-agnostic file system of Sluice: it keeps the
// table of open handles and open files, joins metadata (package meta) with
// file data (package chunk), and presents inode-based operations that an
// access path such as the FUSE binding calls. Callers pass the requesting
// process's credentials in the context (meta.WithCred).
//
// Errors follow package meta: a syscall.Errno, possibly wrapped, for POSIX
// failures; anything else is an I/O failure the caller reports as EIO.
//
// Cancellation: the access path cancels ctx when the request is
// interrupted (its process got a signal, or is being killed). That ends
// what the operation waits for — a lock, a metadata or object request, a
// commit — and the operation fails with EINTR; it never cuts short what
// other processes rely on: Flush still drops the closing process's POSIX
// locks, an unlock unlocks, Release runs to the end, and a Write is
// applied whole or not at all.
//
// Consistency across mounts (docs/consistency.md states it for users):
//   - close-to-open: writes become visible to other mounts at Flush (every
//     close), Fsync or the last Release; Open drops what the file's handles
//     had cached, and answers ESTALE once for a file another mount has
//     unlinked, replaced, or changed since the kernel cached its
//     attributes, so that the kernel looks the name up again;
//   - lock-to-read: taking a POSIX or BSD lock proves this mount's caches of
//     the file current against the version the lock's own transaction read
//     (no extra round trip), drops them and the kernel's pages when the
//     file changed, and drops the kernel's entries of the file's directory;
//     releasing a lock first commits this mount's buffered writes of it;
//   - reads in this mount see its own buffered writes.
package vfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/compact"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// Config tunes a VFS.
type Config struct {
	// AttrTimeout, EntryTimeout and DirEntryTimeout are how long the
	// kernel may cache attributes, file entries and directory entries.
	AttrTimeout     time.Duration
	EntryTimeout    time.Duration
	DirEntryTimeout time.Duration
	// NegEntryTimeout is how long the kernel may cache that a name does
	// not exist. A name another mount creates stays hidden from this one
	// for that long, so it is 0 unless asked for.
	NegEntryTimeout time.Duration
	// ReaddirCache lets the kernel keep a directory's listing and serve
	// it again without READDIR requests while the directory is unchanged
	// (OpenDir checks that against the engine, so a listing is never
	// older than its opendir). Listings from the kernel's cache carry no
	// attributes, unlike READDIRPLUS, so it pays off only where entries
	// and attributes are cached for long.
	ReaddirCache bool
	// Controls are the operations of the control channel (the internal
	// file .control, package control), by name. The "compact" control is
	// added when Compactor is set.
	Controls map[string]Control
	// HideInternal keeps the internal files (.control, .accesslog,
	// .stats, .config) out of listings of the root; they can still be
	// opened by name.
	HideInternal bool
	// Stats writes the mount's metrics, in the Prometheus text format,
	// for .stats; nil shows nothing.
	Stats func(w io.Writer) error
	// Settings is the running configuration .config shows as JSON;
	// secrets must be hidden already.
	Settings any
	// Compactor, when set, compacts the chunks this mount fragments, in
	// the background, and serves the "compact" control.
	Compactor *compact.Compactor
	// Logger receives background events; nil discards them.
	Logger *slog.Logger
}

// VFS is one mounted volume. Its fields are set by New and never
// change; what changes is guarded by mu.
type VFS struct {
	meta Meta
	data *chunk.Store
	conf Config

	compact *compactor // nil without conf.Compactor
	stop    context.CancelFunc

	started   time.Time // the times of the internal files
	accessLog AccessLog

	view  *kernelView // what the kernel may cache
	stale staleInodes
	// xattrGen counts this mount's changes of extended attributes, so
	// that attributes read before one do not mark a file as having none
	// (Open).
	xattrGen atomic.Uint64
	kernelMu sync.Mutex
	kernel   Kernel // nil until SetKernel

	mu struct {
		sync.Mutex
		nextFh  uint64
		handles map[uint64]*handle
		files   map[meta.Ino]*openFile
		// releasing counts, by file, the releases of its handles in
		// progress that drop locks (see "Record lock owners" in
		// lock.go).
		releasing map[meta.Ino]*lockRelease
	}
}

// handle is one open file or directory description.
type handle struct {
	ino   meta.Ino
	flags uint32
	keep  bool        // the kernel may keep its pages of the file or its listing of the directory (KeepCache)
	read  atomic.Bool // the first read recorded the access time
	file  *openFile   // regular files
	dir   *dirStream  // directories

	internal *internalHandle // internal files

	// recordOwners are the lock owners that took fcntl(2) record locks
	// through this handle and have not closed a descriptor of it since:
	// at Release, the owners of its OFD locks (see "Record lock owners"
	// in lock.go). Guarded by VFS.mu.
	recordOwners map[uint64]struct{}
}

// New returns a VFS over a metadata service (a *meta.Session, or another
// implementation of Meta) and a chunk store.
func New(m Meta, s *chunk.Store, conf Config) *VFS {
	v := &VFS{meta: m, data: s, conf: conf, started: time.Now(),
		view: newKernelView(conf.AttrTimeout, conf.EntryTimeout, conf.DirEntryTimeout, conf.NegEntryTimeout)}
	v.mu.handles = map[uint64]*handle{}
	v.mu.files = map[meta.Ino]*openFile{}
	v.mu.releasing = map[meta.Ino]*lockRelease{}
	ctx, stop := context.WithCancel(context.Background())
	v.stop = stop
	if conf.Compactor != nil {
		v.compact = newCompactor(v, conf.Compactor)
		go v.compact.run(ctx)
		controls := map[string]Control{"compact": v.compactTree}
		for name, fn := range conf.Controls {
			controls[name] = fn
		}
		v.conf.Controls = controls
	}
	return v
}

// Config returns the configuration the VFS runs with (with the controls
// New added).
func (v *VFS) Config() Config { return v.conf }

// AccessLog returns the access log of the mount, which the access path
// writes one line per operation to while anybody reads .accesslog.
func (v *VFS) AccessLog() *AccessLog { return &v.accessLog }

// log returns the logger of background events.
func (v *VFS) log() *slog.Logger {
	if v.conf.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return v.conf.Logger
}

func (v *VFS) addHandle(h *handle) uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.mu.nextFh++
	v.mu.handles[v.mu.nextFh] = h
	return v.mu.nextFh
}

func (v *VFS) handle(fh uint64) (*handle, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	h, ok := v.mu.handles[fh]
	if !ok {
		return nil, syscall.EBADF
	}
	return h, nil
}

// fileOf returns the open file of ino, if any handle has it open.
func (v *VFS) fileOf(ino meta.Ino) *openFile {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.mu.files[ino]
}

// withPending updates attributes of a regular file with what this mount
// has written and not yet committed. It also shows a file this mount
// holds open whose one name is in the trash (where an unlink, or a
// rename over it, put it) with no link, as fstat(2) of a file removed
// while open shows on a local file system; listed in the trash, a file
// not held open keeps its link there, as JuiceFS shows it.
func (v *VFS) withPending(a *meta.Attr) *meta.Attr {
	if a == nil || a.Type != store.TypeFile {
		return a
	}
	if f := v.fileOf(a.Ino); f != nil {
		f.overlayAttr(a)
		if a.Nlink == 1 && meta.IsTrash(a.Parent) {
			a.Nlink = 0
		}
	}
	return a
}

// Lookup finds name in parent. The access path caches the answer, found
// or missing, as Config says.
func (v *VFS) Lookup(ctx context.Context, parent meta.Ino, name []byte) (*meta.Attr, error) {
	a, _, err := v.LookupAged(ctx, parent, name)
	return a, err
}

// LookupAged is Lookup for the kernel's lookups: the answer may come from
// a listing of parent read a moment ago (see meta.Config.Statahead), and
// age is how old it is, to be taken off the times the kernel may cache it.
func (v *VFS) LookupAged(ctx context.Context, parent meta.Ino, name []byte) (_ *meta.Attr, age time.Duration, _ error) {
	if f := internalByName(parent, name); f != nil {
		return f.attr(v.started), 0, nil
	}
	var a *meta.Attr
	var err error
	if la, ok := capability[meta.LookerAhead](v.meta); ok {
		a, age, err = la.LookupAhead(ctx, parent, name)
	} else {
		a, err = v.meta.Lookup(ctx, parent, name)
	}
	switch {
	case err == nil:
		v.view.entry(parent, name, a)
	case errors.Is(err, meta.ErrNoInode):
		// The directory itself is gone (another mount removed it, or
		// renamed another over it): look the path up again.
		return nil, 0, v.staleIfGone(ctx, parent, err)
	case v.conf.NegEntryTimeout > 0 && meta.Errno(err) == syscall.ENOENT:
		v.view.name(parent, name)
	}
	return v.withPending(a), age, err
}

// GetAttr returns the attributes of ino. An inode that no longer exists
// (another mount deleted the file the kernel's cached name led to)
// answers ESTALE once, so that the kernel looks the name up again (see
// Open). A file that still exists answers, even unlinked or in the trash:
// Linux asks the same way for fstat(2) of an open file, which must work.
func (v *VFS) GetAttr(ctx context.Context, ino meta.Ino) (*meta.Attr, error) {
	if f := internalByIno(ino); f != nil {
		return f.attr(v.started), nil
	}
	f := v.fileOf(ino)
	var a *meta.Attr
	for try := 0; ; try++ {
		learnt := f.learnt()
		var err error
		a, err = v.meta.GetAttr(ctx, ino)
		if errors.Is(err, meta.ErrNoInode) {
			if a := v.removedOpenDir(ino); a != nil {
				return a, nil
			}
		}
		if err != nil {
			return nil, v.staleIfGone(ctx, ino, err)
		}
		// A commit of this mount's writes that landed while the read
		// was under way (a full chunk commits in the background) may be
		// newer than what it read: the answer would take the file back
		// to its length before the write, in the kernel and here, and
		// a read of the bytes just written would find the end of the
		// file. Read again.
		if f.learnt() == learnt || try == maxAttrRereads {
			break
		}
	}
	v.view.attr(a)
	if f != nil && a.Type == store.TypeFile {
		// Given a new mtime or length, the kernel drops its pages of the
		// file: its next reads must find that version's bytes and
		// length, not those the handles were opened at (an open from
		// the open cache, a handle kept open across another mount's
		// change).
		f.revalidate(a)
	}
	return v.withPending(a), nil
}

// maxAttrRereads bounds the reads again of GetAttr on a file whose
// commits keep landing while it reads.
const maxAttrRereads = 3

// removedOpenDir returns the attributes of directory ino, which is gone
// from the engine, with no link, when a handle of this mount holds it
// open; nil otherwise. A directory removed (or renamed over) while open
// lives on for its descriptors as a local file system's does, and
// fstat(2) of one must answer: the kernel asks for it without the handle
// (Linux's fuse_getattr has none), so any handle of ino will do. A stat
// by a path the kernel still caches, of a directory another mount
// removed, sees the same until the kernel looks the name up again.
func (v *VFS) removedOpenDir(ino meta.Ino) *meta.Attr {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, h := range v.mu.handles {
		if h.dir != nil && h.ino == ino {
			a := h.dir.attr
			a.Nlink = 0
			return &a
		}
	}
	return nil
}

// ByHandle returns the attributes of ino for the kernel's decoding of a
// file handle (open_by_handle_at, an NFS server) whose inode it no longer
// caches: the handle holds nothing but the inode number and a generation
// (always 0: Sluice never gives an inode number twice, see
// meta.Client.newIno), so the file is found by number, of any type,
// without a name. A file that no name outside the trash leads to any
// more, or whose inode is gone, is deleted as far as handles go and
// answers ESTALE, as a local file system does for a freed inode; so does
// a number Sluice never gave.
//
// It checks no permission: the kernel decodes handles only for callers
// that may search every directory (CAP_DAC_READ_SEARCH, which nfsd
// raises for it), and opening what it found is checked as any open.
func (v *VFS) ByHandle(ctx context.Context, ino meta.Ino) (*meta.Attr, error) {
	if f := internalByIno(ino); f != nil {
		return f.attr(v.started), nil
	}
	if sub, ok := v.meta.(subtreeMeta); ok {
		// A handle may name any inode of the volume: only those inside
		// the directory mounted are there.
		if err := sub.Reachable(ctx, ino); err != nil {
			return nil, err
		}
	}
	a, err := v.meta.GetAttr(ctx, ino)
	if errors.Is(err, meta.ErrNoInode) {
		v.forgetAhead(ino)
		return nil, syscall.ESTALE
	}
	if err != nil {
		return nil, err
	}
	if unlinked(a) {
		return nil, syscall.ESTALE
	}
	v.view.attr(a)
	return v.withPending(a), nil
}

// ParentOf returns the attributes of the parent of directory dir (the
// root's is the root), which the kernel asks for to connect a directory
// it found by handle to the tree (a LOOKUP of ".." on it). It reads the
// parent the directory's record names (Attr.Parent): two attribute reads
// (ByHandle of each) and no new metadata operation; like ByHandle it
// checks no permission, and a directory removed meanwhile is ESTALE.
func (v *VFS) ParentOf(ctx context.Context, dir meta.Ino) (*meta.Attr, error) {
	if dir == meta.RootIno {
		return v.ByHandle(ctx, meta.RootIno)
	}
	if internalByIno(dir) != nil {
		return nil, syscall.ENOTDIR
	}
	a, err := v.ByHandle(ctx, dir)
	if err != nil {
		return nil, err
	}
	if a.Type != store.TypeDir {
		return nil, syscall.ENOTDIR
	}
	if a.Parent == 0 {
		return nil, fmt.Errorf("directory %d records no parent: %w", dir, syscall.EIO)
	}
	return v.ByHandle(ctx, a.Parent)
}

// unlinked reports whether no name outside the trash leads to a, a
// non-directory.
func unlinked(a *meta.Attr) bool {
	return a.Type != store.TypeDir && (a.Nlink == 0 || meta.IsTrash(a.Parent))
}

// staleIfGone turns the error of a request on an inode that no longer
// exists (meta.ErrNoInode) into ESTALE, once per process and inode: the
// kernel reached the inode through a cached name, and retries the system
// call after looking the name up again.
func (v *VFS) staleIfGone(ctx context.Context, ino meta.Ino, err error) error {
	if errors.Is(err, meta.ErrNoInode) {
		v.forgetAhead(ino) // the kernel will look its name up again
	}
	if errors.Is(err, meta.ErrNoInode) && v.stale.refuse(ino, meta.CredOf(ctx).Pid) {
		return syscall.ESTALE
	}
	return err
}

// SetAttr changes attributes; a size change first commits buffered writes
// so that the truncation applies after them.
//
// On an open file, owner, mode and time changes that the file's
// attributes alone allow (meta.Client.PreviewAttr) are held back and
// commit with its buffered writes, in the same transaction, or together
// at close, fsync or heldDelay later: unpacking an archive sets times,
// owner and mode of every file it writes, and copying with cp -a times
// and mode, which this saves three and one transactions per file. This
// mount sees them at once; other mounts when they commit, with the
// writes, as they see the writes. Any other change first applies what
// was held.
func (v *VFS) SetAttr(ctx context.Context, ino meta.Ino, mask uint32, in *meta.Attr) (*meta.Attr, error) {
	if f := internalByIno(ino); f != nil {
		// A truncation is what a shell's > does before writing a
		// control request: there is nothing to truncate.
		if mask&^(meta.SetSize|meta.SetViaHandle|meta.SetKillSetID) != 0 {
			return nil, syscall.EPERM
		}
		return f.attr(v.started), nil
	}
	f := v.fileOf(ino)
	if f != nil {
		if a, ok := f.hold(ctx, mask, in); ok {
			return v.withPending(a), nil
		}
		flush := f.applyHeld
		if mask&meta.SetSize != 0 {
			flush = f.flush
		}
		if err := flush(ctx); err != nil {
			return nil, err
		}
	}
	a, err := v.meta.SetAttr(ctx, ino, mask, in)
	if err != nil {
		if mask&meta.SetViaHandle == 0 {
			err = v.staleIfGone(ctx, ino, err)
		}
		return nil, err
	}
	if f != nil {
		f.setAttr(a)
	}
	v.view.attr(a)
	return v.withPending(a), nil
}

// Mknod creates a node of any type but regular files opened at once
// (see Create).
func (v *VFS) Mknod(ctx context.Context, parent meta.Ino, name []byte, nn meta.NewNode) (*meta.Attr, error) {
	if internalByName(parent, name) != nil {
		return nil, syscall.EEXIST
	}
	a, err := v.meta.Mknod(ctx, parent, name, nn)
	if err == nil {
		v.view.entry(parent, name, a)
	}
	return a, err
}

// Link adds a name for ino.
func (v *VFS) Link(ctx context.Context, ino, parent meta.Ino, name []byte) (*meta.Attr, error) {
	if IsInternal(ino) {
		return nil, syscall.EPERM
	}
	if internalByName(parent, name) != nil {
		return nil, syscall.EEXIST
	}
	a, err := v.meta.Link(ctx, ino, parent, name)
	if err == nil {
		v.view.entry(parent, name, a)
	}
	return v.withPending(a), err
}

// Unlink removes a non-directory entry.
func (v *VFS) Unlink(ctx context.Context, parent meta.Ino, name []byte) error {
	if internalByName(parent, name) != nil {
		return syscall.EPERM
	}
	return v.meta.Unlink(ctx, parent, name)
}

// Rmdir removes an empty directory.
func (v *VFS) Rmdir(ctx context.Context, parent meta.Ino, name []byte) error {
	if internalByName(parent, name) != nil {
		return syscall.ENOTDIR
	}
	return v.meta.Rmdir(ctx, parent, name)
}

// Rename moves an entry; flags are meta.RenameNoReplace, RenameExchange
// and RenameWhiteout, as meta.Client.Rename takes them.
func (v *VFS) Rename(ctx context.Context, sp meta.Ino, sn []byte, dp meta.Ino, dn []byte, flags uint32) error {
	if internalByName(sp, sn) != nil || internalByName(dp, dn) != nil {
		return syscall.EPERM
	}
	return v.meta.Rename(ctx, sp, sn, dp, dn, flags)
}

// ReadLink returns a symlink's target.
func (v *VFS) ReadLink(ctx context.Context, ino meta.Ino) ([]byte, error) {
	t, err := v.meta.ReadLink(ctx, ino)
	return t, v.staleIfGone(ctx, ino, err)
}

// Access checks access(2) permissions.
func (v *VFS) Access(ctx context.Context, ino meta.Ino, mask uint32) error {
	if f := internalByIno(ino); f != nil {
		if meta.CredOf(ctx).IsRoot() || f.mode&uint16(mask) == uint16(mask) {
			return nil
		}
		return syscall.EACCES
	}
	return v.staleIfGone(ctx, ino, v.meta.Access(ctx, ino, mask))
}

// StatFS returns the volume's usage.
func (v *VFS) StatFS(ctx context.Context) (meta.StatFS, error) { return v.meta.StatFS(ctx) }

// GetXattr, ListXattr, SetXattr and RemoveXattr pass through to meta.

// xattrCaps is the attribute of file capabilities, which the kernel asks
// for before writes and chown of a file to drop it.
const xattrCaps = meta.XattrCaps

// GetXattr returns an extended attribute. The capabilities of an open
// file known to have none are answered without the engine.
func (v *VFS) GetXattr(ctx context.Context, ino meta.Ino, name string) ([]byte, error) {
	if IsInternal(ino) {
		return nil, syscall.ENODATA
	}
	f := v.fileOf(ino)
	var gen uint64
	if name == xattrCaps && f != nil {
		f.mu.Lock()
		none := f.mu.noCaps || f.mu.noXattrs
		gen = f.mu.xgen
		f.mu.Unlock()
		if none {
			return nil, syscall.ENODATA
		}
	}
	val, err := v.meta.GetXattr(ctx, ino, name)
	if name == xattrCaps && f != nil && errors.Is(err, syscall.ENODATA) {
		f.mu.Lock()
		if f.mu.xgen == gen {
			f.mu.noCaps = true
		}
		f.mu.Unlock()
	}
	return val, v.staleIfGone(ctx, ino, err)
}

// ListXattr lists extended attribute names; an open file known to have
// none answers without the engine.
func (v *VFS) ListXattr(ctx context.Context, ino meta.Ino) ([]string, error) {
	if IsInternal(ino) {
		return nil, nil
	}
	f := v.fileOf(ino)
	var gen uint64
	if f != nil {
		f.mu.Lock()
		none := f.mu.noXattrs
		gen = f.mu.xgen
		f.mu.Unlock()
		if none {
			return nil, nil
		}
	}
	names, err := v.meta.ListXattr(ctx, ino)
	if f != nil && err == nil && len(names) == 0 {
		f.mu.Lock()
		if f.mu.xgen == gen {
			f.mu.noXattrs = true
		}
		f.mu.Unlock()
	}
	return names, v.staleIfGone(ctx, ino, err)
}

// SetXattr sets an extended attribute.
func (v *VFS) SetXattr(ctx context.Context, ino meta.Ino, name string, value []byte, flags uint32) error {
	if IsInternal(ino) {
		return syscall.EPERM
	}
	if !v.meta.XattrSupported(name) {
		return syscall.EOPNOTSUPP // changes nothing: held changes stay held, known xattrs known
	}
	v.capsMayChange(ino, name)
	if err := v.applyHeld(ctx, ino); err != nil {
		return err
	}
	return v.meta.SetXattr(ctx, ino, name, value, flags)
}

// applyHeld applies the attribute changes held back on the open file ino
// (see SetAttr), before a change they must precede.
func (v *VFS) applyHeld(ctx context.Context, ino meta.Ino) error {
	if f := v.fileOf(ino); f != nil {
		return f.applyHeld(ctx)
	}
	return nil
}

// capsMayChange forgets that the open file ino has no attributes, and no
// capabilities when name is their attribute (or might be: a failed set
// leaves it unknown).
func (v *VFS) capsMayChange(ino meta.Ino, name string) {
	v.xattrGen.Add(1)
	if f := v.fileOf(ino); f != nil {
		f.mu.Lock()
		f.mu.xgen++
		f.mu.noXattrs = false
		if name == xattrCaps {
			f.mu.noCaps = false
		}
		f.mu.Unlock()
	}
}

// RemoveXattr removes an extended attribute.
func (v *VFS) RemoveXattr(ctx context.Context, ino meta.Ino, name string) error {
	if IsInternal(ino) {
		return syscall.EPERM
	}
	if !v.meta.XattrSupported(name) {
		return syscall.EOPNOTSUPP
	}
	if err := v.applyHeld(ctx, ino); err != nil {
		return err
	}
	return v.meta.RemoveXattr(ctx, ino, name)
}

// Close commits every buffered write and held-back attribute change of
// every open file, giving up on the changes when ctx ends, and stops
// background work.
func (v *VFS) Close(ctx context.Context) error {
	v.stop()
	v.mu.Lock()
	files := make([]*openFile, 0, len(v.mu.files))
	for _, f := range v.mu.files {
		files = append(files, f)
	}
	v.mu.Unlock()
	var first error
	for _, f := range files {
		if err := f.flushIn(ctx, ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}
