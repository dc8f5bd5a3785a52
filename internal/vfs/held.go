package vfs

import (
	"context"
	"slices"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
)

// Held changes and copies: attribute changes and copy_file_range held back
// on an open file, to commit with its next slice or together later.
//
// Unpacking an archive writes a file and then sets its times, owner and
// mode; cp -a copies it (copy_file_range) and then sets its mode and
// times. Each would be a transaction of its own. Instead the open file
// answers such a request at once from a preview and holds it back in
// f.mu, so that it rides on a transaction the file needs anyway: the
// commit of its next slice (Commit: meta WriteSliceAttr applies the
// changes after the slice) or of a held copy (commitCopy: CopyCommitter).
// This mount sees the change at once; other mounts when it commits, as
// they see writes.
//
// What f.mu holds besides buffered writes is in one of four states:
//
//   - idle: nothing (held empty, copy nil).
//   - holding: held lists attribute changes that PreviewAttr could decide
//     from the attributes alone (owner, mode, times), in the order asked,
//     each with its caller's credentials and "now" resolved when asked;
//     heldTimes tells that one of them sets times.
//   - copying: copy is a copy_file_range into f, and held lists the
//     changes asked for after it. The source lists f in its copiedTo.
//   - closed: the last handle went with nothing held (closed set). The
//     file has left the open-file table for good: hold and holdCopy
//     refuse, and their callers go to the engine at once.
//
// Transitions:
//
//	from     event                                      to
//	idle     hold                                       holding
//	idle     holdCopy (after flushing both files)       copying
//	idle     last release (VFS.unref)                   closed
//	holding  hold                                       holding
//	holding  slice commit (Commit takes held along)     idle
//	holding  applyHeld (ApplyAttrChanges)               idle
//	holding  last release: applyHeld first              idle, then closed
//	copying  hold                                       copying
//	copying  slice commit                               copying (takes nothing)
//	copying  applyHeld (commitCopy: copy and held)      idle
//
// A failed slice commit or applyHeld puts the changes back before any
// held since (returnHeldLocked, which sets heldTimes not knowing): the
// file stays holding. A failed copy is dropped all the same, never
// retried: copyErr keeps its error for every later flush to report, and
// the changes held after it go back (holding, or idle when none were).
// A last release whose applyHeld failed leaves the file out of the table
// but still holding, for heldTimer to retry.
//
// Who calls applyHeld: flush (Flush, Fsync, Release, a lock's release,
// VFS.Close), after the buffered writes, for what no commit took along;
// heldTimer, armed by the first change held and disarmed by every
// applyHeldIn, heldDelay later unless writes are still buffered (their
// commit will take the changes: it waits again); and whatever the held
// state must precede: a change PreviewAttr cannot decide (VFS.SetAttr;
// a truncation flushes), an xattr change, an open while a chmod or chown
// is held (it checks permissions in the engine), a read of a file holding
// a copy (the copy's slices are not in its lists yet), and, through
// flush, an access time to record, a write after held times (they would
// cover its mtime) or to a file holding a copy, a fallocate and a
// copy_file_range. A flush of a copy's source (its write, truncation,
// fallocate, close) first commits the copies from it (commitCopiesFrom).
//
// While anything is held, f.mu.attr is the preview: the attributes with
// the held changes, and a held copy's length and mtime, applied.
// setAttrLocked leaves it alone and overlayAttr shows it in every reply,
// until the commit's own attributes replace it.

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

// holdsLocked reports whether anything is held back on f but buffered
// writes: attribute changes or a copy; f.mu is held.
func (f *openFile) holdsLocked() bool {
	return len(f.mu.held) > 0 || f.mu.copy != nil
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

// holdCopy holds back the copy of length bytes of in at offIn to out at
// offOut (see CopyFileRange) and returns the bytes it copies; false when
// it cannot be held: the client cannot commit it so, the copy is within
// one file, out's flags may refuse it, or out holds a copy already.
func (v *VFS) holdCopy(ctx context.Context, in *handle, offIn uint64, out *handle, offOut, length uint64) (uint64, bool) {
	if _, ok := capability[meta.CopyCommitter](v.meta); !ok || in.ino == out.ino {
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
	before, a, err := f.meta.(meta.CopyCommitter).CommitCopy(ctx, cp.HeldCopy, held)
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

// forgetCopyTo drops d from the files holding a copy from f.
func (f *openFile) forgetCopyTo(d *openFile) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i := slices.Index(f.mu.copiedTo, d); i >= 0 {
		f.mu.copiedTo = slices.Delete(f.mu.copiedTo, i, i+1)
	}
}
