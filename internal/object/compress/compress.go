// Package compress provides a Store decorator that compresses each object
// on Put and decompresses it on Get, in the formats of the object layout
// spec (section "Compression"):
//
//   - "lz4": the raw LZ4 block format, with no frame and no size header.
//     The uncompressed size comes from the key: a data block's last path
//     element ends in "_<block length>" (chunks/0/0/1_0_4194304). For other
//     keys the decompressor grows its buffer until the block fits.
//   - "zstd": one standard zstd frame (magic 28 B5 2F FD), also for empty
//     objects.
//   - "none": objects are stored as they are; New returns the store itself.
//
// An object is compressed as a whole, so Get reads and decompresses the
// whole stored object and then applies the offset and limit to the
// decompressed bytes; ranged reads save no IO. Objects are limited to
// MaxSize bytes before compression.
//
// Head and List pass through and report the stored, compressed size: the
// uncompressed size is only known after reading the object (or, for
// blocks, from the key).
package compress

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/sluicefs/sluice/internal/object"
)

// MaxSize bounds the uncompressed size of an object, so that a corrupt or
// hostile object cannot make Get allocate without limit. Blocks are at most
// 16 MiB.
const MaxSize = 64 << 20

// Algorithms lists the accepted algorithm names.
var Algorithms = []string{"none", "lz4", "zstd"}

// codec compresses and decompresses whole objects. Implementations are safe
// for concurrent use.
type codec interface {
	// compress returns the compressed form of src.
	compress(src []byte) ([]byte, error)
	// decompress returns the decompressed form of src. sizeHint is the
	// expected size taken from the key, or -1 if the key has none.
	decompress(src []byte, sizeHint int64) ([]byte, error)
}

// Store compresses the objects of the Store it wraps.
type Store struct {
	inner object.Store
	algo  string
	codec codec
}

var (
	_ object.Store     = (*Store)(nil)
	_ object.Unwrapper = (*Store)(nil)
)

// New returns s wrapped to compress objects with algo: "none" (s itself),
// "lz4" or "zstd". Algorithm names are case-insensitive, and "" means
// "none".
func New(s object.Store, algo string) (object.Store, error) {
	var c codec
	switch strings.ToLower(algo) {
	case "", "none":
		return s, nil
	case "lz4":
		c = lz4Codec{}
	case "zstd":
		z, err := sharedZstd()
		if err != nil {
			return nil, fmt.Errorf("compress: %w", err)
		}
		c = z
	default:
		return nil, fmt.Errorf("compress: unknown algorithm %q (supported: %s)", algo, strings.Join(Algorithms, ", "))
	}
	return &Store{inner: s, algo: strings.ToLower(algo), codec: c}, nil
}

// String returns the name of the wrapped store.
func (s *Store) String() string {
	return s.inner.String()
}

// Unwrap returns the wrapped store.
func (s *Store) Unwrap() object.Store {
	return s.inner
}

// Get decompresses the whole object and returns limit bytes of it from off;
// a negative limit reads to the end.
func (s *Store) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("%s: get %q: negative offset %d", s, key, off)
	}
	rc, err := s.inner.Get(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	stored, err := object.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("%s: get %q: %w", s, key, err)
	}
	data, err := s.codec.decompress(stored, sizeHint(key))
	if err != nil {
		return nil, fmt.Errorf("%s: get %q: %s decompress: %w", s, key, s.algo, err)
	}
	return object.RangeReader(data, off, limit), nil
}

// Put reads all of r, compresses it and stores the result under key.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	data, err := object.ReadWhole(r, MaxSize)
	if err != nil {
		return fmt.Errorf("%s: put %q: %w", s, key, err)
	}
	out, err := s.codec.compress(data)
	if err != nil {
		return fmt.Errorf("%s: put %q: %s compress: %w", s, key, s.algo, err)
	}
	return s.inner.Put(ctx, key, bytes.NewReader(out))
}

// Delete removes key.
func (s *Store) Delete(ctx context.Context, key string) error {
	return s.inner.Delete(ctx, key)
}

// Head returns the Info of key; Size is the stored, compressed size.
func (s *Store) Head(ctx context.Context, key string) (object.Info, error) {
	return s.inner.Head(ctx, key)
}

// List lists the wrapped store; sizes are stored, compressed sizes.
func (s *Store) List(ctx context.Context, prefix, marker string, limit int) ([]object.Info, error) {
	return s.inner.List(ctx, prefix, marker, limit)
}

// sizeHint returns the uncompressed length encoded at the end of the last
// path element of key ("chunks/0/0/1_0_4194304" → 4194304), or -1 if the
// key has none or it exceeds MaxSize.
func sizeHint(key string) int64 {
	base := key[strings.LastIndex(key, "/")+1:]
	i := strings.LastIndex(base, "_")
	if i < 0 || i == len(base)-1 || len(base)-i-1 > 9 {
		return -1
	}
	var n int64
	for _, c := range base[i+1:] {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int64(c-'0')
	}
	if n > MaxSize {
		return -1
	}
	return n
}
