package meta_test

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// stalling is a store that, once stalled, answers no transaction: each
// waits for its context, as a query to a stopped server does.
type stalling struct {
	store.Store
	stalled atomic.Bool
}

func (s *stalling) Update(ctx context.Context, fn func(store.Tx) error) error {
	if s.stalled.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.Store.Update(ctx, fn)
}

func (s *stalling) View(ctx context.Context, fn func(store.Tx) error) error {
	if s.stalled.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.Store.View(ctx, fn)
}

// TestOpTimeout: when the engine stops answering, operations fail with
// EIO after Config.OpTimeout instead of hanging, and work again once it
// answers.
func TestOpTimeout(t *testing.T) {
	ctx := context.Background()
	st := &stalling{Store: kvstore.New(mem.New(t.Name()))}
	if _, err := meta.FormatVolume(ctx, st, &meta.Format{Name: "stall", UUID: "u", Storage: "mem", Bucket: "b", BlockSize: 4096}); err != nil {
		t.Fatal(err)
	}
	const bound = 200 * time.Millisecond
	c, err := meta.NewClient(ctx, st, meta.Config{OpTimeout: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	file := meta.NewNode{Type: store.TypeFile, Mode: 0o644}
	if _, err := c.Mknod(ctx, meta.RootIno, []byte("before"), file); err != nil {
		t.Fatal(err)
	}

	st.stalled.Store(true)
	for _, op := range []struct {
		name string
		fn   func() error
	}{
		{"create", func() error { _, err := c.Mknod(ctx, meta.RootIno, []byte("during"), file); return err }},
		{"lookup", func() error { _, err := c.Lookup(ctx, meta.RootIno, []byte("before")); return err }},
		{"getattr", func() error { _, err := c.GetAttr(ctx, meta.RootIno); return err }},
	} {
		start := time.Now()
		err := op.fn()
		took := time.Since(start)
		if meta.Errno(err) != syscall.EIO {
			t.Errorf("%s while the engine stalls: %v (errno %d), want EIO", op.name, err, meta.Errno(err))
		}
		if took < bound || took > bound+10*time.Second {
			t.Errorf("%s while the engine stalls failed after %v, want about %v", op.name, took, bound)
		}
	}

	st.stalled.Store(false)
	if _, err := c.Lookup(ctx, meta.RootIno, []byte("before")); err != nil {
		t.Errorf("lookup once the engine answers again: %v", err)
	}
	if _, err := c.Mknod(ctx, meta.RootIno, []byte("after"), file); err != nil {
		t.Errorf("create once the engine answers again: %v", err)
	}
}
