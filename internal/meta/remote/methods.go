package remote

import (
	"context"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/wire"
)

// The stubs of meta.Ops: each sends its operation's entry of wire's
// table, and keeps what the mount's side keeps around it: the session's
// caches (meta.Caches), the handles counted open, the inodes locked.

var (
	_ meta.Ops            = (*Client)(nil)
	_ meta.Creator        = (*Client)(nil)
	_ meta.TmpfileCreator = (*Client)(nil)
	_ meta.LookerAhead    = (*Client)(nil)
)

// change names what a call writes, for the session's statahead (see
// meta.Caches.ChangeBegins): nodes, whether their listing goes too, and
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
	end := c.caches.ChangeBegins()
	forget := func() {
		for _, ino := range ch.nodes {
			c.caches.ForgetNode(ino, ch.listing)
		}
		for i, p := range ch.parents {
			c.caches.ForgetEntry(p, ch.names[i])
		}
	}
	forget()
	return func() {
		forget()
		end()
	}
}

func nodes(inos ...meta.Ino) change { return change{nodes: inos} }

// entry names the change of name in parent, and of the nodes inos.
func entry(parent meta.Ino, name []byte, inos ...meta.Ino) change {
	return change{nodes: append(inos, parent), parents: []meta.Ino{parent}, names: [][]byte{name}}
}

// forgetDir forgets the remembered attributes of ino, about to change
// otherwise than by its entries, and returns the function that forgets
// them again once the change is done.
func (c *Client) forgetDir(ino meta.Ino) func() {
	c.caches.ForgetDirs(ino)
	return func() { c.caches.ForgetDirs(ino) }
}

