package chunk

import (
	"context"
	"fmt"
	"sync"

	"github.com/sluicefs/sluice/internal/meta"
)

// SliceSource lists the committed slices of a chunk; *meta.Session
// implements it.
type SliceSource interface {
	ReadChunk(ctx context.Context, ino meta.Ino, idx uint32) ([]meta.Slice, error)
}

var _ SliceSource = (*meta.Session)(nil)

// ReadFile fills p with the committed content of file ino at offset off.
// The caller limits p to the file's length; holes read as zeros. The
// deletion of a slice through this Store waits for the reads that began
// before it, so a list src returned stays readable until ReadFile returns.
func (s *Store) ReadFile(ctx context.Context, src SliceSource, ino meta.Ino, p []byte, off uint64) error {
	defer s.readers.leave(s.readers.enter())
	return s.readFile(ctx, src, ino, p, off, nil)
}

// ReadFileVec is ReadFile that hands out the memory of cached blocks
// instead of copying them into p: it returns the content as pieces, in
// order, each either such memory or a part of p (bytes read from disk or
// the object store, and holes). Their lengths add up to len(p). The
// pieces stay valid and unchanged until release is called: cached blocks
// are never written again, and the buffers of fetched blocks are reused
// only after the reads that may hold them have released them. The caller
// must call release once, also after an error.
func (s *Store) ReadFileVec(ctx context.Context, src SliceSource, ino meta.Ino, p []byte, off uint64) (pieces [][]byte, release func(), err error) {
	t := s.readers.enter()
	release = sync.OnceFunc(func() { s.readers.leave(t) })
	var v iovec
	if err := s.readFile(ctx, src, ino, p, off, &v); err != nil {
		return nil, release, err
	}
	return v, release, nil
}

// readFile is ReadFile inside the read guard, gathering pieces into v when
// v is not nil.
func (s *Store) readFile(ctx context.Context, src SliceSource, ino meta.Ino, p []byte, off uint64, v *iovec) error {
	for len(p) > 0 {
		idx := uint32(off / meta.ChunkSize)
		start := uint32(off % meta.ChunkSize)
		n := min(len(p), meta.ChunkSize-int(start))
		slices, err := src.ReadChunk(ctx, ino, idx)
		if err != nil {
			return fmt.Errorf("read chunk %d of inode %d: %w", idx, ino, err)
		}
		for _, g := range meta.Visible(slices, start, start+uint32(n)) {
			dst := p[g.Start-start : g.End-start]
			if g.Slice == nil || g.Slice.Id == 0 {
				clear(dst)
				v.add(dst)
				continue
			}
			if err := s.readSlice(ctx, g.Slice.Id, g.Slice.Size, g.SliceOff(), dst, v); err != nil {
				return err
			}
		}
		p = p[n:]
		off += uint64(n)
	}
	return nil
}

// iovec gathers the pieces of a vectored read.
type iovec [][]byte

// add appends b, joining it to the last piece when it continues that
// piece's memory. A nil iovec takes nothing: the read copies into its
// buffer instead.
func (v *iovec) add(b []byte) {
	if v == nil || len(b) == 0 {
		return
	}
	if n := len(*v); n > 0 {
		last := (*v)[n-1]
		if cap(last) > len(last) && &last[:len(last)+1][len(last)] == &b[0] {
			(*v)[n-1] = last[:len(last)+len(b)]
			return
		}
	}
	*v = append(*v, b)
}

// Gather copies pieces, as ReadFileVec returns them, into p in order,
// skipping those that are already in place, and returns their total
// length.
func Gather(p []byte, pieces [][]byte) int {
	at := 0
	for _, b := range pieces {
		if len(b) == 0 {
			continue
		}
		if &p[at] != &b[0] {
			copy(p[at:], b)
		}
		at += len(b)
	}
	return at
}
