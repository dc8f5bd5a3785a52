package metaserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"testing/iotest"

	"github.com/sluicefs/sluice/internal/wire"
)

// smallCheckpoint encodes a checkpoint of a few pairs and dedupe entries.
func smallCheckpoint(t *testing.T) (data []byte, pairs int) {
	t.Helper()
	tr := newTree()
	var ws []wire.Write
	for i := range 20 {
		ws = append(ws, set(fmt.Sprintf("key%02d", i), fmt.Sprintf("value %d", i)))
	}
	applyWrites(tr, ws, 1)
	dd := []dedupeEntry{{k: txnKey{1, 2}, index: 3}}
	calls := []dedupeEntry{{k: txnKey{4, 5}, index: 6}}
	var buf bytes.Buffer
	if err := encodeCheckpoint(&buf, 9, tr, dd, calls); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), tr.Len()
}

// TestDecodeCheckpointStream: a checkpoint decodes from a stream however
// it is cut into reads, and a truncated, bit-flipped or failing stream is
// refused whole.
func TestDecodeCheckpointStream(t *testing.T) {
	data, pairs := smallCheckpoint(t)
	for name, r := range map[string]func() io.Reader{
		"whole":     func() io.Reader { return bytes.NewReader(data) },
		"one byte":  func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) },
		"half":      func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) },
		"data, EOF": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(data)) },
	} {
		index, tr, dd, calls, _, err := decodeCheckpoint(r(), "test")
		if err != nil || index != 9 || tr.Len() != pairs || len(dd.entries()) != 1 || len(calls.entries()) != 1 {
			t.Fatalf("%s: index %d, %v pairs, %v", name, index, tr, err)
		}
	}
	for n := range len(data) {
		if _, tr, _, _, _, err := decodeCheckpoint(iotest.HalfReader(bytes.NewReader(data[:n])), "test"); !errors.Is(err, errBadCheckpoint) || tr != nil {
			t.Fatalf("cut to %d of %d bytes: %v", n, len(data), err)
		}
	}
	longer := append(append([]byte(nil), data...), 0)
	if _, _, _, _, _, err := decodeCheckpoint(bytes.NewReader(longer), "test"); !errors.Is(err, errBadCheckpoint) {
		t.Fatalf("a byte after the end: %v", err)
	}
	for i := range data {
		for _, bit := range []byte{0x01, 0x80} {
			bad := append([]byte(nil), data...)
			bad[i] ^= bit
			if _, tr, _, _, _, err := decodeCheckpoint(bytes.NewReader(bad), "test"); !errors.Is(err, errBadCheckpoint) || tr != nil {
				t.Fatalf("bit %#x of byte %d flipped: %v", bit, i, err)
			}
		}
	}
	broken := errors.New("connection reset")
	r := io.MultiReader(bytes.NewReader(data[:len(data)/2]), iotest.ErrReader(broken))
	if _, tr, _, _, _, err := decodeCheckpoint(r, "test"); !errors.Is(err, broken) || tr != nil {
		t.Fatalf("a stream that fails: %v", err)
	}
}

// TestRestoreRefusesDamage: a member handed a damaged snapshot keeps its
// state.
func TestRestoreRefusesDamage(t *testing.T) {
	s := open(t, t.TempDir(), 1<<20)
	defer s.Close()
	commit(t, s, set("mine", "v"))
	want := dump(s)
	data, _ := smallCheckpoint(t)
	for name, bad := range map[string][]byte{
		"truncated": data[:len(data)-3],
		"flipped":   append(append([]byte(nil), data[:40]...), append([]byte{data[40] ^ 4}, data[41:]...)...),
	} {
		if err := (*fsm)(s).Restore(io.NopCloser(bytes.NewReader(bad))); !errors.Is(err, errBadCheckpoint) {
			t.Fatalf("%s snapshot: %v", name, err)
		}
		if got := dump(s); got != want {
			t.Fatalf("%s snapshot: state %q, want %q", name, got, want)
		}
	}
}
