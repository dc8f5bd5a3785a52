package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"sync"
)

// A cached or staged file is the block's data followed by a trailer:
//
//	data | CRC32C of each page of data (4 bytes each) | len(data) (4) | CRC32C of the two before and the key (4)
//
// Per-page sums let a range read check only the pages it returns; the key
// in the last sum catches a valid file of another block under this name.
const (
	pageSize   = 4 << 10
	footerSize = 8
)

// errCorrupt marks a file whose length or checksums do not match.
var errCorrupt = errors.New("corrupt cache file")

// errRange marks a range read outside a block.
var errRange = errors.New("range outside block")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// pages returns the number of checksummed pages of n data bytes.
func pages(n int) int { return (n + pageSize - 1) / pageSize }

// encodedSize returns the size of the file holding n data bytes.
func encodedSize(n int) int64 { return int64(n) + 4*int64(pages(n)) + footerSize }

// trailer returns the bytes that follow data in the file of key.
func trailer(key string, data []byte) []byte {
	k := pages(len(data))
	t := make([]byte, 4*k+footerSize)
	for i := 0; i < k; i++ {
		page := data[i*pageSize : min(len(data), (i+1)*pageSize)]
		binary.LittleEndian.PutUint32(t[4*i:], crc32.Checksum(page, castagnoli))
	}
	binary.LittleEndian.PutUint32(t[4*k:], uint32(len(data)))
	binary.LittleEndian.PutUint32(t[4*k+4:], tableSum(key, t[:4*k+4]))
	return t
}

// tableSum returns the checksum of the page sums and length of the file
// of key.
func tableSum(key string, table []byte) uint32 {
	return crc32.Update(crc32.Checksum(table, castagnoli), castagnoli, []byte(key))
}

// decode checks the whole file of key and returns its data, capped so
// that an append by the caller cannot overwrite the trailer.
func decode(key string, file []byte) ([]byte, error) {
	if len(file) < footerSize {
		return nil, fmt.Errorf("%w: %d bytes is shorter than a trailer", errCorrupt, len(file))
	}
	n := int(binary.LittleEndian.Uint32(file[len(file)-footerSize:]))
	if encodedSize(n) != int64(len(file)) {
		return nil, fmt.Errorf("%w: %d bytes, but its trailer says %d data bytes", errCorrupt, len(file), n)
	}
	t := file[n:]
	k := pages(n)
	if tableSum(key, t[:4*k+4]) != binary.LittleEndian.Uint32(t[4*k+4:]) {
		return nil, fmt.Errorf("%w: trailer checksum mismatch", errCorrupt)
	}
	for i := 0; i < k; i++ {
		page := file[i*pageSize : min(n, (i+1)*pageSize)]
		if crc32.Checksum(page, castagnoli) != binary.LittleEndian.Uint32(t[4*i:]) {
			return nil, fmt.Errorf("%w: checksum mismatch in page %d", errCorrupt, i)
		}
	}
	return file[:n:n], nil
}

// maxFileSize is the size of the file of the largest block the trailer
// can describe; a larger file is corrupt.
const maxFileSize = math.MaxUint32 + 4*(math.MaxUint32/pageSize+1) + footerSize

// table is the checked trailer of a file: its data length and the sum of
// each page.
type table struct {
	n    int
	sums []byte // 4 bytes per page
}

// readTable reads the trailer of the file r of key, size bytes, in one
// read, and checks it. It fails with errCorrupt on any mismatch.
func readTable(key string, r io.ReaderAt, size int64) (table, error) {
	if size < footerSize || size > maxFileSize {
		return table{}, fmt.Errorf("%w: %d bytes is not the size of a cache file", errCorrupt, size)
	}
	// The data is shorter than the file, so the trailer of its pages is
	// at most this long.
	tail := make([]byte, min(size, 4*int64(pages(int(size)))+footerSize))
	if _, err := r.ReadAt(tail, size-int64(len(tail))); err != nil {
		return table{}, fmt.Errorf("read trailer: %w", err)
	}
	foot := tail[len(tail)-footerSize:]
	n := int(binary.LittleEndian.Uint32(foot))
	if encodedSize(n) != size {
		return table{}, fmt.Errorf("%w: %d bytes, but its trailer says %d data bytes", errCorrupt, size, n)
	}
	k := pages(n)
	t := tail[len(tail)-4*k-footerSize:]
	if tableSum(key, t[:4*k+4]) != binary.LittleEndian.Uint32(t[4*k+4:]) {
		return table{}, fmt.Errorf("%w: trailer checksum mismatch", errCorrupt)
	}
	return table{n: n, sums: t[: 4*k : 4*k]}, nil
}

// readAt fills p with the data at off of the file r whose trailer is t,
// checking every page it reads. It fails with errCorrupt on a mismatch and
// with errRange when p reaches past the data; p may have been written to
// when it fails. A range of whole pages is read straight into p, any
// other into a pooled buffer.
func (t table) readAt(r io.ReaderAt, p []byte, off int64) error {
	if off < 0 || off+int64(len(p)) > int64(t.n) {
		return fmt.Errorf("%w: %d+%d of %d data bytes", errRange, off, len(p), t.n)
	}
	if len(p) == 0 {
		return nil
	}
	end := off + int64(len(p))
	first, last := int(off/pageSize), int((end-1)/pageSize)
	start, stop := int64(first)*pageSize, min(int64(t.n), int64(last+1)*pageSize)
	buf := p
	if off != start || end != stop {
		bp := getBuffer(int(stop - start))
		defer putBuffer(bp)
		buf = *bp
	}
	if _, err := r.ReadAt(buf, start); err != nil {
		return fmt.Errorf("read pages %d-%d: %w", first, last, err)
	}
	for i := first; i <= last; i++ {
		page := buf[(i-first)*pageSize : min(len(buf), (i-first+1)*pageSize)]
		if crc32.Checksum(page, castagnoli) != binary.LittleEndian.Uint32(t.sums[4*i:]) {
			return fmt.Errorf("%w: checksum mismatch in page %d", errCorrupt, i)
		}
	}
	if &buf[0] != &p[0] {
		copy(p, buf[off-start:])
	}
	return nil
}

// maxPooled is the largest buffer kept for reuse: a FUSE read is at most
// 1 MiB, plus a page at each end.
const maxPooled = 1<<20 + 2*pageSize

// buffers holds *[]byte for reads of partial pages.
var buffers sync.Pool

// getBuffer returns a buffer of n bytes from the pool, or a new one. Its
// bytes are not zeroed: readAt overwrites or fails.
func getBuffer(n int) *[]byte {
	if bp, ok := buffers.Get().(*[]byte); ok {
		if cap(*bp) >= n {
			*bp = (*bp)[:n]
			return bp
		}
		buffers.Put(bp)
	}
	b := make([]byte, n, max(n, 2*pageSize))
	return &b
}

// putBuffer returns a buffer from getBuffer to the pool.
func putBuffer(bp *[]byte) {
	if cap(*bp) <= maxPooled {
		buffers.Put(bp)
	}
}
