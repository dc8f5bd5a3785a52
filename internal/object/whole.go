package object

import (
	"bytes"
	"fmt"
	"io"
)

// ReadWhole reads all of r for a decorator that transforms whole objects
// (compression, encryption), failing when r holds more than max bytes.
func ReadWhole(r io.Reader, max int) ([]byte, error) {
	b, err := ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, fmt.Errorf("object larger than %d bytes", max)
	}
	return b, nil
}

// ReadAll reads r to its end like io.ReadAll, but in one allocation of
// the right size when r tells how much it holds (a *bytes.Reader, as
// block uploads pass, or an io.LimitedReader around one): io.ReadAll
// grows its buffer from 512 bytes, which for a 4 MiB block zeroes and
// copies the data about twice over.
func ReadAll(r io.Reader) ([]byte, error) {
	n := -1
	switch r := r.(type) {
	case interface{ Len() int }:
		n = r.Len()
	case *io.LimitedReader:
		if l, ok := r.R.(interface{ Len() int }); ok {
			n = int(min(int64(l.Len()), max(r.N, 0)))
		}
	}
	if n < 0 {
		return io.ReadAll(r)
	}
	// One byte more than announced, so that a reader holding more than it
	// said still reads whole, through the append below.
	b := make([]byte, n, n+1)
	if _, err := io.ReadFull(r, b); err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return nil, fmt.Errorf("reader announced %d bytes: %w", n, io.ErrUnexpectedEOF)
		}
		return nil, err
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// RangeReader returns, as the result of a Get, limit bytes of data from
// off; a negative limit reads to the end, and a range past the end holds
// what exists.
func RangeReader(data []byte, off, limit int64) io.ReadCloser {
	data = data[min(off, int64(len(data))):]
	if limit >= 0 && limit < int64(len(data)) {
		data = data[:limit]
	}
	return io.NopCloser(bytes.NewReader(data))
}
