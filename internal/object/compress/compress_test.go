package compress_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/pierrec/lz4/v4"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/compress"
	"github.com/sluicefs/sluice/internal/object/mem"
	"github.com/sluicefs/sluice/internal/object/objecttest"
)

func newStore(t testing.TB, algo string) (object.Store, *mem.Store) {
	t.Helper()
	inner := mem.New("bucket")
	s, err := compress.New(inner, algo)
	if err != nil {
		t.Fatal(err)
	}
	return s, inner
}

func TestSuite(t *testing.T) {
	for _, algo := range []string{"lz4", "zstd"} {
		t.Run(algo, func(t *testing.T) {
			objecttest.Run(t, func(t *testing.T) object.Store {
				s, _ := newStore(t, algo)
				return s
			})
		})
	}
}

// stored returns the raw bytes the compressing store wrote for key.
func stored(t *testing.T, inner object.Store, key string) []byte {
	t.Helper()
	return objecttest.Get(t, inner, key, 0, -1)
}

func TestRoundTripSizes(t *testing.T) {
	compressible := bytes.Repeat([]byte{7}, 4<<20) // ratio far above 4: exercises buffer growth
	text := []byte(strings.Repeat("the quick brown fox jumps over the lazy dog ", 3000))
	inputs := map[string][]byte{
		"empty":        nil,
		"one":          {1},
		"random":       objecttest.Data(3, 1<<20),
		"text":         text,
		"compressible": compressible,
	}
	for _, algo := range []string{"lz4", "zstd"} {
		for name, data := range inputs {
			keys := []string{
				fmt.Sprintf("chunks/0/0/1_0_%d", len(data)), // size from the key
				"meta/" + name,     // no size in the key
				"chunks/0/0/2_0_3", // wrong size in the key
				"chunks/0/0/3_0_x", // not a number
			}
			for _, key := range keys {
				t.Run(algo+"/"+name+"/"+key, func(t *testing.T) {
					s, _ := newStore(t, algo)
					objecttest.Put(t, s, key, data)
					if got := objecttest.Get(t, s, key, 0, -1); !bytes.Equal(got, data) {
						t.Errorf("round trip: got %d bytes, want %d", len(got), len(data))
					}
					if len(data) > 10 {
						if got := objecttest.Get(t, s, key, 3, 5); !bytes.Equal(got, data[3:8]) {
							t.Errorf("range: got %v, want %v", got, data[3:8])
						}
					}
				})
			}
		}
	}
}

func TestLZ4RawBlock(t *testing.T) {
	s, inner := newStore(t, "lz4")
	data := bytes.Repeat([]byte("sluice lz4 block "), 4096)
	key := fmt.Sprintf("chunks/0/0/1_0_%d", len(data))
	objecttest.Put(t, s, key, data)
	raw := stored(t, inner, key)
	if len(raw) >= len(data) {
		t.Errorf("stored %d bytes for %d compressible bytes", len(raw), len(data))
	}
	dst := make([]byte, len(data))
	n, err := lz4.UncompressBlock(raw, dst)
	if err != nil || !bytes.Equal(dst[:n], data) {
		t.Errorf("lz4.UncompressBlock = %d, %v; want the original %d bytes", n, err, len(data))
	}
	// Incompressible data is still a raw block.
	random := objecttest.Data(4, 100<<10)
	objecttest.Put(t, s, "r_102400", random)
	dst = make([]byte, len(random))
	n, err = lz4.UncompressBlock(stored(t, inner, "r_102400"), dst)
	if err != nil || !bytes.Equal(dst[:n], random) {
		t.Errorf("lz4.UncompressBlock of random data = %d, %v; want the original", n, err)
	}
}

func TestZstdFrame(t *testing.T) {
	s, inner := newStore(t, "zstd")
	magic := []byte{0x28, 0xb5, 0x2f, 0xfd}
	for _, data := range [][]byte{nil, []byte("hello"), objecttest.Data(5, 1000)} {
		objecttest.Put(t, s, "obj", data)
		if raw := stored(t, inner, "obj"); !bytes.HasPrefix(raw, magic) {
			t.Errorf("zstd object of %d bytes starts with % x, want % x", len(data), raw[:min(4, len(raw))], magic)
		}
	}
}

