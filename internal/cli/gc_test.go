package cli

import (
	"testing"

	"github.com/sluicefs/sluice/internal/chunk"
)

func TestParseBlockKey(t *testing.T) {
	tests := []struct {
		key  string
		want blockRef
		ok   bool
	}{
		{"chunks/0/0/1_0_4194304", blockRef{1, 0, 4194304}, true},
		{"chunks/0/1/1234_2_100", blockRef{1234, 2, 100}, true},
		{"chunks/1/1000/1000000_0_5", blockRef{1000000, 0, 5}, true},
		{"chunks/D2/0/1/1234_0_100", blockRef{1234, 0, 100}, true}, // 1234 % 256 = 0xD2
		{"chunks/d2/0/1/1234_0_100", blockRef{}, false},            // lower-case hash
		{"chunks/D3/0/1/1234_0_100", blockRef{}, false},            // wrong hash
		{"chunks/0/2/1234_0_100", blockRef{}, false},               // wrong directory
		{"chunks/0/1/1234_0", blockRef{}, false},
		{"chunks/0/1/1234_0_100_7", blockRef{}, false},
		{"chunks/0/1/01234_0_100", blockRef{}, false}, // not canonical
		{"chunks/0/1/1234_x_100", blockRef{}, false},
		{"chunks/readme.txt", blockRef{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			got, ok := parseBlockKey(tc.key)
			if ok != tc.ok || got != tc.want {
				t.Errorf("parseBlockKey(%q) = %+v, %v; want %+v, %v", tc.key, got, ok, tc.want, tc.ok)
			}
		})
	}
	// Every key chunk.BlockKey makes parses back.
	for _, hash := range []bool{false, true} {
		for _, id := range []uint64{1, 999, 1000, 123456789, 1<<40 + 7} {
			key := chunk.BlockKey(id, 3, 65536, hash)
			if got, ok := parseBlockKey(key); !ok || got != (blockRef{id, 3, 65536}) {
				t.Errorf("parseBlockKey(%q) = %+v, %v", key, got, ok)
			}
		}
	}
}

func TestBlockOf(t *testing.T) {
	const bs = 4 << 20
	sizes := map[uint64]uint32{1: 10 << 20, 2: 100}
	tests := []struct {
		b    blockRef
		want bool
	}{
		{blockRef{1, 0, bs}, true},
		{blockRef{1, 2, 2 << 20}, true},
		{blockRef{1, 2, bs}, false}, // wrong length of the last block
		{blockRef{1, 3, 100}, false},
		{blockRef{2, 0, 100}, true},
		{blockRef{3, 0, 100}, false}, // unknown slice
	}
	for _, tc := range tests {
		if got := blockOf(sizes, tc.b, bs); got != tc.want {
			t.Errorf("blockOf(%+v) = %v, want %v", tc.b, got, tc.want)
		}
	}
}
