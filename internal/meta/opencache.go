package meta

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// openCache keeps the attributes with which Open found regular files,
// and OpenDir directories, in the engine, so that opening one of them
// again within Config.OpenCache needs no round trip (OpenCached,
// OpenDirCached). It is on when Config.OpenCache is set.
//
// What it gives up: an open answered from it does not see another
// client's change of the file made since the attributes were read, for
// up to OpenCache; nor, for a directory whose listing the kernel keeps
// (vfs.Config.ReaddirCache), another client's change of its entries.
// Close-to-open consistency across mounts then holds only after that
// long (as with the kernel's attribute cache for stat).
// Locks are not affected: a lock reads the engine, and the mount drops
// the file's entry here when it finds the file changed (ForgetAhead).
//
// This client's own changes: every write of a node through the client's
// transactions drops the node's entry before the transaction commits
// (and every write of an entry, its directory's), and attributes read
// while such a write was under way are not kept (gen), so an open never
// answers from attributes older than this client's own change.
type openCache struct {
	ttl time.Duration // 0: off
	now func() time.Time

	mu      sync.Mutex
	gen     uint64 // bumped when a write of nodes begins and ends, and by forget
	writing int    // transactions writing nodes or entries, under way
	files   map[Ino]openedAt
}

// openedAt is a file's attributes as an Open read them at at.
type openedAt struct {
	attr Attr
	at   time.Time
}

// maxOpenCached bounds the files the open cache holds; past it, expired
// entries go, and all of them when none has expired.
const maxOpenCached = 1 << 16

func (o *openCache) on() bool { return o.ttl > 0 }

// begin returns the generation attributes read from now must still see
// to be kept; ok is false while a write is under way or the cache is off.
func (o *openCache) begin() (gen uint64, ok bool) {
	if !o.on() {
		return 0, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gen, o.writing == 0
}

// keep stores a, read from the engine at at, unless a write began or
// ended since gen.
func (o *openCache) keep(gen uint64, at time.Time, a *Attr) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if gen != o.gen || o.writing != 0 {
		return
	}
	if o.files == nil {
		o.files = map[Ino]openedAt{}
	}
	if len(o.files) >= maxOpenCached {
		o.pruneLocked(at)
	}
	o.files[a.Ino] = openedAt{attr: *a, at: at}
}

// pruneLocked makes room in a full cache: it drops the expired entries,
// or every entry when none has expired.
func (o *openCache) pruneLocked(now time.Time) {
	for ino, e := range o.files {
		if now.Sub(e.at) >= o.ttl {
			delete(o.files, ino)
		}
	}
	if len(o.files) >= maxOpenCached {
		clear(o.files)
	}
}

// get returns the attributes of ino read less than ttl ago.
func (o *openCache) get(ino Ino) (*Attr, bool) {
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.files[ino]
	if !ok {
		return nil, false
	}
	if now.Sub(e.at) >= o.ttl {
		delete(o.files, ino)
		return nil, false
	}
	a := e.attr
	return &a, true
}

// forget drops ino, and keeps nothing being read meanwhile.
func (o *openCache) forget(ino Ino) {
	o.mu.Lock()
	o.gen++
	delete(o.files, ino)
	o.mu.Unlock()
}

func (o *openCache) writeBegan() {
	o.mu.Lock()
	o.gen++
	o.writing++
	o.mu.Unlock()
}

func (o *openCache) writeEnded() {
	o.mu.Lock()
	o.gen++
	o.writing--
	o.mu.Unlock()
}

func (o *openCache) node(n *store.Node) {
	o.mu.Lock()
	delete(o.files, n.Ino)
	o.mu.Unlock()
}

func (o *openCache) deleted(ino Ino) {
	o.mu.Lock()
	delete(o.files, ino)
	o.mu.Unlock()
}

// entry drops the directory parent, whose entries are being written: a
// change of them within Config.DirMtimeSkip may leave its node alone.
func (o *openCache) entry(parent Ino, _ []byte) {
	o.mu.Lock()
	delete(o.files, parent)
	o.mu.Unlock()
}

// OpenCached is Open answered from the attributes an Open of the regular
// file ino on this client read from the engine less than Config.OpenCache
// ago, with no round trip; see openCache for what it gives up. It
// reports false, having counted no handle, when it has no such
// attributes or they cannot settle the open alone (an access ACL for a
// caller other than root, a refusal whose error Open must give): the
// caller then opens with Open, which reads the engine and refreshes
// them.
func (c *Client) OpenCached(ctx context.Context, ino Ino, flags uint32) (*Attr, bool) {
	mask := openMask(flags)
	if mask&MayWrite != 0 && c.writable() != nil {
		return nil, false
	}
	a, ok := c.cachedFor(ctx, ino, store.TypeFile, mask)
	if !ok || openRefused(a, mask, flags) != nil {
		return nil, false
	}
	c.mu.Lock()
	c.mu.open[ino]++
	c.mu.Unlock()
	return a, true
}

// OpenDirCached is OpenDir answered from the attributes an OpenDir of
// directory ino on this client read from the engine less than
// Config.OpenCache ago, as OpenCached is for files: false when it has
// none, or they do not let the caller in on their own.
func (c *Client) OpenDirCached(ctx context.Context, ino Ino) (*Attr, bool) {
	return c.cachedFor(ctx, ino, store.TypeDir, MayRead)
}

// cachedFor returns the open cache's attributes of ino, a node of type
// typ, when they let the caller in for mask by its mode bits alone.
func (c *Client) cachedFor(ctx context.Context, ino Ino, typ uint8, mask uint32) (*Attr, bool) {
	if !c.opened.on() {
		return nil, false
	}
	a, ok := c.opened.get(ino)
	if !ok || a.Type != typ {
		return nil, false
	}
	cred := CredOf(ctx)
	if !cred.IsRoot() && a.Flags&FlagACL != 0 || !permits(cred, a, mask) {
		return nil, false
	}
	return a, true
}

// FlagOpenExec is the kernel's __FMODE_EXEC among the flags of an open:
// the open execve(2) makes of the program (and of an ELF interpreter),
// which asks for execute permission and no read permission, so that a
// program of mode 0111 runs as it does on a local file system.
const FlagOpenExec = 0x20

// openMask is the access an open(2) with flags asks for.
func openMask(flags uint32) uint32 {
	var mask uint32
	switch flags & syscall.O_ACCMODE {
	case syscall.O_RDONLY:
		mask = MayRead
		if flags&FlagOpenExec != 0 {
			mask = MayExec
		}
	case syscall.O_WRONLY:
		mask = MayWrite
	case syscall.O_RDWR:
		mask = MayRead | MayWrite
	}
	if flags&syscall.O_TRUNC != 0 {
		mask |= MayWrite
	}
	return mask
}

// openRefused returns why n may not be opened for mask with flags, beyond
// permissions: a directory for writing, an immutable file, an append-only
// one without O_APPEND.
func openRefused(n *Attr, mask, flags uint32) error {
	if mask&MayWrite == 0 {
		return nil
	}
	if n.Type == store.TypeDir {
		return syscall.EISDIR
	}
	if n.Flags&FlagImmutable != 0 || n.Flags&FlagAppend != 0 && flags&syscall.O_APPEND == 0 {
		return syscall.EPERM
	}
	return nil
}
