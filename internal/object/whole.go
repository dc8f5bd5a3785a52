package object

import (
	"bytes"
	"fmt"
	"io"
)

// ReadWhole reads all of r for a decorator that transforms whole objects
// (compression, encryption), failing when r holds more than max bytes.
func ReadWhole(r io.Reader, max int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, fmt.Errorf("object larger than %d bytes", max)
	}
	return b, nil
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
