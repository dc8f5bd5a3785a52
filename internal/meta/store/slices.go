package store

import (
	"encoding/binary"
	"fmt"
)

// SliceSize is the length of one encoded slice (see EncodeSlice).
const SliceSize = 4 + 8 + 4 + 4 + 4

// EncodeSlice appends the encoding of s to b: Pos, Id, Size, Off and Len,
// big-endian. A chunk's slice list is the concatenation of its slices'
// encodings, so an engine appends a slice by appending bytes.
func EncodeSlice(b []byte, s Slice) []byte {
	be := binary.BigEndian
	b = be.AppendUint32(b, s.Pos)
	b = be.AppendUint64(b, s.Id)
	b = be.AppendUint32(b, s.Size)
	b = be.AppendUint32(b, s.Off)
	return be.AppendUint32(b, s.Len)
}

// EncodeSlices returns the encoding of a slice list.
func EncodeSlices(slices []Slice) []byte {
	b := make([]byte, 0, len(slices)*SliceSize)
	for _, s := range slices {
		b = EncodeSlice(b, s)
	}
	return b
}

// DecodeSlices decodes a slice list that EncodeSlice built.
func DecodeSlices(v []byte) ([]Slice, error) {
	if len(v)%SliceSize != 0 {
		return nil, fmt.Errorf("corrupt slice list (%d bytes)", len(v))
	}
	be := binary.BigEndian
	out := make([]Slice, len(v)/SliceSize)
	for i := range out {
		b := v[i*SliceSize:]
		out[i] = Slice{Pos: be.Uint32(b), Id: be.Uint64(b[4:]), Size: be.Uint32(b[12:]),
			Off: be.Uint32(b[16:]), Len: be.Uint32(b[20:])}
	}
	return out, nil
}
