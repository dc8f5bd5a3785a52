package dump

import "github.com/sluicefs/sluice/internal/meta/store"

// The per-inode state of a load is kept in pages of 64 Ki numbers, so that
// a volume's dense inode and slice numbers cost a few bits each: 4 bits
// (the type) per inode seen and 1 bit per slice seen. Sparse numbers (the
// trash's inodes) cost a page each.

const pageBits = 16

// inoTypes maps inodes to their node type; 0 means not seen.
type inoTypes struct {
	pages map[uint64]*[1 << pageBits / 2]byte
}

func (t *inoTypes) get(ino store.Ino) uint8 {
	p := t.pages[uint64(ino)>>pageBits]
	if p == nil {
		return 0
	}
	i := uint64(ino) & (1<<pageBits - 1)
	return p[i/2] >> (4 * (i % 2)) & 0xf
}

func (t *inoTypes) set(ino store.Ino, typ uint8) {
	if t.pages == nil {
		t.pages = map[uint64]*[1 << pageBits / 2]byte{}
	}
	k := uint64(ino) >> pageBits
	p := t.pages[k]
	if p == nil {
		p = new([1 << pageBits / 2]byte)
		t.pages[k] = p
	}
	i := uint64(ino) & (1<<pageBits - 1)
	shift := 4 * (i % 2)
	p[i/2] = p[i/2]&^(0xf<<shift) | (typ&0xf)<<shift
}

// idSet is a set of numbers.
type idSet struct {
	pages map[uint64]*[1 << pageBits / 64]uint64
}

// add adds id and reports whether it was new.
func (s *idSet) add(id uint64) bool {
	if s.pages == nil {
		s.pages = map[uint64]*[1 << pageBits / 64]uint64{}
	}
	k := id >> pageBits
	p := s.pages[k]
	if p == nil {
		p = new([1 << pageBits / 64]uint64)
		s.pages[k] = p
	}
	i := id & (1<<pageBits - 1)
	bit := uint64(1) << (i % 64)
	if p[i/64]&bit != 0 {
		return false
	}
	p[i/64] |= bit
	return true
}
