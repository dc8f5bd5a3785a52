package meta_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// bigVolume writes a volume of n files of one slice each in directories
// of 1000, straight through the store (as `load` would), for the scans to
// work through.
func bigVolume(tb testing.TB, n int) store.Store {
	tb.Helper()
	ctx := context.Background()
	st := kvstore.New(mem.New(tb.Name()))
	if _, err := meta.FormatVolume(ctx, st, &meta.Format{Name: "big", UUID: "u", Storage: "mem", Bucket: "b", BlockSize: 4096}); err != nil {
		tb.Fatal(err)
	}
	const perDir = 1000
	dirs := (n + perDir - 1) / perDir
	ino := meta.Ino(2)
	for d := 0; d < dirs; d++ {
		dir := ino
		ino++
		err := st.Update(ctx, func(tx store.Tx) error {
			root, err := tx.Node(meta.RootIno)
			if err != nil {
				return err
			}
			root.Nlink++
			tx.SetNode(root)
			tx.SetNode(&store.Node{Ino: dir, Type: store.TypeDir, Mode: 0o755, Nlink: 2, Parent: meta.RootIno})
			tx.SetEdge(meta.RootIno, store.Edge{Name: []byte(fmt.Sprintf("d%d", d)), Ino: dir, Type: store.TypeDir})
			for i := 0; i < min(perDir, n-d*perDir); i++ {
				f := dir + 1 + meta.Ino(i)
				tx.SetNode(&store.Node{Ino: f, Type: store.TypeFile, Mode: 0o644, Nlink: 1, Parent: dir, Length: 4096})
				tx.SetEdge(dir, store.Edge{Name: []byte(fmt.Sprintf("f%d", i)), Ino: f, Type: store.TypeFile})
				tx.SetChunk(f, 0, []store.Slice{{Id: uint64(f), Size: 4096, Len: 4096}})
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
		ino += perDir
	}
	return st
}

// TestCheckBigVolume checks that a volume of many files checks clean and
// that every slice is found.
func TestCheckBigVolume(t *testing.T) {
	st := bigVolume(t, 5000)
	var damage []string
	res, err := meta.Check(context.Background(), st, meta.CheckOptions{OnDamage: func(d meta.Damage) { damage = append(damage, d.String()) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(damage) > 0 {
		t.Fatalf("%d problems, first: %s", len(damage), damage[0])
	}
	if res.Inodes != 5000+5+1 || len(res.Slices) != 5000 {
		t.Fatalf("checked %d inodes and %d slices, want 5006 and 5000", res.Inodes, len(res.Slices))
	}
}

// BenchmarkCheck measures a full check; heap-B/inode is the memory the
// check holds at its end per inode checked.
func BenchmarkCheck(b *testing.B) {
	const n = 100_000
	st := bigVolume(b, n)
	ctx := context.Background()
	var before, after runtime.MemStats
	var spent time.Duration
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		res, err := meta.Check(ctx, st, meta.CheckOptions{OnDamage: func(d meta.Damage) { b.Fatal(d) }})
		if err != nil {
			b.Fatal(err)
		}
		spent += time.Since(start)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(res.Inodes), "heap-B/inode")
		runtime.KeepAlive(res)
	}
	b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N)/n, "check-ns/inode")
}
