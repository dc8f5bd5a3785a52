package metaserver

import (
	"encoding/binary"
	"fmt"
	"runtime/debug"
	"testing"

	"github.com/sluicefs/sluice/internal/wire"
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
	var ws []wire.Write
	for i := uint64(0); i < 100_000; i++ {
		ino := 1000 + i
		dir := 2 + i/1000
		ws = append(ws,
			wire.Write{Key: key(ino, 'I'), Value: make([]byte, 66)},
			wire.Write{Key: key(dir, 'D', []byte(fmt.Sprintf("file-%06d", i%1000))...), Value: make([]byte, 9)},
			wire.Write{Key: key(ino, 'C', 0, 0, 0, 0), Value: make([]byte, 24)})
		if len(ws) >= 3000 {
			applyWrites(t, ws, 1)
			ws = ws[:0]
		}
	}
	if _, err := writeCheckpoint(dir, 7, t, nil, nil); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // as recover does
	for i := 0; i < b.N; i++ {
		if _, got, _, _, _, err := readCheckpoint(checkpointPath(dir, 7)); err != nil || got.Len() != t.Len() {
			b.Fatalf("loaded %v pairs, %v", got, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(t.Len()), "ns/pair")
}
