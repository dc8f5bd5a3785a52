package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// A cached or staged file is the block's data followed by a trailer:
//
//	data | CRC32C of each page of data (4 bytes each) | len(data) (4) | CRC32C of the two before and the key (4)
//
// Per-page sums let a range read check only the pages it returns; the key
// in the last sum catches a valid file of another block under this name.
const (
	pageSize   = 32 << 10
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

// readRange fills p with the data at off of the file r of key, size bytes,
// checking the trailer and every page it reads from. It returns the data
// length and fails with errCorrupt on any mismatch and errRange when p
// reaches past the data.
func readRange(key string, r io.ReaderAt, size int64, p []byte, off int64) (int, error) {
	var foot [footerSize]byte
	if size < footerSize {
		return 0, fmt.Errorf("%w: %d bytes is shorter than a trailer", errCorrupt, size)
	}
	if _, err := r.ReadAt(foot[:], size-footerSize); err != nil {
		return 0, fmt.Errorf("read trailer: %w", err)
	}
	n := int(binary.LittleEndian.Uint32(foot[:]))
	if encodedSize(n) != size {
		return 0, fmt.Errorf("%w: %d bytes, but its trailer says %d data bytes", errCorrupt, size, n)
	}
	k := pages(n)
	sums := make([]byte, 4*k+4)
	if _, err := r.ReadAt(sums[:4*k], int64(n)); err != nil {
		return 0, fmt.Errorf("read checksums: %w", err)
	}
	copy(sums[4*k:], foot[:4])
	if tableSum(key, sums) != binary.LittleEndian.Uint32(foot[4:]) {
		return 0, fmt.Errorf("%w: trailer checksum mismatch", errCorrupt)
	}
	if off < 0 || off+int64(len(p)) > int64(n) {
		return n, fmt.Errorf("%w: %d+%d of %d data bytes", errRange, off, len(p), n)
	}
	if len(p) == 0 {
		return n, nil
	}
	first, last := int(off/pageSize), int((off+int64(len(p))-1)/pageSize)
	buf := make([]byte, min(n, (last+1)*pageSize)-first*pageSize)
	if _, err := r.ReadAt(buf, int64(first*pageSize)); err != nil {
		return n, fmt.Errorf("read pages %d-%d: %w", first, last, err)
	}
	for i := first; i <= last; i++ {
		page := buf[(i-first)*pageSize : min(len(buf), (i-first+1)*pageSize)]
		if crc32.Checksum(page, castagnoli) != binary.LittleEndian.Uint32(sums[4*i:]) {
			return n, fmt.Errorf("%w: checksum mismatch in page %d", errCorrupt, i)
		}
	}
	copy(p, buf[off-int64(first*pageSize):])
	return n, nil
}
