package remote

import (
	"context"
	"fmt"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/metaserver/wire"
)

// Call is a decoded OpCall.
type Call struct {
	Method uint64
	// Run runs the call on m and appends its results to out.
	Run func(ctx context.Context, m *meta.Client, out *wire.Buf) error
	// Applied, when not nil, answers the call without running it, for a
	// call whose effect the records hold already: the server applied it
	// and then lost the reply (it restarted), and the mount sent it
	// again. A create answers the node its name holds, an unlink or a
	// rename nothing. The server runs these calls under store.WithCall,
	// so that the commit which is their effect says so. Calls without
	// Applied are run again, under meta.WithSentAgain.
	Applied func(ctx context.Context, m *meta.Client, out *wire.Buf) error
}

type runFunc = func(ctx context.Context, m *meta.Client, out *wire.Buf) error

// Decode reads the method of an OpCall's arguments in r (after the
// session, client, call number and flags) and returns the call. A body
// that does not decode, or names no method, returns an error wrapping
// wire.ErrFrame.
func Decode(r *wire.Reader) (*Call, error) {
	method := r.Uvarint()
	cred := getCred(r)
	var fn, applied runFunc
	switch method {
	case mLookup:
		parent, name := meta.Ino(r.Uvarint()), r.Bytes()
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			a, err := m.Lookup(ctx, parent, name)
			putAttr(out, a)
			return err
		}
	case mGetAttr:
		ino := meta.Ino(r.Uvarint())
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			a, err := m.GetAttr(ctx, ino)
			putAttr(out, a)
			return err
		}
	case mSetAttr:
		ino, mask, in := meta.Ino(r.Uvarint()), uint32(r.Uvarint()), getAttrValue(r)
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			a, err := m.SetAttr(ctx, ino, mask, in)
			putAttr(out, a)
			return err
		}
	case mApplyAttrChanges:
		ino, cs := meta.Ino(r.Uvarint()), getChanges(r)
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			a, err := m.ApplyAttrChanges(ctx, ino, cs)
			putAttr(out, a)
			return err
		}
	case mAccess:
		ino, mask := meta.Ino(r.Uvarint()), uint32(r.Uvarint())
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			return m.Access(ctx, ino, mask)
		}
	case mTouchAtime:
		ino, a := meta.Ino(r.Uvarint()), getAttr(r)
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			return m.TouchAtime(ctx, ino, a)
		}
	case mStatFS:
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			st, err := m.StatFS(ctx)
			out.Uvarint(st.TotalSpace)
			out.Uvarint(st.AvailSpace)
			out.Uvarint(st.UsedInodes)
			out.Uvarint(st.AvailInodes)
			return err
		}
	case mMknod, mCreate:
		parent, name, nn := meta.Ino(r.Uvarint()), r.Bytes(), getNewNode(r)
		create := method == mCreate
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			a, err := m.Mknod(ctx, parent, name, nn)
			if err == nil && create {
				m.Created(a.Ino)
			}
			putAttr(out, a)
			putDirs(out, m, parent)
			return err
		}
		applied = answerEntry(parent, name, create)
	case mTmpfile:
		parent, nn := meta.Ino(r.Uvarint()), getNewNode(r)
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			a, err := m.Tmpfile(ctx, parent, nn)
			putAttr(out, a)
			return err
		}
	case mLink:
		ino, parent, name := meta.Ino(r.Uvarint()), meta.Ino(r.Uvarint()), r.Bytes()
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			a, err := m.Link(ctx, ino, parent, name)
			putAttr(out, a)
			putDirs(out, m, parent)
			return err
		}
		applied = answerEntry(parent, name, false)
	case mUnlink, mRmdir:
		parent, name := meta.Ino(r.Uvarint()), r.Bytes()
		rmdir := method == mRmdir
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			var err error
			if rmdir {
				err = m.Rmdir(ctx, parent, name)
			} else {
				err = m.Unlink(ctx, parent, name)
			}
			putDirs(out, m, parent)
			return err
		}
		applied = answerNothing
	case mRename:
		sp, sn, dp, dn, flags := meta.Ino(r.Uvarint()), r.Bytes(), meta.Ino(r.Uvarint()), r.Bytes(), uint32(r.Uvarint())
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			err := m.Rename(ctx, sp, sn, dp, dn, flags)
			if sp == dp {
				putDirs(out, m, sp)
			} else {
				putDirs(out, m, sp, dp)
			}
			return err
		}
		applied = answerNothing
	case mReadLink:
		ino := meta.Ino(r.Uvarint())
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			t, err := m.ReadLink(ctx, ino)
			out.Bytes(t)
			return err
		}
	case mOpen:
		ino, flags := meta.Ino(r.Uvarint()), uint32(r.Uvarint())
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			a, err := m.Open(ctx, ino, flags)
			putAttr(out, a)
			return err
		}
	case mCreated:
		ino := meta.Ino(r.Uvarint())
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			m.Created(ino)
			return nil
		}
	case mRelease:
		ino := meta.Ino(r.Uvarint())
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			return m.Release(ctx, ino)
		}
	case mOpenDir:
		ino := meta.Ino(r.Uvarint())
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			a, err := m.OpenDir(ctx, ino)
			putAttr(out, a)
			return err
		}
	case mReadDir:
		ino, after, limit, plus := meta.Ino(r.Uvarint()), r.Bytes(), int(r.Varint()), getBool(r)
		if r.Byte() == 0 {
			after = nil // from the start, which an empty name is not
		}
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			es, err := m.ReadDir(ctx, ino, after, limit, plus)
			out.Uvarint(uint64(len(es)))
			for i := range es {
				out.Bytes(es[i].Name)
				out.Uvarint(uint64(es[i].Ino))
				out.Byte(es[i].Type)
				if plus {
					putAttr(out, es[i].Attr)
				}
			}
			return err
		}
	case mReadChunk:
		ino, idx := meta.Ino(r.Uvarint()), uint32(r.Uvarint())
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			ss, err := m.ReadChunk(ctx, ino, idx)
			out.Uvarint(uint64(len(ss)))
			for _, s := range ss {
				putSlice(out, s)
			}
			return err
		}
	case mWriteSliceAttr:
		ino, idx, s, cs, unsynced := meta.Ino(r.Uvarint()), uint32(r.Uvarint()), getSlice(r), getChanges(r), getBool(r)
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			v, a, err := m.WriteSliceAttr(ctx, ino, idx, s, cs, unsynced)
			putVersion(out, v)
			putAttr(out, a)
			return err
		}
		// The version before the write is gone: the file's version now
		// differs from what the mount saw, so the mount drops what it
		// cached of the file, as after another mount's change.
		applied = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			a, err := m.GetAttr(ctx, ino)
			if err != nil {
				return err
			}
			putVersion(out, meta.Version{})
			putAttr(out, a)
			return nil
		}
	case mFallocate:
		ino, mode, off, length := meta.Ino(r.Uvarint()), uint32(r.Uvarint()), r.Uvarint(), r.Uvarint()
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			return m.Fallocate(ctx, ino, mode, off, length)
		}
	case mCopyFileRange:
		src, srcOff, dst, dstOff, length := meta.Ino(r.Uvarint()), r.Uvarint(), meta.Ino(r.Uvarint()), r.Uvarint(), r.Uvarint()
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			n, a, err := m.CopyFileRange(ctx, src, srcOff, dst, dstOff, length)
			out.Uvarint(n)
			putAttr(out, a)
			return err
		}
	case mFlock:
		ino, owner, typ, block := meta.Ino(r.Uvarint()), r.Uvarint(), uint32(r.Uvarint()), getBool(r)
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			a, err := m.Flock(ctx, ino, owner, typ, block)
			putAttr(out, a)
			return err
		}
	case mGetLk:
		ino, owner, lk := meta.Ino(r.Uvarint()), r.Uvarint(), getLock(r)
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			l, err := m.GetLk(ctx, ino, owner, lk)
			putLock(out, l)
			return err
		}
	case mSetLk:
		ino, owner, lk, block := meta.Ino(r.Uvarint()), r.Uvarint(), getLock(r), getBool(r)
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			a, err := m.SetLk(ctx, ino, owner, lk, block)
			putAttr(out, a)
			return err
		}
	case mReleaseLocks:
		ino, owner := meta.Ino(r.Uvarint()), r.Uvarint()
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			return m.ReleaseLocks(ctx, ino, owner)
		}
	case mGetXattr:
		ino, name := meta.Ino(r.Uvarint()), string(r.Bytes())
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			v, err := m.GetXattr(ctx, ino, name)
			out.Bytes(v)
			return err
		}
	case mListXattr:
		ino := meta.Ino(r.Uvarint())
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			names, err := m.ListXattr(ctx, ino)
			out.Uvarint(uint64(len(names)))
			for _, n := range names {
				out.Bytes([]byte(n))
			}
			return err
		}
	case mSetXattr:
		ino, name, value, flags := meta.Ino(r.Uvarint()), string(r.Bytes()), r.Bytes(), uint32(r.Uvarint())
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			return m.SetXattr(ctx, ino, name, value, flags)
		}
		applied = answerEmpty
	case mRemoveXattr:
		ino, name := meta.Ino(r.Uvarint()), string(r.Bytes())
		fn = func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			return m.RemoveXattr(ctx, ino, name)
		}
		applied = answerEmpty
	default:
		return nil, fmt.Errorf("unknown method %d: %w", method, wire.ErrFrame)
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	withCred := func(fn runFunc) runFunc {
		if fn == nil {
			return nil
		}
		return func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
			return fn(meta.WithCred(ctx, cred), m, out)
		}
	}
	return &Call{Method: method, Run: withCred(fn), Applied: withCred(applied)}, nil
}

