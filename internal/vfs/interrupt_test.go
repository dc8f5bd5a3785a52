package vfs_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/vfs/vfstest"
)

// heldGets holds every Get while held is set, until release is closed
// (or the Get's context ends), and reports on entered that one started.
type heldGets struct {
	object.Store
	held    atomic.Bool
	release chan struct{}
	entered chan struct{}
	gets    atomic.Int32
}

func (h *heldGets) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	if h.held.Load() {
		h.gets.Add(1)
		h.entered <- struct{}{}
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, fmt.Errorf("held get %q: %w", key, ctx.Err())
		}
	}
	return h.Store.Get(ctx, key, off, limit)
}

func (h *heldGets) Unwrap() object.Store { return h.Store }

// TestReadInterruptedWhileObjectHangs: a read waiting for a block the
// object store does not deliver ends with EINTR when its context is
// cancelled (the kernel interrupted the request), and the fetch it
// started still serves the next reader.
func TestReadInterruptedWhileObjectHangs(t *testing.T) {
	obj := &heldGets{release: make(chan struct{}), entered: make(chan struct{}, 10)}
	v := vfstest.New(t, vfstest.Options{
		Object: func(s object.Store) object.Store { obj.Store = s; return obj },
		Chunk:  chunk.Config{CachePartialOnly: true},
	})
	root := meta.WithCred(context.Background(), meta.Cred{Pid: 1})
	data := bytes.Repeat([]byte("0123456789abcdef"), vfstest.BlockSize/16)
	a, fh, err := v.Create(root, meta.RootIno, []byte("f"), 0o644, 0, syscall.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Write(root, fh, 0, data); err != nil {
		t.Fatal(err)
	}
	if err := v.Flush(root, fh, 0); err != nil {
		t.Fatal(err)
	}
	if err := v.Release(root, fh, 0); err != nil {
		t.Fatal(err)
	}
	_, fh, err = v.Open(root, a.Ino, syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release(root, fh, 0)

	obj.held.Store(true)
	ctx, cancel := context.WithCancel(root)
	done := make(chan error, 1)
	go func() {
		_, err := v.Read(ctx, fh, 0, make([]byte, len(data)))
		done <- err
	}()
	<-obj.entered
	cancel()
	if err := <-done; meta.Errno(err) != syscall.EINTR {
		t.Fatalf("interrupted read: %v, want EINTR", err)
	}

	got := make([]byte, len(data))
	next := make(chan error, 1)
	go func() {
		n, err := v.Read(root, fh, 0, got)
		if err == nil && n != len(data) {
			err = fmt.Errorf("read %d bytes, want %d", n, len(data))
		}
		next <- err
	}()
	close(obj.release)
	if err := <-next; err != nil {
		t.Fatalf("next read: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("next read: wrong bytes")
	}
	if n := obj.gets.Load(); n != 1 {
		t.Fatalf("%d GETs of the block, want 1", n)
	}
}
