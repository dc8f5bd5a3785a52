package gc

import (
	"testing"

	"github.com/sluicefs/sluice/internal/chunk"
)

func TestBlockOf(t *testing.T) {
	const bs = 4 << 20
	sizes := map[uint64]uint32{1: 10 << 20, 2: 100}
	tests := []struct {
		b    chunk.BlockRef
		want bool
	}{
		{chunk.BlockRef{ID: 1, Index: 0, Len: bs}, true},
		{chunk.BlockRef{ID: 1, Index: 2, Len: 2 << 20}, true},
		{chunk.BlockRef{ID: 1, Index: 2, Len: bs}, false}, // wrong length of the last block
		{chunk.BlockRef{ID: 1, Index: 3, Len: 100}, false},
		{chunk.BlockRef{ID: 2, Index: 0, Len: 100}, true},
		{chunk.BlockRef{ID: 3, Index: 0, Len: 100}, false}, // unknown slice
	}
	for _, tc := range tests {
		if got := blockOf(sizes, tc.b, bs); got != tc.want {
			t.Errorf("blockOf(%+v) = %v, want %v", tc.b, got, tc.want)
		}
	}
}