func putVersion(out *wire.Buf, v meta.Version) {
	out.Uvarint(v.Length)
	out.Varint(v.Mtime)
	out.Varint(v.Ctime)
	out.Uvarint(uint64(v.Mtimensec))
	out.Uvarint(uint64(v.Ctimensec))
}

// answerEntry is the Applied of a call that made name in parent (a
// create, mknod or link): its reply is the node the name holds now, and
// a created file is counted open again, as the first run counted it.
func answerEntry(parent meta.Ino, name []byte, create bool) runFunc {
	return func(ctx context.Context, m *meta.Client, out *wire.Buf) error {
		a, err := m.Lookup(ctx, parent, name)
		if err == nil && create {
			m.Created(a.Ino)
		}
		putAttr(out, a)
		putDirs(out, m)
		return err
	}
}

// answerNothing is the Applied of an unlink, an rmdir or a rename, whose
// reply holds only the changed directories' fresh attributes; those are
// optional, and none are sent.
func answerNothing(ctx context.Context, m *meta.Client, out *wire.Buf) error {
	putDirs(out, m)
	return nil
}

// answerEmpty is the Applied of a call whose reply is empty (an xattr
// change).
func answerEmpty(ctx context.Context, m *meta.Client, out *wire.Buf) error { return nil }

// putDirs appends the attributes the session's client remembers of the
// directories dirs, whose entries the call just changed (see
// meta.Client.RecentDir): the mount answers the kernel's next getattr of
// them without a round trip.
func putDirs(out *wire.Buf, m *meta.Client, dirs ...meta.Ino) {
	var as []*meta.Attr
	for _, d := range dirs {
		if a, ok := m.RecentDir(d); ok {
			as = append(as, a)
		}
	}
	out.Uvarint(uint64(len(as)))
	for _, a := range as {
		putAttr(out, a)
	}
}
