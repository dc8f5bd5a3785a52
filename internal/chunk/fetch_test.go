package chunk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/sluicefs/sluice/internal/object"
	objmem "github.com/sluicefs/sluice/internal/object/mem"
)

// holdGets holds every Get until release is closed (or the Get's context
// ends), reporting on entered that a Get has started, and counts them.
type holdGets struct {
	object.Store
	release chan struct{}
	entered chan string
	gets    atomic.Int32
}

func (h *holdGets) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	h.gets.Add(1)
	h.entered <- key
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, fmt.Errorf("held get %q: %w", key, ctx.Err())
	}
	return h.Store.Get(ctx, key, off, limit)
}

func (h *holdGets) Unwrap() object.Store { return h.Store }

// TestCancelledReaderLeavesSharedFetch: a reader whose context is
// cancelled (its request was interrupted) stops waiting at once, but the
// fetch it started goes on for the readers that share it, so a reader
// that comes next gets the block from that one GET.
func TestCancelledReaderLeavesSharedFetch(t *testing.T) {
	ctx := context.Background()
	mem := objmem.New("x")
	data := bytes.Repeat([]byte("block!"), testBlockSize/6+1)[:testBlockSize]
	const id = 7
	if err := mem.Put(ctx, BlockKey(id, 0, testBlockSize, false), bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	obj := &holdGets{Store: mem, release: make(chan struct{}), entered: make(chan string, 10)}
	s := New(obj, Config{BlockSize: testBlockSize})

	actx, cancel := context.WithCancel(ctx)
	aDone := make(chan error, 1)
	go func() { aDone <- s.ReadSlice(actx, id, testBlockSize, 0, make([]byte, testBlockSize)) }()
	<-obj.entered
	cancel()
	if err := <-aDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled reader: %v, want context.Canceled", err)
	}

	got := make([]byte, testBlockSize)
	bDone := make(chan error, 1)
	go func() { bDone <- s.ReadSlice(ctx, id, testBlockSize, 0, got) }()
	close(obj.release)
	if err := <-bDone; err != nil {
		t.Fatalf("next reader: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("next reader got wrong bytes")
	}
	if n := obj.gets.Load(); n != 1 {
		t.Fatalf("%d GETs, want the one the cancelled reader started", n)
	}
}
