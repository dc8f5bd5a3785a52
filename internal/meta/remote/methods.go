package remote

import (
	"context"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/metaserver/wire"
)

// attrCall runs a method whose result is attributes.
func (c *Client) attrCall(ctx context.Context, method uint64, fill func(*wire.Buf), after func(a *meta.Attr, err error)) (*meta.Attr, error) {
	var a *meta.Attr
	var done func(error)
	if after != nil {
		done = func(err error) { after(a, err) }
	}
	err := c.call(ctx, method, fill, func(r *wire.Reader) { a = getAttr(r) }, done)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// change names what a call writes, for the session's statahead (see
// meta.Client.ChangeBegins): nodes, whether their listing goes too, and
// entries.
type change struct {
	nodes   []meta.Ino
	listing bool
	parents []meta.Ino
	names   [][]byte
}

// begin forgets what ch writes from the statahead's listings and keeps
// it from keeping a listing read until the returned function, which
// forgets it again, is called after the call.
func (c *Client) begin(ch change) func() {
	end := c.local.ChangeBegins()
	forget := func() {
		for _, ino := range ch.nodes {
			c.local.ForgetNode(ino, ch.listing)
		}
		for i, p := range ch.parents {
			c.local.ForgetEntry(p, ch.names[i])
		}
	}
	forget()
	return func() {
		forget()
		end()
	}
}

func nodes(inos ...meta.Ino) change { return change{nodes: inos} }

// getDirs reads the attributes of the directories a call changed the
// entries of (putDirs).
func getDirs(r *wire.Reader) []*meta.Attr {
	n := r.Count(1)
	as := make([]*meta.Attr, 0, n)
	for i := 0; i < n; i++ {
		as = append(as, getAttr(r))
	}
	return as
}

// entriesCall runs a method that changes entries of directories and
// returns their attributes after its own results; the session's client
// remembers them (meta.Client.RecentRecord). With all, everything it
// remembered is forgotten first (a directory may be removed or moved).
func (c *Client) entriesCall(ctx context.Context, method uint64, all bool, fill func(*wire.Buf), read func(*wire.Reader), after func(error)) error {
	if all {
		c.local.RecentForget()
	}
	gen := c.local.RecentBegin()
	var dirs []*meta.Attr
	err := c.call(ctx, method, fill, func(r *wire.Reader) {
		if read != nil {
			read(r)
		}
		dirs = getDirs(r)
	}, after)
	if err == nil {
		c.local.RecentRecord(gen, dirs...)
	}
	return err
}

// attrEntriesCall is entriesCall for a method whose result is
// attributes.
func (c *Client) attrEntriesCall(ctx context.Context, method uint64, fill func(*wire.Buf), after func(*meta.Attr, error)) (*meta.Attr, error) {
	var a *meta.Attr
	var done func(error)
	if after != nil {
		done = func(err error) { after(a, err) }
	}
	if err := c.entriesCall(ctx, method, false, fill, func(r *wire.Reader) { a = getAttr(r) }, done); err != nil {
		return nil, err
	}
	return a, nil
}

// forgetDir forgets the remembered attributes of ino, about to change
// otherwise than by its entries, and returns the function that forgets
// them again once the change is done.
func (c *Client) forgetDir(ino meta.Ino) func() {
	c.local.RecentForget(ino)
	return func() { c.local.RecentForget(ino) }
}

// LookupAhead is the session's own client's statahead: it answers the
// kernel's lookups from a listing of the directory read a moment ago
// (vfs.LookerAhead); what this Client changes is forgotten from it.
func (c *Client) LookupAhead(ctx context.Context, parent meta.Ino, name []byte) (*meta.Attr, time.Duration, error) {
	return c.local.LookupAhead(ctx, parent, name)
}

// ForgetAhead is the session's own client's.
func (c *Client) ForgetAhead(ino meta.Ino) { c.local.ForgetAhead(ino) }

// Lookup finds name in parent.
func (c *Client) Lookup(ctx context.Context, parent meta.Ino, name []byte) (*meta.Attr, error) {
	return c.attrCall(ctx, mLookup, func(b *wire.Buf) {
		b.Uvarint(uint64(parent))
		b.Bytes(name)
	}, nil)
}

// GetAttr returns the attributes of ino.
func (c *Client) GetAttr(ctx context.Context, ino meta.Ino) (*meta.Attr, error) {
	if a, ok := c.local.RecentDir(ino); ok {
		return a, nil // this session changed its entries a moment ago
	}
	return c.attrCall(ctx, mGetAttr, func(b *wire.Buf) { b.Uvarint(uint64(ino)) }, nil)
}

// SetAttr changes the attributes of ino that mask names.
func (c *Client) SetAttr(ctx context.Context, ino meta.Ino, mask uint32, in *meta.Attr) (*meta.Attr, error) {
	defer c.forgetDir(ino)()
	defer c.begin(change{nodes: []meta.Ino{ino}, listing: true})()
	return c.attrCall(ctx, mSetAttr, func(b *wire.Buf) {
		b.Uvarint(uint64(ino))
		b.Uvarint(uint64(mask))
		putAttr(b, in)
	}, nil)
}

// PreviewAttr is the session's own client's: it needs no engine.
func (c *Client) PreviewAttr(ctx context.Context, a *meta.Attr, mask uint32, in *meta.Attr) (*meta.Attr, bool) {
	return c.local.PreviewAttr(ctx, a, mask, in)
}

// ApplyAttrChanges applies changes held back by the mount.
func (c *Client) ApplyAttrChanges(ctx context.Context, ino meta.Ino, changes []meta.AttrChange) (*meta.Attr, error) {
	defer c.forgetDir(ino)()
	defer c.begin(change{nodes: []meta.Ino{ino}, listing: true})()
	return c.attrCall(ctx, mApplyAttrChanges, func(b *wire.Buf) {
		b.Uvarint(uint64(ino))
		putChanges(b, changes)
	}, nil)
}

// Access checks the caller's access to ino.
func (c *Client) Access(ctx context.Context, ino meta.Ino, mask uint32) error {
	return c.call(ctx, mAccess, func(b *wire.Buf) {
		b.Uvarint(uint64(ino))
		b.Uvarint(uint64(mask))
	}, nil, nil)
}

// RecordsAtime reports whether the session's atime mode records reads.
func (c *Client) RecordsAtime() bool {
	return c.atime != "" && c.atime != meta.AtimeNone
}

// TouchAtime updates the access time of ino as the atime mode says; in
// the default mode (none), or when a, the attributes the caller holds,
// show that the mode records nothing, it sends nothing.
func (c *Client) TouchAtime(ctx context.Context, ino meta.Ino, a *meta.Attr) error {
	if !c.RecordsAtime() || a != nil && !meta.AtimeDue(c.atime, a, time.Now()) {
		return nil
	}
	defer c.begin(nodes(ino))()
	defer c.forgetDir(ino)()
	return c.call(ctx, mTouchAtime, func(b *wire.Buf) {
		b.Uvarint(uint64(ino))
		putAttr(b, a)
	}, nil, nil)
}

// StatFS returns the volume's space and inodes.
func (c *Client) StatFS(ctx context.Context) (meta.StatFS, error) {
	var st meta.StatFS
	err := c.call(ctx, mStatFS, nil, func(r *wire.Reader) {
		st = meta.StatFS{TotalSpace: r.Uvarint(), AvailSpace: r.Uvarint(), UsedInodes: r.Uvarint(), AvailInodes: r.Uvarint()}
	}, nil)
	return st, err
}

func nodeArgs(parent meta.Ino, name []byte, nn meta.NewNode) func(*wire.Buf) {
	return func(b *wire.Buf) {
		b.Uvarint(uint64(parent))
		b.Bytes(name)
		putNewNode(b, nn)
	}
}

// Mknod creates name in parent.
func (c *Client) Mknod(ctx context.Context, parent meta.Ino, name []byte, nn meta.NewNode) (*meta.Attr, error) {
	defer c.begin(change{nodes: []meta.Ino{parent}, parents: []meta.Ino{parent}, names: [][]byte{name}})()
	return c.attrEntriesCall(ctx, mMknod, nodeArgs(parent, name, nn), nil)
}

// Create creates a regular file name in parent and counts it open, in
// one call (vfs.Creator).
func (c *Client) Create(ctx context.Context, parent meta.Ino, name []byte, nn meta.NewNode) (*meta.Attr, error) {
	defer c.begin(change{nodes: []meta.Ino{parent}, parents: []meta.Ino{parent}, names: [][]byte{name}})()
	return c.attrEntriesCall(ctx, mCreate, nodeArgs(parent, name, nn), func(a *meta.Attr, err error) {
		if err == nil {
			c.count(a.Ino, 1)
		}
	})
}

// Created counts a handle of a file the caller made with Mknod.
func (c *Client) Created(ino meta.Ino) {
	// Counted here even if the server cannot be told now: a later
	// attach sends the count.
	c.call(context.Background(), mCreated, func(b *wire.Buf) { b.Uvarint(uint64(ino)) }, nil,
		func(error) { c.count(ino, 1) })
}

// Tmpfile makes an unnamed regular file in parent and counts it open, in
// one call (vfs.TmpfileCreator). No entry changes: the file has no name
// until Link gives it one. A call the server ran before a restart that
// lost its reply runs again and makes another file; the first, held by
// no handle, goes when the session ends.
func (c *Client) Tmpfile(ctx context.Context, parent meta.Ino, nn meta.NewNode) (*meta.Attr, error) {
	return c.attrCall(ctx, mTmpfile, func(b *wire.Buf) {
		b.Uvarint(uint64(parent))
		putNewNode(b, nn)
	}, func(a *meta.Attr, err error) {
		if err == nil {
			c.count(a.Ino, 1)
		}
	})
}

// count adds n to the handles of ino counted open.
func (c *Client) count(ino meta.Ino, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open[ino] += n
	if c.open[ino] <= 0 {
		delete(c.open, ino)
	}
}

// Link adds a name for ino.
func (c *Client) Link(ctx context.Context, ino, newParent meta.Ino, name []byte) (*meta.Attr, error) {
	defer c.begin(change{nodes: []meta.Ino{ino, newParent}, parents: []meta.Ino{newParent}, names: [][]byte{name}})()
	return c.attrEntriesCall(ctx, mLink, func(b *wire.Buf) {
		b.Uvarint(uint64(ino))
		b.Uvarint(uint64(newParent))
		b.Bytes(name)
	}, nil)
}

func nameArgs(parent meta.Ino, name []byte) func(*wire.Buf) {
	return func(b *wire.Buf) {
		b.Uvarint(uint64(parent))
		b.Bytes(name)
	}
}

// Unlink removes a name of a non-directory.
func (c *Client) Unlink(ctx context.Context, parent meta.Ino, name []byte) error {
	defer c.begin(change{nodes: []meta.Ino{parent}, parents: []meta.Ino{parent}, names: [][]byte{name}})()
	return c.entriesCall(ctx, mUnlink, false, nameArgs(parent, name), nil, nil)
}

// Rmdir removes an empty directory.
func (c *Client) Rmdir(ctx context.Context, parent meta.Ino, name []byte) error {
	defer c.begin(change{nodes: []meta.Ino{parent}, parents: []meta.Ino{parent}, names: [][]byte{name}})()
	return c.entriesCall(ctx, mRmdir, true, nameArgs(parent, name), nil, nil)
}

// Rename moves a name.
func (c *Client) Rename(ctx context.Context, srcParent meta.Ino, srcName []byte, dstParent meta.Ino, dstName []byte, flags uint32) error {
	defer c.begin(change{nodes: []meta.Ino{srcParent, dstParent}, parents: []meta.Ino{srcParent, dstParent}, names: [][]byte{srcName, dstName}})()
	return c.entriesCall(ctx, mRename, true, func(b *wire.Buf) {
		b.Uvarint(uint64(srcParent))
		b.Bytes(srcName)
		b.Uvarint(uint64(dstParent))
		b.Bytes(dstName)
		b.Uvarint(uint64(flags))
	}, nil, nil)
}

// ReadLink returns a symlink's target.
func (c *Client) ReadLink(ctx context.Context, ino meta.Ino) ([]byte, error) {
	var t []byte
	err := c.call(ctx, mReadLink, func(b *wire.Buf) { b.Uvarint(uint64(ino)) }, func(r *wire.Reader) { t = r.Bytes() }, nil)
	return t, err
}

// Open checks access for flags and counts a handle of ino.
func (c *Client) Open(ctx context.Context, ino meta.Ino, flags uint32) (*meta.Attr, error) {
	return c.attrCall(ctx, mOpen, func(b *wire.Buf) {
		b.Uvarint(uint64(ino))
		b.Uvarint(uint64(flags))
	}, func(a *meta.Attr, err error) {
		if err == nil {
			c.count(ino, 1)
		}
	})
}

// Release forgets a handle of ino.
func (c *Client) Release(ctx context.Context, ino meta.Ino) error {
	defer c.begin(nodes(ino))()
	return c.call(ctx, mRelease, func(b *wire.Buf) { b.Uvarint(uint64(ino)) }, nil,
		func(error) { c.count(ino, -1) }) // the server forgot it, whatever else failed
}

// OpenDir checks that ino is a directory the caller may read.
func (c *Client) OpenDir(ctx context.Context, ino meta.Ino) (*meta.Attr, error) {
	return c.attrCall(ctx, mOpenDir, func(b *wire.Buf) { b.Uvarint(uint64(ino)) }, nil)
}

// ReadDir lists up to limit entries of ino after the name after.
func (c *Client) ReadDir(ctx context.Context, ino meta.Ino, after []byte, limit int, plus bool) ([]meta.Entry, error) {
	var es []meta.Entry
	err := c.call(ctx, mReadDir, func(b *wire.Buf) {
		b.Uvarint(uint64(ino))
		b.Bytes(after)
		b.Varint(int64(limit))
		putBool(b, plus)
		putBool(b, after != nil)
	}, func(r *wire.Reader) {
		n := r.Count(3)
		es = make([]meta.Entry, n)
		for i := range es {
			es[i] = meta.Entry{Name: r.Bytes(), Ino: meta.Ino(r.Uvarint()), Type: r.Byte()}
			if plus {
				es[i].Attr = getAttr(r)
			}
		}
	}, nil)
	if err != nil {
		return nil, err
	}
	return es, nil
}

// ReadChunk returns the slice list of chunk idx of ino.
func (c *Client) ReadChunk(ctx context.Context, ino meta.Ino, idx uint32) ([]meta.Slice, error) {
	var ss []meta.Slice
	err := c.call(ctx, mReadChunk, func(b *wire.Buf) {
		b.Uvarint(uint64(ino))
		b.Uvarint(uint64(idx))
	}, func(r *wire.Reader) {
		n := r.Count(5)
		if n > 0 {
			ss = make([]meta.Slice, n)
		}
		for i := range ss {
			ss[i] = getSlice(r)
		}
	}, nil)
	if err != nil {
		return nil, err
	}
	return ss, nil
}

// NewSliceID is the session's own client's: it hands ids out of batches
// it reserves, with no round trip for most.
func (c *Client) NewSliceID(ctx context.Context) (uint64, error) { return c.local.NewSliceID(ctx) }

// WriteSliceAttr commits a slice written into chunk idx of ino, with the
// attribute changes held back for it.
func (c *Client) WriteSliceAttr(ctx context.Context, ino meta.Ino, idx uint32, s meta.Slice, changes []meta.AttrChange, unsynced bool) (meta.Version, *meta.Attr, error) {
	defer c.begin(nodes(ino))()
	var v meta.Version
	var a *meta.Attr
	err := c.call(ctx, mWriteSliceAttr, func(b *wire.Buf) {
		b.Uvarint(uint64(ino))
		b.Uvarint(uint64(idx))
		putSlice(b, s)
		putChanges(b, changes)
		putBool(b, unsynced)
	}, func(r *wire.Reader) {
		v = meta.Version{Length: r.Uvarint(), Mtime: r.Varint(), Ctime: r.Varint(),
			Mtimensec: uint32(r.Uvarint()), Ctimensec: uint32(r.Uvarint())}
		a = getAttr(r)
	}, nil)
	if err != nil {
		return meta.Version{}, nil, err
	}
	return v, a, nil
}

// Fallocate allocates, punches or zeroes a range of ino.
func (c *Client) Fallocate(ctx context.Context, ino meta.Ino, mode uint32, off, length uint64) error {
	defer c.begin(nodes(ino))()
	return c.call(ctx, mFallocate, func(b *wire.Buf) {
		b.Uvarint(uint64(ino))
		b.Uvarint(uint64(mode))
		b.Uvarint(off)
		b.Uvarint(length)
	}, nil, nil)
}

// CopyFileRange copies a range of src into dst by reference.
func (c *Client) CopyFileRange(ctx context.Context, src meta.Ino, srcOff uint64, dst meta.Ino, dstOff uint64, length uint64) (uint64, *meta.Attr, error) {
	defer c.begin(nodes(dst))()
	var n uint64
	var a *meta.Attr
	err := c.call(ctx, mCopyFileRange, func(b *wire.Buf) {
		b.Uvarint(uint64(src))
		b.Uvarint(srcOff)
		b.Uvarint(uint64(dst))
		b.Uvarint(dstOff)
		b.Uvarint(length)
	}, func(r *wire.Reader) {
		n = r.Uvarint()
		a = getAttr(r)
	}, nil)
	if err != nil {
		return 0, nil, err
	}
	return n, a, nil
}

// Flock takes or drops a BSD lock of owner on ino.
func (c *Client) Flock(ctx context.Context, ino meta.Ino, owner uint64, typ uint32, block bool) (*meta.Attr, error) {
	return c.attrCall(waiting(ctx, block), mFlock, func(b *wire.Buf) {
		b.Uvarint(uint64(ino))
		b.Uvarint(owner)
		b.Uvarint(uint64(typ))
		putBool(b, block)
	}, nil)
}

// GetLk tests a POSIX lock.
func (c *Client) GetLk(ctx context.Context, ino meta.Ino, owner uint64, lk meta.PosixLock) (meta.PosixLock, error) {
	var out meta.PosixLock
	err := c.call(ctx, mGetLk, func(b *wire.Buf) {
		b.Uvarint(uint64(ino))
		b.Uvarint(owner)
		putLock(b, lk)
	}, func(r *wire.Reader) { out = getLock(r) }, nil)
	return out, err
}

// SetLk takes or drops a POSIX lock.
func (c *Client) SetLk(ctx context.Context, ino meta.Ino, owner uint64, lk meta.PosixLock, block bool) (*meta.Attr, error) {
	if lk.Type != meta.LockUnlock {
		c.mu.Lock()
		c.posix[ino] = true // before the server may hold it
		c.mu.Unlock()
	}
	return c.attrCall(waiting(ctx, block), mSetLk, func(b *wire.Buf) {
		b.Uvarint(uint64(ino))
		b.Uvarint(owner)
		putLock(b, lk)
		putBool(b, block)
	}, nil)
}

// ReleaseLocks drops the POSIX locks owner holds on ino, as closing any
// of a process's descriptors of a file does. It asks the server only for
// an inode on which this session ever asked for one: most closes have
// nothing to release.
func (c *Client) ReleaseLocks(ctx context.Context, ino meta.Ino, owner uint64) error {
	c.mu.Lock()
	held := c.posix[ino]
	c.mu.Unlock()
	if !held {
		return nil
	}
	return c.call(ctx, mReleaseLocks, func(b *wire.Buf) {
		b.Uvarint(uint64(ino))
		b.Uvarint(owner)
	}, nil, nil)
}

// XattrSupported is the session's own client's: it needs no engine.
func (c *Client) XattrSupported(name string) bool { return c.local.XattrSupported(name) }

// NoXattrs is the session's own client's: it needs no engine.
func (c *Client) NoXattrs(a *meta.Attr) bool { return c.local.NoXattrs(a) }

// GetXattr returns an extended attribute's value.
func (c *Client) GetXattr(ctx context.Context, ino meta.Ino, name string) ([]byte, error) {
	var v []byte
	err := c.call(ctx, mGetXattr, func(b *wire.Buf) {
		b.Uvarint(uint64(ino))
		b.Bytes([]byte(name))
	}, func(r *wire.Reader) { v = r.Bytes() }, nil)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// ListXattr lists the names of ino's extended attributes.
func (c *Client) ListXattr(ctx context.Context, ino meta.Ino) ([]string, error) {
	var names []string
	err := c.call(ctx, mListXattr, func(b *wire.Buf) { b.Uvarint(uint64(ino)) }, func(r *wire.Reader) {
		n := r.Count(1)
		for i := 0; i < n; i++ {
			names = append(names, string(r.Bytes()))
		}
	}, nil)
	if err != nil {
		return nil, err
	}
	return names, nil
}

// SetXattr sets an extended attribute.
func (c *Client) SetXattr(ctx context.Context, ino meta.Ino, name string, value []byte, flags uint32) error {
	defer c.forgetDir(ino)()
	defer c.begin(nodes(ino))()
	return c.call(ctx, mSetXattr, func(b *wire.Buf) {
		b.Uvarint(uint64(ino))
		b.Bytes([]byte(name))
		b.Bytes(value)
		b.Uvarint(uint64(flags))
	}, nil, nil)
}

// RemoveXattr removes an extended attribute.
func (c *Client) RemoveXattr(ctx context.Context, ino meta.Ino, name string) error {
	defer c.forgetDir(ino)()
	defer c.begin(nodes(ino))()
	return c.call(ctx, mRemoveXattr, func(b *wire.Buf) {
		b.Uvarint(uint64(ino))
		b.Bytes([]byte(name))
	}, nil, nil)
}