func TestNew(t *testing.T) {
	inner := mem.New("bucket")
	for _, algo := range []string{"none", "", "NONE"} {
		if s, err := compress.New(inner, algo); err != nil || s != object.Store(inner) {
			t.Errorf("New(%q) = %v, %v; want the inner store", algo, s, err)
		}
	}
	s, err := compress.New(inner, "zstd")
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := s.(object.Unwrapper); !ok || u.Unwrap() != inner {
		t.Errorf("Unwrap does not return the inner store")
	}
	_, err = compress.New(inner, "gzip")
	if err == nil || !strings.Contains(err.Error(), `"gzip"`) || !strings.Contains(err.Error(), "lz4, zstd") {
		t.Errorf("New(gzip) error = %v, want one naming gzip and the valid algorithms", err)
	}
}

func TestCorrupt(t *testing.T) {
	for _, algo := range []string{"lz4", "zstd"} {
		s, inner := newStore(t, algo)
		objecttest.Put(t, inner, "bad_100", []byte{0xff, 0xff, 0xff, 0xff, 0xff})
		rc, err := s.Get(context.Background(), "bad_100", 0, -1)
		if err == nil {
			b, _ := io.ReadAll(rc)
			t.Errorf("%s: Get of a corrupt object = %d bytes, want an error", algo, len(b))
		}
	}
}

func BenchmarkStore(b *testing.B) {
	for _, algo := range []string{"lz4", "zstd"} {
		b.Run(algo, func(b *testing.B) {
			s, _ := newStore(b, algo)
			objecttest.Bench(b, s)
		})
	}
}

// TestZstdContentSize checks that every zstd frame declares its content
// size in its header. JuiceFS 1.x (DataDog's cgo zstd) decodes a block
// into a buffer of the block's length only when the frame says how long
// the content is; without it the buffer is max(1 MiB, 50 x compressed)
// and JuiceFS fails the read with "buffer too short". The encoder leaves
// the size out of frames under 256 bytes unless told otherwise: a 1-byte
// file written by Sluice could not be read after a move to JuiceFS.
func TestZstdContentSize(t *testing.T) {
	s, inner := newStore(t, "zstd")
	for _, n := range []int{0, 1, 100, 255, 256, 1023, 1024, 1025, 65535, 65536 + 256, 4 << 20, 16 << 20} {
		data := objecttest.Data(uint64(n), n)
		if n == 1 {
			data = []byte("x") // the 1-byte file of the JuiceFS migration test
		}
		key := fmt.Sprintf("chunks/0/0/1_0_%d", n)
		objecttest.Put(t, s, key, data)
		raw := stored(t, inner, key)
		if len(raw) < 6 {
			t.Fatalf("%d bytes: a frame of %d bytes", n, len(raw))
		}
		fhd := raw[4]
		fcsFlag, single, dictFlag := fhd>>6, fhd>>5&1, fhd&3
		if fcsFlag == 0 && single == 0 {
			t.Errorf("%d bytes: the frame header (descriptor %#x) does not declare the content size", n, fhd)
			continue
		}
		pos := 5 + 1 - int(single) + [4]int{0, 1, 2, 4}[dictFlag] // window descriptor unless single segment, then dictionary id
		var size uint64
		switch fcsFlag {
		case 0:
			size = uint64(raw[pos])
		case 1:
			size = uint64(binary.LittleEndian.Uint16(raw[pos:])) + 256
		case 2:
			size = uint64(binary.LittleEndian.Uint32(raw[pos:]))
		case 3:
			size = binary.LittleEndian.Uint64(raw[pos:])
		}
		if size != uint64(n) {
			t.Errorf("%d bytes: the frame declares %d", n, size)
		}
		if got := objecttest.Get(t, s, key, 0, -1); !bytes.Equal(got, data) {
			t.Errorf("%d bytes: round trip gave %d bytes", n, len(got))
		}
	}
}
