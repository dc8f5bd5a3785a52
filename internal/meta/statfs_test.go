package meta

import (
	"math"
	"testing"
)

func TestRoomFor(t *testing.T) {
	tests := []struct {
		total, used, want uint64
	}{
		{100, 0, 100},
		{100, 80, 100},
		{100, 81, 200},
		{1 << 50, 1 << 62, 1 << 63},
		{1 << 50, math.MaxUint64 - 1, 1 << 63}, // stops before overflowing
		{1 << 50, 1<<63 + 1<<62, 1 << 63},
	}
	for _, tt := range tests {
		if got := roomFor(tt.total, tt.used); got != tt.want {
			t.Errorf("roomFor(%d, %d) = %d, want %d", tt.total, tt.used, got, tt.want)
		}
	}
}
