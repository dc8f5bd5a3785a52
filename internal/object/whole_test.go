package object

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// lyingReader announces fewer or more bytes than it holds.
type lyingReader struct {
	io.Reader
	n int
}

func (l lyingReader) Len() int { return l.n }

func TestReadAll(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 100_000)
	for _, tc := range []struct {
		name    string
		r       io.Reader
		want    []byte
		wantErr bool
	}{
		{"bytes.Reader", bytes.NewReader(data), data, false},
		{"empty", bytes.NewReader(nil), []byte{}, false},
		{"limited", io.LimitReader(bytes.NewReader(data), 12345), data[:12345], false},
		{"limit past the end", io.LimitReader(bytes.NewReader(data[:10]), 100), data[:10], false},
		{"no length", iotest.HalfReader(bytes.NewReader(data)), data, false},
		{"says less than it holds", lyingReader{bytes.NewReader(data), 10}, data, false},
		{"says more than it holds", lyingReader{bytes.NewReader(data[:10]), 20}, nil, true},
		{"fails", iotest.ErrReader(errors.New("boom")), nil, true},
		{"strings.Reader", strings.NewReader("abc"), []byte("abc"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadAll(tc.r)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && !bytes.Equal(got, tc.want) {
				t.Fatalf("read %d bytes, want %d", len(got), len(tc.want))
			}
		})
	}
}

// BenchmarkReadAll compares ReadAll with io.ReadAll on a 4 MiB block.
func BenchmarkReadAll(b *testing.B) {
	block := make([]byte, 4<<20)
	for _, f := range []struct {
		name string
		read func(io.Reader) ([]byte, error)
	}{{"object.ReadAll", ReadAll}, {"io.ReadAll", io.ReadAll}} {
		b.Run(f.name, func(b *testing.B) {
			b.SetBytes(int64(len(block)))
			for range b.N {
				if _, err := f.read(bytes.NewReader(block)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
