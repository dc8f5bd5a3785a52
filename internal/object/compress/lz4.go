package compress

import (
	"errors"
	"fmt"
	"sync"

	"github.com/pierrec/lz4/v4"
)

// lz4Codec writes the raw LZ4 block format: no frame, no size header.
type lz4Codec struct{}

// lz4Compressors pools compressors, which are large and not safe for
// concurrent use.
var lz4Compressors = sync.Pool{New: func() any { return new(lz4.Compressor) }}

// compress emits a valid block for any input. With a destination of
// CompressBlockBound bytes the compressor never gives up on incompressible
// data (it falls back to literals) and an empty input becomes the one-byte
// block 0x00.
func (lz4Codec) compress(src []byte) ([]byte, error) {
	dst := make([]byte, lz4.CompressBlockBound(len(src)))
	c := lz4Compressors.Get().(*lz4.Compressor)
	n, err := c.CompressBlock(src, dst)
	lz4Compressors.Put(c)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errors.New("lz4 compressor produced no block")
	}
	return dst[:n], nil
}

// decompress decodes into a buffer of sizeHint bytes. The hint comes from
// the key and is only trusted as far as the block decodes into it: without
// a hint, or if the block does not fit, it retries with a buffer that
// doubles up to MaxSize.
func (lz4Codec) decompress(src []byte, sizeHint int64) ([]byte, error) {
	if sizeHint >= 0 {
		dst := make([]byte, sizeHint)
		if n, err := lz4.UncompressBlock(src, dst); err == nil {
			return dst[:n], nil
		}
	}
	size := min(max(4*len(src), 64<<10), MaxSize)
	for {
		dst := make([]byte, size)
		n, err := lz4.UncompressBlock(src, dst)
		if err == nil {
			return dst[:n], nil
		}
		if size >= MaxSize {
			return nil, fmt.Errorf("corrupt block or larger than %d bytes: %w", MaxSize, err)
		}
		size = min(2*size, MaxSize)
	}
}
