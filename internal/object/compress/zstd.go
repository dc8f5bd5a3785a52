package compress

import (
	"sync"

	"github.com/klauspost/compress/zstd"
)

// zstdCodec writes one standard zstd frame per object. Its encoder and
// decoder are shared by all stores: EncodeAll and DecodeAll are safe for
// concurrent use.
type zstdCodec struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
}

// sharedZstd builds the shared codec on first use.
var sharedZstd = sync.OnceValues(func() (*zstdCodec, error) {
	// Zero frames: an empty object is still a valid frame for other
	// zstd implementations, which reject empty input. Single segment:
	// every frame header then declares the content size, which the
	// encoder otherwise leaves out below 256 bytes; JuiceFS (DataDog's
	// cgo zstd) decodes into a buffer of the block's length only when the
	// header declares it, and fails the read of any other small block
	// with "buffer too short".
	enc, err := zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithSingleSegment(true))
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(MaxSize), zstd.WithDecoderConcurrency(0))
	if err != nil {
		return nil, err
	}
	return &zstdCodec{enc: enc, dec: dec}, nil
})

// compress returns src as one zstd frame.
func (z *zstdCodec) compress(src []byte) ([]byte, error) {
	return z.enc.EncodeAll(src, nil), nil
}

// decompress decodes the frames in src. The frame header carries the size,
// so the hint only presizes the buffer.
func (z *zstdCodec) decompress(src []byte, sizeHint int64) ([]byte, error) {
	return z.dec.DecodeAll(src, make([]byte, 0, max(sizeHint, 0)))
}
