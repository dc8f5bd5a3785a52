package vfs

import (
	"context"

	"github.com/sluicefs/sluice/internal/meta"
)

// The commit path of buffered writes: openFile is the chunk.Committer of
// its writer, and each slice the writer commits takes the attribute
// changes held on the file along; flush drives it all to the end. See
// docs/architecture.md, "How a write is committed".

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
