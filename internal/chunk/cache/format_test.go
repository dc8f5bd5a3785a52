package cache

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// readRange reads a range as Disk.ReadAt does: it fills p with the data
// at off of the file r of key, size bytes, checking the trailer and every
// page it reads from. It returns the data length and fails with
// errCorrupt on any mismatch and errRange when p reaches past the data.
func readRange(key string, r io.ReaderAt, size int64, p []byte, off int64) (int, error) {
	t, err := readTable(key, r, size)
	if err != nil {
		return 0, err
	}
	return t.n, t.readAt(r, p, off)
}

func encode(key string, data []byte) []byte {
	return append(append([]byte(nil), data...), trailer(key, data)...)
}

const fmtKey = "chunks/0/0/1_0_1"

func TestFormatRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, pageSize - 1, pageSize, pageSize + 1, 3*pageSize + 17, 4 << 20} {
		data := randomBytes(uint64(n), n)
		file := encode(fmtKey, data)
		if int64(len(file)) != encodedSize(n) {
			t.Fatalf("n=%d: file of %d bytes, encodedSize says %d", n, len(file), encodedSize(n))
		}
		got, err := decode(fmtKey, file)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("n=%d: decode = %d bytes, %v; want the data back", n, len(got), err)
		}
		if cap(got) != n {
			t.Errorf("n=%d: decoded data has capacity %d, an append would overwrite the trailer", n, cap(got))
		}
		ranges := [][2]int{{0, n}, {0, min(n, 1)}, {n / 2, n / 3}, {max(0, n-5), min(n, 5)}, {n, 0}}
		if n >= 2*pageSize {
			ranges = append(ranges, [2]int{pageSize - 3, 6}, [2]int{pageSize, pageSize})
		}
		for _, r := range ranges {
			p := make([]byte, r[1])
			m, err := readRange(fmtKey, bytes.NewReader(file), int64(len(file)), p, int64(r[0]))
			if err != nil || m != n || !bytes.Equal(p, data[r[0]:r[0]+r[1]]) {
				t.Errorf("n=%d: readRange(%d+%d) = %d, %v, or wrong bytes", n, r[0], r[1], m, err)
			}
		}
		if n > 0 {
			p := make([]byte, 2)
			if _, err := readRange(fmtKey, bytes.NewReader(file), int64(len(file)), p, int64(n-1)); !errors.Is(err, errRange) {
				t.Errorf("n=%d: readRange past the end: err = %v, want errRange", n, err)
			}
		}
	}
}

// TestFormatCorruption damages a file in each of its parts and checks that
// both whole and range reads refuse it.
func TestFormatCorruption(t *testing.T) {
	const n = 2*pageSize + 100
	data := randomBytes(1, n)
	tests := []struct {
		name   string
		damage func([]byte) []byte
		// page a range read must touch to see the damage; -1: any read.
		page int
	}{
		{"flip first data byte", func(f []byte) []byte { f[0] ^= 1; return f }, 0},
		{"flip last data byte", func(f []byte) []byte { f[n-1] ^= 0x80; return f }, 2},
		{"flip a page checksum", func(f []byte) []byte { f[n+4] ^= 1; return f }, -1},
		{"flip the length", func(f []byte) []byte { f[len(f)-8] ^= 1; return f }, -1},
		{"flip the trailer checksum", func(f []byte) []byte { f[len(f)-1] ^= 1; return f }, -1},
		{"truncate by one", func(f []byte) []byte { return f[:len(f)-1] }, -1},
		{"truncate to the data", func(f []byte) []byte { return f[:n] }, -1},
		{"truncate to nothing", func(f []byte) []byte { return f[:0] }, -1},
		{"append a byte", func(f []byte) []byte { return append(f, 0) }, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := tt.damage(encode(fmtKey, data))
			if _, err := decode(fmtKey, file); !errors.Is(err, errCorrupt) {
				t.Errorf("decode: err = %v, want errCorrupt", err)
			}
			if _, err := decode(fmtKey+"0", encode(fmtKey, data)); !errors.Is(err, errCorrupt) {
				t.Errorf("decode under another key: err = %v, want errCorrupt", err)
			}
			page := max(tt.page, 0)
			// 10 bytes go through a buffer, the whole page straight
			// into p.
			for _, m := range []int{10, min(pageSize, n-page*pageSize)} {
				p := make([]byte, m)
				_, err := readRange(fmtKey, bytes.NewReader(file), int64(len(file)), p, int64(page*pageSize))
				if !errors.Is(err, errCorrupt) {
					t.Errorf("readRange of %d bytes of page %d: err = %v, want errCorrupt", m, page, err)
				}
			}
		})
	}
}
