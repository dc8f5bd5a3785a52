package dump

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Compression names a dump file's compression by its suffix: "gzip" for
// .gz, "zstd" for .zst and .zstd, "" for none.
func Compression(name string) string {
	switch {
	case strings.HasSuffix(name, ".gz"):
		return "gzip"
	case strings.HasSuffix(name, ".zst"), strings.HasSuffix(name, ".zstd"):
		return "zstd"
	}
	return ""
}

// NewWriter returns a writer that compresses into w as Compression(name)
// says. Close flushes it (it does not close w).
func NewWriter(w io.Writer, name string) (io.WriteCloser, error) {
	switch Compression(name) {
	case "gzip":
		return gzip.NewWriterLevel(w, gzip.DefaultCompression)
	case "zstd":
		z, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return z, nil
	}
	return nopCloser{w}, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Magic numbers of the compressed formats.
var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// NewReader returns a reader of the dump in r, decompressed when its first
// bytes are those of gzip or zstd, whatever the file's name.
func NewReader(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	head, err := br.Peek(4)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("read dump: %w", err)
	}
	switch {
	case bytes.HasPrefix(head, gzipMagic):
		z, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return z, nil
	case bytes.HasPrefix(head, zstdMagic):
		z, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(2))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return z.IOReadCloser(), nil
	}
	return io.NopCloser(br), nil
}
