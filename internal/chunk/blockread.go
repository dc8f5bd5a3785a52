package chunk

import (
	"context"
	"fmt"
	"io"

	"github.com/sluicefs/sluice/internal/object"
)

// readBlock fills p with the bytes of block index of slice id (size bytes
// long) starting at off within the block. The order of sources:
//
//   - the memory cache;
//   - the whole block, when p is all of it or a fetch of it is under way
//     (readahead), which fills the caches;
//   - the disk cache, reading and checking only the pages p covers;
//   - in a cache group, the block's owner when another member owns it
//     (the bytes of p when they are at most peerRangeMax, else the whole
//     block as below);
//   - with RangedReads, a ranged GET of just p from the object store,
//     starting a background fetch of the whole block when Prefetch allows
//     (with PrefetchCold, only when the GET had to read the disk), so
//     that neighbouring reads find it cached;
//   - otherwise the whole block from the object store.
//
// With v not nil, the bytes of a whole block in memory are not copied:
// v gets that memory (blocks are never written again once cached), and
// otherwise p, filled.
func (s *Store) readBlock(ctx context.Context, id uint64, size uint32, index, off int, p []byte, v *iovec) error {
	key := s.key(id, size, index)
	want := s.blockLen(size, index)
	if b, ok := s.mem.Get(key); ok && len(b) == want {
		s.reads.add(fromMemory)
		give(p, b[off:off+len(p)], v)
		return nil
	}
	if len(p) < want && !s.prefetch.busy(key) {
		if s.disk != nil && s.disk.ReadAt(key, p, int64(off)) {
			s.reads.add(fromDisk)
			v.add(p)
			return nil
		}
		if peers := s.peersFor(ctx); peers != nil && peers.Remote(key) {
			// A small read gets just its bytes from the owner,
			// which serves them from its cache or the block it
			// fetches whole. A larger one (a sequential reader's,
			// most likely) gets the whole block below, which the
			// reads after it and readahead share instead of asking
			// for the block a second time. A failure fetches the
			// whole block below too (from object storage, the
			// owner being left out then).
			if len(p) <= peerRangeMax && peers.Read(ctx, key, off, p) {
				s.reads.add(fromPeer)
				v.add(p)
				return nil
			}
		} else if s.conf.RangedReads && s.peers == nil {
			// (In a cache group, a block this member owns is
			// fetched whole below: its peers will ask for it.)
			rctx, cold := ctx, false
			switch {
			case s.conf.Prefetch > 0 && s.conf.PrefetchCold:
				rctx = object.ReportCold(ctx, &cold) // decided by the read
			case s.conf.Prefetch > 0:
				s.prefetch.whole(id, size, index)
			}
			s.reads.add(fromObjects)
			if err := s.readRange(rctx, key, off, p); err != nil {
				return err
			}
			if cold {
				s.prefetch.whole(id, size, index)
			}
			v.add(p)
			return nil
		}
	}
	b, src, err := s.fetchBlock(ctx, id, size, index)
	if err != nil {
		return err
	}
	s.reads.add(src)
	give(p, b[off:off+len(p)], v)
	return nil
}

// peerRangeMax is the largest read of part of a block that asks a cache
// group peer for just its bytes.
const peerRangeMax = 256 << 10

// give hands the block bytes b to a read: as they are into v, or copied
// into p when v is nil.
func give(p, b []byte, v *iovec) {
	if v == nil {
		copy(p, b)
		return
	}
	v.add(b)
}

// readRange fills p with the bytes of object key at off.
func (s *Store) readRange(ctx context.Context, key string, off int, p []byte) error {
	r, err := s.obj.Get(ctx, key, int64(off), int64(len(p)))
	if err != nil {
		return fmt.Errorf("read block %s at %d: %w", key, off, err)
	}
	defer r.Close()
	if _, err := io.ReadFull(r, p); err != nil {
		return fmt.Errorf("read block %s at %d: short or failed read: %w", key, off, err)
	}
	return nil
}
