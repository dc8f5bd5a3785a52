package metaserver

import (
	"encoding/binary"
	"runtime/debug"
	"testing"
)

// BenchmarkCheckpointLoad loads a checkpoint of 300,000 pairs shaped as a
// volume's (node, entry and chunk records of 100,000 small files).
//
//	go test -run XXX -bench CheckpointLoad ./internal/metaserver
func BenchmarkCheckpointLoad(b *testing.B) {
	dir := b.TempDir()
	t := newTree()
	key := func(ino uint64, kind byte, rest ...byte) []byte {
		k := append([]byte{'A'}, binary.BigEndian.AppendUint64(nil, ino)...)
		return append(append(k, kind), rest...)
	}
	for i := uint64(0); i < 100_000; i++ {
		ino := 1000 + i
		dir := 2 + i/1000
		t.ReplaceOrInsert(newItem(key(ino, 'I'), make([]byte, 66), 1, nil))
		t.ReplaceOrInsert(newItem(key(dir, 'D', []byte("file-000123")...), make([]byte, 9), 1, nil))
		t.ReplaceOrInsert(newItem(key(ino, 'C', 0, 0, 0, 0), make([]byte, 24), 1, nil))
	}
	if _, err := writeCheckpoint(dir, 7, t, nil); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // as recover does
	for i := 0; i < b.N; i++ {
		if _, got, _, _, err := readCheckpoint(checkpointPath(dir, 7)); err != nil || got.Len() != t.Len() {
			b.Fatalf("loaded %v pairs, %v", got, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(t.Len()), "ns/pair")
}
