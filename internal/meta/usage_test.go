package meta_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// lateAck is a store whose usage flush, once armed, commits and then
// answers only when its context ends or a second has passed: a commit the
// engine applied while the client stopped waiting, as a cancelled call to
// a loaded server can be.
type lateAck struct {
	store.Store
	armed     atomic.Bool
	committed chan struct{}
	once      sync.Once
}

// flushSniffer notes whether a transaction reads the inode usage counter,
// which only a usage flush does in a write.
type flushSniffer struct {
	store.Tx
	flush bool
}

func (s *flushSniffer) Counter(name string) (int64, error) {
	if name == meta.CounterUsedInodes {
		s.flush = true
	}
	return s.Tx.Counter(name)
}

func (s *lateAck) Update(ctx context.Context, fn func(store.Tx) error) error {
	var flush bool
	err := s.Store.Update(ctx, func(tx store.Tx) error {
		sn := &flushSniffer{Tx: tx}
		err := fn(sn)
		flush = sn.flush
		return err
	})
	if err != nil || !flush || !s.armed.Load() {
		return err
	}
	s.once.Do(func() { close(s.committed) })
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Second):
		return nil
	}
}

// TestCloseDuringFlush: a client closed while its periodic usage flush is
// committing counts its files once. Close used to cancel that flush; the
// flush, seeing an error, kept its deltas and Close flushed them again, so
// statfs counted the files twice (seen on etcd under load).
func TestCloseDuringFlush(t *testing.T) {
	ctx := context.Background()
	st := &lateAck{Store: memVolume(t), committed: make(chan struct{})}
	c, err := meta.NewSession(ctx, st, meta.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const files = 10
	for i := range files {
		name := []byte{'f', byte('0' + i)}
		if _, err := c.Mknod(ctx, meta.RootIno, name, meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
	}
	st.armed.Store(true)
	select {
	case <-st.committed:
	case <-time.After(10 * time.Second):
		t.Fatal("no usage flush within 10s")
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var inodes int64
	if err := st.View(ctx, func(tx store.Tx) error {
		inodes, err = tx.Counter(meta.CounterUsedInodes)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if inodes != files {
		t.Fatalf("used inodes %d after close, want %d", inodes, files)
	}
}
