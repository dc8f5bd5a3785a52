package meta

import (
	"reflect"
	"testing"
)

func TestApplyRange(t *testing.T) {
	w := func(s, e uint64) PosixLock { return PosixLock{Start: s, End: e, Type: LockWrite} }
	r := func(s, e uint64) PosixLock { return PosixLock{Start: s, End: e, Type: LockRead} }
	u := func(s, e uint64) PosixLock { return PosixLock{Start: s, End: e, Type: LockUnlock} }
	cases := []struct {
		name string
		have []PosixLock
		set  PosixLock
		want []PosixLock
	}{
		{"into empty", nil, w(0, 9), []PosixLock{w(0, 9)}},
		{"unlock nothing", nil, u(0, 9), nil},
		{"split by unlock", []PosixLock{w(0, 99)}, u(10, 19), []PosixLock{w(0, 9), w(20, 99)}},
		{"change type in middle", []PosixLock{w(0, 99)}, r(10, 19), []PosixLock{w(0, 9), r(10, 19), w(20, 99)}},
		{"merge adjacent", []PosixLock{w(0, 9)}, w(10, 19), []PosixLock{w(0, 19)}},
		{"merge overlapping", []PosixLock{r(0, 9), r(20, 29)}, r(5, 25), []PosixLock{r(0, 29)}},
		{"to end of file", []PosixLock{w(0, 9)}, w(5, LockEnd), []PosixLock{w(0, LockEnd)}},
		{"unlock all", []PosixLock{w(0, 9), r(20, 29)}, u(0, LockEnd), nil},
		{"keep disjoint", []PosixLock{w(50, 59)}, r(0, 9), []PosixLock{r(0, 9), w(50, 59)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := applyRange(append([]PosixLock(nil), c.have...), c.set)
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
			back, err := decodeRanges(encodeRanges(got))
			if err != nil || len(back) != len(got) {
				t.Errorf("encode/decode round trip: %+v, %v", back, err)
			}
		})
	}
}
