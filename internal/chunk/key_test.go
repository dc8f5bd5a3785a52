package chunk

import (
	"errors"
	"testing"
)

func TestParseBlockKey(t *testing.T) {
	tests := []struct {
		key  string
		want BlockRef // zero: the key is no block key
	}{
		{"chunks/0/0/1_0_4194304", BlockRef{1, 0, 4194304, false}},
		{"chunks/0/1/1234_2_100", BlockRef{1234, 2, 100, false}},
		{"chunks/1/1000/1000000_0_5", BlockRef{1000000, 0, 5, false}},
		{"chunks/D2/0/1234_0_100", BlockRef{1234, 0, 100, true}}, // 1234 % 256 = 0xD2
		{"chunks/00/0/256_0_1", BlockRef{256, 0, 1, true}},
		{"chunks/40/1/1000000_0_5", BlockRef{1000000, 0, 5, true}}, // 1000000 % 256 = 0x40
		{"chunks/10/0/16_0_1", BlockRef{16, 0, 1, true}},           // decimal-looking hash
		{"chunks/10/10000/10000000_0_1", BlockRef{10000000, 0, 1, false}},
		{"chunks/0/0/7_1048576_1073741824", BlockRef{7, 1 << 20, 1 << 30, false}}, // the largest accepted
		{"chunks/18446744073709/18446744073709551/18446744073709551615_0_1", BlockRef{1<<64 - 1, 0, 1, false}},

		{"chunks/d2/0/1234_0_100", BlockRef{}},  // lower-case hash
		{"chunks/D3/0/1234_0_100", BlockRef{}},  // wrong hash
		{"chunks/D/0/1234_0_100", BlockRef{}},   // one hex digit
		{"chunks/0D2/0/1234_0_100", BlockRef{}}, // three hex digits
		{"chunks/XY/0/1234_0_100", BlockRef{}},
		{"chunks/D2/0/1/1234_0_100", BlockRef{}},                                         // the hashed form has no <id/1e3> level
		{"chunks/D2/1/1234_0_100", BlockRef{}},                                           // wrong directory under the hash                                         // no hex
		{"chunks/0/2/1234_0_100", BlockRef{}},                                            // wrong directory
		{"chunks/1/1/1234_0_100", BlockRef{}},                                            // wrong top directory
		{"chunks/0/1/1234_0", BlockRef{}},                                                // no length
		{"chunks/0/1/1234_0_100_7", BlockRef{}},                                          // one number too many
		{"chunks/0/1/01234_0_100", BlockRef{}},                                           // not canonical
		{"chunks/0/1/1234_00_100", BlockRef{}},                                           // not canonical
		{"chunks/0/1/1234_+0_100", BlockRef{}},                                           // a sign
		{"chunks/0/1/1234_x_100", BlockRef{}},                                            // not a number
		{"chunks/0/1/1234_-1_100", BlockRef{}},                                           // negative
		{"chunks/0/1/1234_0_", BlockRef{}},                                               // empty length
		{"chunks/0/0/7_1048577_1", BlockRef{}},                                           // index out of range
		{"chunks/0/0/7_0_1073741825", BlockRef{}},                                        // length out of range
		{"chunks/18446744073709/18446744073709551/18446744073709551616_0_1", BlockRef{}}, // id overflows
		{"chunks/0/0/1_0_100.tmp", BlockRef{}},                                           // a temporary file
		{"chunks/0/0/1_0_100/", BlockRef{}},                                              // a directory
		{"chunks//0/1_0_100", BlockRef{}},                                                // empty directory
		{"chunks/readme.txt", BlockRef{}},
		{"chunks/", BlockRef{}},
		{"0/0/1_0_100", BlockRef{}},            // not under chunks/
		{"vol/chunks/0/0/1_0_100", BlockRef{}}, // still under the volume's prefix
		{"", BlockRef{}},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			got, err := ParseBlockKey(tc.key)
			if tc.want == (BlockRef{}) {
				if !errors.Is(err, ErrNotBlockKey) {
					t.Errorf("ParseBlockKey(%q) = %+v, %v; want ErrNotBlockKey", tc.key, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseBlockKey(%q) = %+v, %v; want %+v", tc.key, got, err, tc.want)
			}
			if back := got.Key(); back != tc.key {
				t.Errorf("ParseBlockKey(%q).Key() = %q", tc.key, back)
			}
		})
	}
}

// TestBlockKeyRoundTrip checks that every key BlockKey makes parses back
// to what made it.
func TestBlockKeyRoundTrip(t *testing.T) {
	for _, hash := range []bool{false, true} {
		for _, id := range []uint64{1, 255, 256, 999, 1000, 999_999, 1_000_000, 123456789, 1<<40 + 7, 1<<64 - 1} {
			for _, b := range [][2]int{{0, 4 << 20}, {3, 65536}, {1023, 1}, {7, 0}} {
				want := BlockRef{ID: id, Index: b[0], Len: b[1], HashPrefix: hash}
				key := BlockKey(id, b[0], b[1], hash)
				if got, err := ParseBlockKey(key); err != nil || got != want {
					t.Errorf("ParseBlockKey(%q) = %+v, %v; want %+v", key, got, err, want)
				}
			}
		}
	}
}
