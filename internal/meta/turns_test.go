package meta_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// attempts is a store that counts the Updates it is asked for and the
// runs of their functions: each run past the first is a retry after a
// conflict.
type attempts struct {
	store.Store
	updates, runs atomic.Int64
}

func (a *attempts) Update(ctx context.Context, fn func(store.Tx) error) error {
	a.updates.Add(1)
	return a.Store.Update(ctx, func(tx store.Tx) error {
		a.runs.Add(1)
		return fn(tx)
	})
}

// TestCommitTurns: slice commits of one file through one client, from
// many goroutines at once, never conflict with one another: they take
// turns instead (turns.go). Racing, every commit but one of each round
// conflicted on the file's node.
func TestCommitTurns(t *testing.T) {
	ctx := context.Background()
	st := &attempts{Store: kvstore.New(mem.New(t.Name()))}
	if _, err := meta.FormatVolume(ctx, st, &meta.Format{Name: "turns", UUID: "u", Storage: "mem", Bucket: "b", BlockSize: 4096}); err != nil {
		t.Fatal(err)
	}
	c, err := meta.NewSession(ctx, st, meta.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	a, err := c.Mknod(ctx, meta.RootIno, []byte("f"), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 16, 50
	before := st.runs.Load() - st.updates.Load()
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				id := uint64(1000 + w*each + i)
				s := meta.Slice{Id: id, Size: 4096, Pos: uint32(w) * 4096, Len: 4096}
				if _, err := metatest.Write(ctx, c, a.Ino, uint32(i%2), s); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if retries := st.runs.Load() - st.updates.Load() - before; retries != 0 {
		t.Errorf("%d commits of one file through one client retried %d times after conflicts, want 0", writers*each, retries)
	}
}
