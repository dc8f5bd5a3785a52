package store

import (
	"math"
	"reflect"
	"testing"
)

func TestSlicesRoundTrip(t *testing.T) {
	in := []Slice{{Pos: 0, Id: 1, Size: 4096, Off: 0, Len: 4096},
		{Pos: math.MaxUint32, Id: math.MaxUint64, Size: math.MaxUint32, Off: 5, Len: 6}, {Pos: 10, Len: 20}}
	b := EncodeSlices(in[:1])
	for _, s := range in[1:] {
		b = EncodeSlice(b, s)
	}
	got, err := DecodeSlices(b)
	if err != nil || !reflect.DeepEqual(got, in) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if _, err := DecodeSlices(b[:len(b)-1]); err == nil {
		t.Fatalf("truncated slice list decoded")
	}
	if got, err := DecodeSlices(nil); err != nil || len(got) != 0 {
		t.Fatalf("empty slice list: %+v, %v", got, err)
	}
}
