package chunk

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Block keys, as the object-layout spec defines them:
//
//	chunks/<id/1e6>/<id/1e3>/<id>_<index>_<length>
//	chunks/<id%256 as two upper-case hex digits>/<id/1e6>/<id>_<index>_<length>
//
// the second form on volumes formatted with --hash-prefix (it has no
// <id/1e3> level, as in JuiceFS 1.x, so that a volume moved between the
// two keeps its blocks). BlockKey makes
// them and ParseBlockKey takes them apart; nothing else should do either.

// Bounds ParseBlockKey puts on a key's numbers, well above what a volume
// can hold (a 64 MiB chunk of 64 KiB blocks has 1024 blocks; blocks are
// at most 16 MiB), so that a key from elsewhere is not taken for a block.
const (
	maxBlockIndex = 1 << 20
	maxBlockLen   = 1 << 30
)

// ErrNotBlockKey is wrapped by the errors of ParseBlockKey: the key is not
// one BlockKey makes.
var ErrNotBlockKey = errors.New("not a block key")

// BlockRef names one block: what a block key encodes.
type BlockRef struct {
	ID         uint64 // the slice's id
	Index      int    // the block's index in the slice
	Len        int    // the block's length in bytes
	HashPrefix bool   // whether the key has the hash-prefix directory
}

// Key returns the object key of b.
func (b BlockRef) Key() string { return BlockKey(b.ID, b.Index, b.Len, b.HashPrefix) }

// BlockKey returns the object key of block index of slice id, whose
// length is blockLen, as the object-layout spec defines it.
func BlockKey(id uint64, index, blockLen int, hashPrefix bool) string {
	if hashPrefix {
		return fmt.Sprintf("chunks/%02X/%d/%d_%d_%d", id%256, id/1000_000, id, index, blockLen)
	}
	return fmt.Sprintf("chunks/%d/%d/%d_%d_%d", id/1000_000, id/1000, id, index, blockLen)
}

// ParseBlockKey takes a block key apart: it accepts exactly the keys
// BlockKey makes (canonical decimal numbers, directories that match the
// slice id, an upper-case hash prefix that matches it), so that
// ParseBlockKey(k).Key() == k. Any other key gets an error wrapping
// ErrNotBlockKey.
func ParseBlockKey(key string) (BlockRef, error) {
	b, why := parseBlockKey(key)
	if why != "" {
		return BlockRef{}, fmt.Errorf("%q: %w: %s", key, ErrNotBlockKey, why)
	}
	return b, nil
}

// parseBlockKey parses key, or says why it is no block key.
func parseBlockKey(key string) (BlockRef, string) {
	rest, ok := strings.CutPrefix(key, "chunks/")
	if !ok {
		return BlockRef{}, "not under chunks/"
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return BlockRef{}, "wrong number of directories"
	}
	var b BlockRef
	var hash uint64
	// The plain form's first directory is decimal and the hashed form's
	// two hex digits; "10" to "99" could be either, and the second
	// directory tells them apart (<id/1e3> >= <id/1e6>*1000 in the plain
	// form, while the hashed form's is <id/1e6> itself), which the checks
	// below settle by trying the plain form first.
	dirs := []string{parts[0], parts[1]}
	name := strings.Split(parts[2], "_")
	if len(name) != 3 {
		return BlockRef{}, "name is not ID_INDEX_LENGTH"
	}
	var n [4]uint64 // the decimal directory, id, index, length
	for i, s := range []string{parts[1], name[0], name[1], name[2]} {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil || strconv.FormatUint(v, 10) != s {
			return BlockRef{}, fmt.Sprintf("%q is not a canonical decimal number", s)
		}
		n[i] = v
	}
	b.ID = n[1]
	first, err := strconv.ParseUint(dirs[0], 10, 64)
	plain := err == nil && strconv.FormatUint(first, 10) == dirs[0] && first == b.ID/1000_000 && n[0] == b.ID/1000
	if !plain {
		v, err := strconv.ParseUint(dirs[0], 16, 8)
		if len(dirs[0]) != 2 || strings.ToUpper(dirs[0]) != dirs[0] || err != nil {
			return BlockRef{}, "directories do not match the slice id"
		}
		b.HashPrefix, hash = true, v
	}
	switch {
	case b.HashPrefix && n[0] != b.ID/1000_000:
		return BlockRef{}, "directories do not match the slice id"
	case b.HashPrefix && hash != b.ID%256:
		return BlockRef{}, "hash prefix does not match the slice id"
	case n[2] > maxBlockIndex:
		return BlockRef{}, "block index out of range"
	case n[3] > maxBlockLen:
		return BlockRef{}, "block length out of range"
	}
	b.Index, b.Len = int(n[2]), int(n[3])
	return b, ""
}
