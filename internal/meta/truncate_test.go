package meta

import (
	"reflect"
	"strings"
	"testing"
)

func TestSplitStored(t *testing.T) {
	s := func(id uint64) Slice { return Slice{Id: id, Size: 1, Len: 1} }
	hole := Slice{Len: 1}
	cases := []struct {
		name       string
		in         []Slice
		n          int
		keep, drop []Slice
	}{
		{"all fit", []Slice{s(1), s(2)}, 5, nil, []Slice{s(1), s(2)}},
		{"cut", []Slice{s(1), s(2), s(3)}, 2, []Slice{s(3)}, []Slice{s(1), s(2)}},
		{"holes before the cut go", []Slice{hole, s(1), hole, s(2), hole}, 1, []Slice{hole, s(2), hole}, []Slice{s(1)}},
		{"only holes", []Slice{hole, hole}, 1, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			keep, drop := splitStored(tc.in, tc.n)
			if !reflect.DeepEqual(keep, tc.keep) || !reflect.DeepEqual(drop, tc.drop) {
				t.Fatalf("splitStored(%v, %d) = %v, %v; want %v, %v", tc.in, tc.n, keep, drop, tc.keep, tc.drop)
			}
			if countStored(keep)+countStored(drop) != countStored(tc.in) {
				t.Fatalf("slices lost: keep %v drop %v of %v", keep, drop, tc.in)
			}
		})
	}
}

func TestTrashEntryName(t *testing.T) {
	cases := []struct {
		parent, ino Ino
		name, want  string
	}{
		{1, 42, "f", "1-42-f"},
		{123, 456, "a-b-c", "123-456-a-b-c"},
		{7, 8, strings.Repeat("x", 255), ("7-8-" + strings.Repeat("x", 255))[:255]},
	}
	for _, tc := range cases {
		if got := string(trashEntryName(tc.parent, tc.ino, []byte(tc.name))); got != tc.want {
			t.Errorf("trashEntryName(%d, %d, %q) = %q, want %q", tc.parent, tc.ino, tc.name, got, tc.want)
		}
	}
}

func TestIsTrash(t *testing.T) {
	for _, tc := range []struct {
		ino  Ino
		want bool
	}{
		{RootIno, false},
		{TrashIno - 1, false},
		{TrashIno, true},
		{TrashIno + 1 + 500000, true},
		{trashEnd, false},
	} {
		if got := IsTrash(tc.ino); got != tc.want {
			t.Errorf("IsTrash(%#x) = %v, want %v", uint64(tc.ino), got, tc.want)
		}
	}
}