// counted returns the after of a call that counts a handle of the node
// it returns open when it succeeds.
func (c *Client) counted(ino meta.Ino) func(*meta.Attr, error) {
	return func(a *meta.Attr, err error) {
		if err == nil {
			if ino == 0 {
				ino = a.Ino
			}
			c.count(ino, 1)
		}
	}
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

// LookupAhead is the session's own statahead: it answers the kernel's
// lookups from a listing of the directory read a moment ago
// (meta.LookerAhead); what this Client changes is forgotten from it.
func (c *Client) LookupAhead(ctx context.Context, parent meta.Ino, name []byte) (*meta.Attr, time.Duration, error) {
	return c.local.LookupAhead(ctx, parent, name)
}

// ForgetAhead is the session's own.
func (c *Client) ForgetAhead(ino meta.Ino) { c.local.ForgetAhead(ino) }

// Lookup finds name in parent.
func (c *Client) Lookup(ctx context.Context, parent meta.Ino, name []byte) (*meta.Attr, error) {
	return call(ctx, c, wire.Lookup, wire.T2[meta.Ino, []byte]{A: parent, B: name})
}

// GetAttr returns the attributes of ino.
func (c *Client) GetAttr(ctx context.Context, ino meta.Ino) (*meta.Attr, error) {
	if a, ok := c.caches.Dir(ino); ok {
		return a, nil // this session changed its entries a moment ago
	}
	return call(ctx, c, wire.GetAttr, ino)
}

// SetAttr changes the attributes of ino that mask names.
func (c *Client) SetAttr(ctx context.Context, ino meta.Ino, mask uint32, in *meta.Attr) (*meta.Attr, error) {
	defer c.forgetDir(ino)()
	defer c.begin(change{nodes: []meta.Ino{ino}, listing: true})()
	return call(ctx, c, wire.SetAttr, wire.T3[meta.Ino, uint32, *meta.Attr]{A: ino, B: mask, C: in})
}

// PreviewAttr is the session's own: it needs no engine.
func (c *Client) PreviewAttr(ctx context.Context, a *meta.Attr, mask uint32, in *meta.Attr) (*meta.Attr, bool) {
	return c.local.PreviewAttr(ctx, a, mask, in)
}

// ApplyAttrChanges applies changes held back by the mount.
func (c *Client) ApplyAttrChanges(ctx context.Context, ino meta.Ino, changes []meta.AttrChange) (*meta.Attr, error) {
	defer c.forgetDir(ino)()
	defer c.begin(change{nodes: []meta.Ino{ino}, listing: true})()
	return call(ctx, c, wire.ApplyAttrChanges, wire.T2[meta.Ino, []meta.AttrChange]{A: ino, B: changes})
}

// Access checks the caller's access to ino.
func (c *Client) Access(ctx context.Context, ino meta.Ino, mask uint32) error {
	_, err := call(ctx, c, wire.Access, wire.T2[meta.Ino, uint32]{A: ino, B: mask})
	return err
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
	_, err := call(ctx, c, wire.TouchAtime, wire.T2[meta.Ino, *meta.Attr]{A: ino, B: a})
	return err
}

// StatFS returns the volume's space and inodes.
func (c *Client) StatFS(ctx context.Context) (meta.StatFS, error) {
	return call(ctx, c, wire.StatFS, wire.None{})
}

// Mknod creates name in parent.
func (c *Client) Mknod(ctx context.Context, parent meta.Ino, name []byte, nn meta.NewNode) (*meta.Attr, error) {
	defer c.begin(entry(parent, name))()
	return call(ctx, c, wire.Mknod, wire.T3[meta.Ino, []byte, meta.NewNode]{A: parent, B: name, C: nn})
}

// Create creates a regular file name in parent and counts it open, in
// one call (meta.Creator).
func (c *Client) Create(ctx context.Context, parent meta.Ino, name []byte, nn meta.NewNode) (*meta.Attr, error) {
	defer c.begin(entry(parent, name))()
	return callAs(ctx, c, c.seq.Add(1), false, wire.Create, wire.T3[meta.Ino, []byte, meta.NewNode]{A: parent, B: name, C: nn}, c.counted(0))
}

// Created counts a handle of a file the caller made with Mknod.
func (c *Client) Created(ino meta.Ino) {
	// Counted here even if the server cannot be told now: a later
	// attach sends the count.
	_, _ = callAs(context.Background(), c, c.seq.Add(1), false, wire.Created, ino,
		func(wire.None, error) { c.count(ino, 1) })
}

// Tmpfile makes an unnamed regular file in parent and counts it open, in
// one call (meta.TmpfileCreator). No entry changes: the file has no name
// until Link gives it one.
func (c *Client) Tmpfile(ctx context.Context, parent meta.Ino, nn meta.NewNode) (*meta.Attr, error) {
	return callAs(ctx, c, c.seq.Add(1), false, wire.Tmpfile, wire.T2[meta.Ino, meta.NewNode]{A: parent, B: nn}, c.counted(0))
}

// Link adds a name for ino.
func (c *Client) Link(ctx context.Context, ino, newParent meta.Ino, name []byte) (*meta.Attr, error) {
	defer c.begin(entry(newParent, name, ino))()
	return call(ctx, c, wire.Link, wire.T3[meta.Ino, meta.Ino, []byte]{A: ino, B: newParent, C: name})
}

// Unlink removes a name of a non-directory.
func (c *Client) Unlink(ctx context.Context, parent meta.Ino, name []byte) error {
	defer c.begin(entry(parent, name))()
	_, err := call(ctx, c, wire.Unlink, wire.T2[meta.Ino, []byte]{A: parent, B: name})
	return err
}

// Rmdir removes an empty directory.
func (c *Client) Rmdir(ctx context.Context, parent meta.Ino, name []byte) error {
	defer c.begin(entry(parent, name))()
	c.caches.ForgetDirs() // the directory removed may be remembered
	_, err := call(ctx, c, wire.Rmdir, wire.T2[meta.Ino, []byte]{A: parent, B: name})
	return err
}

// Rename moves a name.
func (c *Client) Rename(ctx context.Context, srcParent meta.Ino, srcName []byte, dstParent meta.Ino, dstName []byte, flags uint32) error {
	defer c.begin(change{nodes: []meta.Ino{srcParent, dstParent}, parents: []meta.Ino{srcParent, dstParent}, names: [][]byte{srcName, dstName}})()
	c.caches.ForgetDirs() // a directory moved, or replaced, may be remembered
	_, err := call(ctx, c, wire.Rename, wire.T5[meta.Ino, []byte, meta.Ino, []byte, uint32]{A: srcParent, B: srcName, C: dstParent, D: dstName, E: flags})
	return err
}

// ReadLink returns a symlink's target.
func (c *Client) ReadLink(ctx context.Context, ino meta.Ino) ([]byte, error) {
	return call(ctx, c, wire.ReadLink, ino)
}

// Open checks access for flags and counts a handle of ino.
func (c *Client) Open(ctx context.Context, ino meta.Ino, flags uint32) (*meta.Attr, error) {
	return callAs(ctx, c, c.seq.Add(1), false, wire.Open, wire.T2[meta.Ino, uint32]{A: ino, B: flags}, c.counted(ino))
}

// Release forgets a handle of ino.
func (c *Client) Release(ctx context.Context, ino meta.Ino) error {
	defer c.begin(nodes(ino))()
	_, err := callAs(ctx, c, c.seq.Add(1), false, wire.Release, ino,
		func(wire.None, error) { c.count(ino, -1) }) // the server forgot it, whatever else failed
	return err
}

// OpenDir checks that ino is a directory the caller may read.
func (c *Client) OpenDir(ctx context.Context, ino meta.Ino) (*meta.Attr, error) {
	return call(ctx, c, wire.OpenDir, ino)
}

// ReadDir lists up to limit entries of ino after the name after.
func (c *Client) ReadDir(ctx context.Context, ino meta.Ino, after []byte, limit int, plus bool) ([]meta.Entry, error) {
	return call(ctx, c, wire.ReadDir, wire.T4[meta.Ino, []byte, int, bool]{A: ino, B: after, C: limit, D: plus})
}

// ReadChunk returns the slice list of chunk idx of ino.
func (c *Client) ReadChunk(ctx context.Context, ino meta.Ino, idx uint32) ([]meta.Slice, error) {
	return call(ctx, c, wire.ReadChunk, wire.T2[meta.Ino, uint32]{A: ino, B: idx})
}

// NewSliceID is the session's own: it hands ids out of batches it
// reserves, with no round trip for most.
func (c *Client) NewSliceID(ctx context.Context) (uint64, error) { return c.local.NewSliceID(ctx) }

// WriteSliceAttr commits a slice written into chunk idx of ino, with the
// attribute changes held back for it.
func (c *Client) WriteSliceAttr(ctx context.Context, ino meta.Ino, idx uint32, s meta.Slice, changes []meta.AttrChange, unsynced bool) (meta.Version, *meta.Attr, error) {
	defer c.begin(nodes(ino))()
	r, err := call(ctx, c, wire.WriteSliceAttr, wire.T5[meta.Ino, uint32, meta.Slice, []meta.AttrChange, bool]{A: ino, B: idx, C: s, D: changes, E: unsynced})
	return r.A, r.B, err
}

// Fallocate allocates, punches or zeroes a range of ino.
func (c *Client) Fallocate(ctx context.Context, ino meta.Ino, mode uint32, off, length uint64) error {
	defer c.begin(nodes(ino))()
	_, err := call(ctx, c, wire.Fallocate, wire.T4[meta.Ino, uint32, uint64, uint64]{A: ino, B: mode, C: off, D: length})
	return err
}

// CopyFileRange copies a range of src into dst by reference.
func (c *Client) CopyFileRange(ctx context.Context, src meta.Ino, srcOff uint64, dst meta.Ino, dstOff uint64, length uint64) (uint64, *meta.Attr, error) {
	defer c.begin(nodes(dst))()
	r, err := call(ctx, c, wire.CopyFileRange, wire.T5[meta.Ino, uint64, meta.Ino, uint64, uint64]{A: src, B: srcOff, C: dst, D: dstOff, E: length})
	return r.A, r.B, err
}

// Flock takes or drops a BSD lock of owner on ino.
func (c *Client) Flock(ctx context.Context, ino meta.Ino, owner uint64, typ uint32, block bool) (*meta.Attr, error) {
	return call(waiting(ctx, block), c, wire.Flock, wire.T4[meta.Ino, uint64, uint32, bool]{A: ino, B: owner, C: typ, D: block})
}

// GetLk tests a POSIX lock.
func (c *Client) GetLk(ctx context.Context, ino meta.Ino, owner uint64, lk meta.PosixLock) (meta.PosixLock, error) {
	return call(ctx, c, wire.GetLk, wire.T3[meta.Ino, uint64, meta.PosixLock]{A: ino, B: owner, C: lk})
}

// SetLk takes or drops a POSIX lock.
func (c *Client) SetLk(ctx context.Context, ino meta.Ino, owner uint64, lk meta.PosixLock, block bool) (*meta.Attr, error) {
	if lk.Type != meta.LockUnlock {
		c.mu.Lock()
		c.posix[ino] = true // before the server may hold it
		c.mu.Unlock()
	}
	return call(waiting(ctx, block), c, wire.SetLk, wire.T4[meta.Ino, uint64, meta.PosixLock, bool]{A: ino, B: owner, C: lk, D: block})
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
	_, err := call(ctx, c, wire.ReleaseLocks, wire.T2[meta.Ino, uint64]{A: ino, B: owner})
	return err
}

// XattrSupported is the session's own: it needs no engine.
func (c *Client) XattrSupported(name string) bool { return c.local.XattrSupported(name) }

// NoXattrs is the session's own: it needs no engine.
func (c *Client) NoXattrs(a *meta.Attr) bool { return c.local.NoXattrs(a) }

// GetXattr returns an extended attribute's value.
func (c *Client) GetXattr(ctx context.Context, ino meta.Ino, name string) ([]byte, error) {
	return call(ctx, c, wire.GetXattr, wire.T2[meta.Ino, string]{A: ino, B: name})
}

// ListXattr lists the names of ino's extended attributes.
func (c *Client) ListXattr(ctx context.Context, ino meta.Ino) ([]string, error) {
	return call(ctx, c, wire.ListXattr, ino)
}

// SetXattr sets an extended attribute.
func (c *Client) SetXattr(ctx context.Context, ino meta.Ino, name string, value []byte, flags uint32) error {
	defer c.forgetDir(ino)()
	defer c.begin(nodes(ino))()
	_, err := call(ctx, c, wire.SetXattr, wire.T4[meta.Ino, string, []byte, uint32]{A: ino, B: name, C: value, D: flags})
	return err
}

// RemoveXattr removes an extended attribute.
func (c *Client) RemoveXattr(ctx context.Context, ino meta.Ino, name string) error {
	defer c.forgetDir(ino)()
	defer c.begin(nodes(ino))()
	_, err := call(ctx, c, wire.RemoveXattr, wire.T2[meta.Ino, string]{A: ino, B: name})
	return err
}
