package meta_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
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

// TestOpTimeout: when the engine stops answering, the first operation
// fails with EIO after Config.OpTimeout instead of hanging; the outage is
// then known, and the next fail at once (meta.ErrEngineDown) rather than
// each after the bound again; once the engine answers, operations work
// again within the outage's probe interval.
func TestOpTimeout(t *testing.T) {
	ctx := context.Background()
	st := &stalling{Store: kvstore.New(mem.New(t.Name()))}
	if _, err := meta.FormatVolume(ctx, st, &meta.Format{Name: "stall", UUID: "u", Storage: "mem", Bucket: "b", BlockSize: 4096}); err != nil {
		t.Fatal(err)
	}
	const bound = 200 * time.Millisecond
	c, err := meta.NewSession(ctx, st, meta.Config{OpTimeout: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	file := meta.NewNode{Type: store.TypeFile, Mode: 0o644}
	if _, err := c.Mknod(ctx, meta.RootIno, []byte("before"), file); err != nil {
		t.Fatal(err)
	}

	st.stalled.Store(true)
	for i, op := range []struct {
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
		switch first := i == 0; {
		case first && (took < bound || took > bound+10*time.Second):
			t.Errorf("%s while the engine stalls failed after %v, want about %v", op.name, took, bound)
		case !first && (took >= bound || !errors.Is(err, meta.ErrEngineDown)):
			t.Errorf("%s once an operation waited the bound failed after %v with %v, want at once with ErrEngineDown", op.name, took, err)
		}
	}

	st.stalled.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := c.Lookup(ctx, meta.RootIno, []byte("before"))
		if err == nil {
			break
		}
		if !errors.Is(err, meta.ErrEngineDown) || time.Now().After(deadline) {
			t.Fatalf("lookup once the engine answers again: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.Mknod(ctx, meta.RootIno, []byte("after"), file); err != nil {
		t.Errorf("create once the engine answers again: %v", err)
	}
}

// refusing is a store whose transactions fail, while it refuses, as a
// connection to a stopped server does: refused before anything is sent.
type refusing struct {
	store.Store
	until atomic.Int64 // UnixNano
	tries atomic.Int64
}

func (s *refusing) refused() error {
	s.tries.Add(1)
	if time.Now().UnixNano() < s.until.Load() {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	return nil
}

func (s *refusing) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := s.refused(); err != nil {
		return err
	}
	return s.Store.Update(ctx, fn)
}

func (s *refusing) View(ctx context.Context, fn func(store.Tx) error) error {
	if err := s.refused(); err != nil {
		return err
	}
	return s.Store.View(ctx, fn)
}

// TestShortOutage: an engine that refuses connections for less than the
// bound (a server restarting) is ridden out: the operations made
// meanwhile wait and succeed. One that refuses for longer fails them
// with EIO after the bound, not at the first refusal.
func TestShortOutage(t *testing.T) {
	ctx := context.Background()
	st := &refusing{Store: kvstore.New(mem.New(t.Name()))}
	if _, err := meta.FormatVolume(ctx, st, &meta.Format{Name: "refuse", UUID: "u", Storage: "mem", Bucket: "b", BlockSize: 4096}); err != nil {
		t.Fatal(err)
	}
	const bound = 500 * time.Millisecond
	c, err := meta.NewSession(ctx, st, meta.Config{OpTimeout: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	file := meta.NewNode{Type: store.TypeFile, Mode: 0o644}

	st.until.Store(time.Now().Add(bound / 3).UnixNano())
	tries := st.tries.Load()
	if _, err := c.Mknod(ctx, meta.RootIno, []byte("short"), file); err != nil {
		t.Errorf("create during a refusal shorter than the bound: %v", err)
	}
	if _, err := c.Lookup(ctx, meta.RootIno, []byte("short")); err != nil {
		t.Errorf("lookup after a refusal shorter than the bound: %v", err)
	}
	if n := st.tries.Load() - tries; n < 3 {
		t.Errorf("the engine was tried %d times, want the refused transaction tried again", n)
	}

	st.until.Store(time.Now().Add(time.Hour).UnixNano())
	start := time.Now()
	_, err = c.Mknod(ctx, meta.RootIno, []byte("long"), file)
	took := time.Since(start)
	if meta.Errno(err) != syscall.EIO || took < bound || took > bound+10*time.Second {
		t.Errorf("create during a long refusal: %v after %v, want EIO after about %v", err, took, bound)
	}
	st.until.Store(0)
}

// TestBound: meta.Bound bounds each transaction of a store, replaces a
// bound the store already has instead of nesting it, and removes it for a
// zero or negative duration.
func TestBound(t *testing.T) {
	st := &stalling{Store: kvstore.New(mem.New(t.Name()))}
	st.stalled.Store(true)
	cases := []struct {
		name   string
		st     store.Store
		within string // the bound the error names; "" for no bound
	}{
		{"bound", meta.Bound(st, 20*time.Millisecond), "20ms"},
		{"rebound", meta.Bound(meta.Bound(st, time.Hour), 30*time.Millisecond), "30ms"},
		{"unbound", meta.Bound(meta.Bound(st, 40*time.Millisecond), 0), ""},
	}
	for _, tc := range cases {
		// The caller's own deadline ends an unbounded transaction.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := tc.st.View(ctx, func(store.Tx) error { return nil })
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v, want a deadline error", tc.name, err)
			continue
		}
		msg := err.Error()
		switch n := strings.Count(msg, "did not answer within"); {
		case tc.within == "" && n != 0:
			t.Errorf("%s: %q, want the caller's deadline, no bound", tc.name, msg)
		case tc.within != "" && (n != 1 || !strings.Contains(msg, "within "+tc.within)):
			t.Errorf("%s: %q, want one bound of %s", tc.name, msg, tc.within)
		}
	}
}
