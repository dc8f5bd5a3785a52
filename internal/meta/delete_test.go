package meta_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// TestDeletionRounds checks how much of a backlog of deleted files one
// round drops: a background round whose budget has passed stops after one
// listing of the queue, and a round without a budget (FlushDeletions)
// drains it.
func TestDeletionRounds(t *testing.T) {
	const n = 250
	st := spaceStore(t, func(tx store.Tx) {
		for i := range n {
			ino := meta.Ino(100 + i)
			tx.SetDelFile(store.DelFile{Ino: ino, Length: 100}, true)
			tx.SetChunk(ino, 0, []meta.Slice{sl(0, uint64(1000+i), 100)})
		}
	})
	ctx := context.Background()
	// A read-only client runs no background deletions, which would drain
	// the queue between the rounds below; the rounds themselves write.
	c, err := meta.NewSession(ctx, st, meta.Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	queued := func() (files, slices int) {
		t.Helper()
		if err := st.View(ctx, func(tx store.Tx) error {
			fs, err := tx.DelFiles(0)
			if err != nil {
				return err
			}
			ss, err := tx.DelSlices(0)
			files, slices = len(fs), len(ss)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return files, slices
	}
	if err := c.ProcessDeletions(ctx, time.Nanosecond); err != nil {
		t.Fatal(err)
	}
	if files, slices := queued(); files != n-100 || slices != 100 {
		t.Fatalf("after a round out of budget: %d files and %d slices queued, want %d and 100", files, slices, n-100)
	}
	if err := c.FlushDeletions(ctx); err != nil {
		t.Fatal(err)
	}
	if files, slices := queued(); files != 0 || slices != n {
		t.Fatalf("after a flush: %d files and %d slices queued, want 0 and %d", files, slices, n)
	}
}

// TestDeletionRoundYields checks that a background deletion round drops
// one batch when callers changed the volume since the last round, and
// takes its full budget when they did not.
func TestDeletionRoundYields(t *testing.T) {
	ctx := context.Background()
	c, err := meta.NewSession(ctx, spaceStore(t, nil), meta.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var seen uint64
	round := func(what string, want time.Duration) {
		t.Helper()
		if got := c.DeletionRound(&seen); got != want {
			t.Errorf("%s: budget %v, want %v", what, got, want)
		}
	}
	round("quiet", meta.DeletionBudget)
	for _, name := range []string{"a", "b"} {
		if _, err := c.Mknod(ctx, meta.RootIno, []byte(name), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
	}
	round("after creates", meta.OneBatch)
	round("quiet again", meta.DeletionBudget)
	if err := c.Unlink(ctx, meta.RootIno, []byte("a")); err != nil {
		t.Fatal(err)
	}
	round("after an unlink", meta.OneBatch)
	if _, err := c.GetAttr(ctx, meta.RootIno); err != nil {
		t.Fatal(err)
	}
	round("after a read", meta.DeletionBudget)
}
