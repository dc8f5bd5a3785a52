package cli

import (
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		unit int64
		want int64
		err  bool
	}{
		{"4M", 1 << 10, 4 << 20, false},
		{"4096", 1 << 10, 4 << 20, false}, // plain number in KiB, as JuiceFS users type it
		{"512K", 1 << 10, 512 << 10, false},
		{"1G", 1 << 20, 1 << 30, false},
		{"16MiB", 1 << 10, 16 << 20, false},
		{"100B", 1 << 10, 100, false},
		{"1.5G", 1, 3 << 29, false},
		{"10", 1 << 30, 10 << 30, false},
		{"lots", 1, 0, true},
		{"-1M", 1, 0, true},
		{"", 1, 0, true},
	}
	for _, c := range cases {
		got, err := parseSize(c.in, c.unit)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("parseSize(%q, %d) = %d, %v; want %d, error %v", c.in, c.unit, got, err, c.want, c.err)
		}
	}
}

func TestSecondsValue(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"1", time.Second, false},
		{"0.5", 500 * time.Millisecond, false},
		{"0", 0, false},
		{"2s", 2 * time.Second, false},
		{"100ms", 100 * time.Millisecond, false},
		{"-1", 0, true},
		{"soon", 0, true},
	}
	for _, c := range cases {
		var d time.Duration
		err := secondsValue{&d}.Set(c.in)
		if (err != nil) != c.err || d != c.want {
			t.Errorf("Set(%q) = %v, %v; want %v, error %v", c.in, d, err, c.want, c.err)
		}
	}
}
