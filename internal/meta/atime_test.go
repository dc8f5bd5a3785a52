package meta

import (
	"testing"
	"time"
)

func TestNeedsAtime(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	attr := func(atime, mtime, ctime int64) *Attr { return &Attr{Atime: atime, Mtime: mtime, Ctime: ctime} }
	cases := []struct {
		name string
		mode string
		a    *Attr
		want bool
	}{
		{"noatime never", AtimeNone, attr(0, 999_000, 999_000), false},
		{"strict always", AtimeStrict, attr(999_999, 1, 1), true},
		{"relatime: atime older than mtime", AtimeRelative, attr(999_000, 999_500, 1), true},
		{"relatime: atime equal to ctime", AtimeRelative, attr(999_000, 1, 999_000), true},
		{"relatime: newer atime, recent", AtimeRelative, attr(999_900, 999_000, 999_000), false},
		{"relatime: a day old", AtimeRelative, attr(1_000_000-86401, 1, 1), true},
	}
	for _, c := range cases {
		if got := AtimeDue(c.mode, c.a, now); got != c.want {
			t.Errorf("%s: AtimeDue = %v, want %v", c.name, got, c.want)
		}
	}
	if _, err := ParseAtimeMode("sometimes"); err == nil {
		t.Error("ParseAtimeMode accepted an unknown mode")
	}
}
