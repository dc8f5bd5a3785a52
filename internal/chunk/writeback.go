package chunk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicefs/sluice/internal/chunk/cache"
)

// Backoff between retries of a failed upload of a staged block. Uploads
// are retried forever: the block's data exists nowhere else.
var (
	minUploadBackoff = 100 * time.Millisecond
	maxUploadBackoff = 30 * time.Second
)

// stagedUploads tracks the background uploads of staged blocks, one
// goroutine per block, each waiting for an upload slot of the Store.
type stagedUploads struct {
	ctx    context.Context // cancelled by stop
	cancel context.CancelFunc
	wg     sync.WaitGroup
	full   atomic.Bool // staging refused a block and that was logged

	mu struct {
		sync.Mutex
		pending map[string]*stagedUpload
		drained []chan struct{} // closed when pending empties
	}
}

// stagedUpload is the upload of one staged block.
type stagedUpload struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the upload goroutine has returned
}

func newStagedUploads() *stagedUploads {
	u := &stagedUploads{}
	u.ctx, u.cancel = context.WithCancel(context.Background())
	u.mu.pending = map[string]*stagedUpload{}
	return u
}

// stage writes block key to the staging area and queues its upload. It
// reports false when the caller must upload the block itself: staging is
// full (logged once until staging succeeds again) or failed.
func (s *Store) stage(key string, data []byte) bool {
	// Only a block that found staging full and still fitted shows that
	// staging has room again: one that was accounted before the area
	// filled may finish writing after another block found it full.
	wasFull := s.staged.full.Load()
	err := s.disk.Stage(key, data)
	switch {
	case err == nil:
		if wasFull {
			s.staged.full.Store(false)
		}
		if s.cachesWritten(len(data)) {
			s.mem.Put(key, data)
		}
		s.queueUpload(key)
		return true
	case errors.Is(err, cache.ErrStagingFull):
		if !s.staged.full.Swap(true) {
			s.log.Warn("writeback staging full, uploading synchronously", "err", err)
		}
	default:
		s.log.Warn("writeback staging failed, uploading synchronously", "key", key, "err", err)
	}
	return false
}

// queueUpload starts the background upload of staged block key, unless
// one is running.
func (s *Store) queueUpload(key string) {
	u := s.staged
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.mu.pending[key]; ok || u.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(u.ctx)
	up := &stagedUpload{cancel: cancel, done: make(chan struct{})}
	u.mu.pending[key] = up
	u.wg.Add(1)
	go s.uploadStaged(ctx, key, up)
}

// uploadStaged uploads staged block key until it succeeds, ctx is
// cancelled (the block's slice was deleted, or the Store closes), or the
// staged file is gone or corrupt. On success the file moves into the disk
// cache.
func (s *Store) uploadStaged(ctx context.Context, key string, up *stagedUpload) {
	defer s.staged.finish(key, up)
	backoff := minUploadBackoff
	for attempt := 1; ; attempt++ {
		err := s.uploadStagedOnce(ctx, key)
		switch {
		case ctx.Err() != nil:
			return // the staged file stays for Delete or the next Open
		case err == nil:
			s.disk.Uploaded(key)
			s.log.Debug("staged block uploaded", "key", key)
			return
		case errors.Is(err, cache.ErrCorrupt) || errors.Is(err, fs.ErrNotExist):
			s.log.Error("staged block lost before its upload: the file's data there is gone", "key", key, "err", err)
			return
		}
		s.log.Warn("upload of staged block failed, retrying", "key", key, "attempt", attempt, "retry_in", backoff, "err", err)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, maxUploadBackoff)
	}
}

// uploadStagedOnce reads staged block key and uploads it, holding an
// upload slot.
func (s *Store) uploadStagedOnce(ctx context.Context, key string) error {
	select {
	case s.uploads <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.uploads }()
	data, err := s.disk.ReadStaged(key)
	if err != nil {
		return err
	}
	if err := s.obj.Put(ctx, key, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("upload staged block %s: %w", key, err)
	}
	return nil
}

// finish records that the upload of key has returned.
func (u *stagedUploads) finish(key string, up *stagedUpload) {
	u.mu.Lock()
	if u.mu.pending[key] == up {
		delete(u.mu.pending, key)
	}
	if len(u.mu.pending) == 0 {
		for _, ch := range u.mu.drained {
			close(ch)
		}
		u.mu.drained = nil
	}
	u.mu.Unlock()
	up.cancel()
	close(up.done)
	u.wg.Done()
}

// cancelKey stops the upload of key, if any, and waits until it has returned.
func (u *stagedUploads) cancelKey(ctx context.Context, key string) error {
	u.mu.Lock()
	up, ok := u.mu.pending[key]
	u.mu.Unlock()
	if !ok {
		return nil
	}
	up.cancel()
	select {
	case <-up.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the upload of staged block %s: %w", key, ctx.Err())
	}
}

// stop cancels all uploads and waits for them, or for ctx.
func (u *stagedUploads) stop(ctx context.Context) error {
	u.mu.Lock() // no queueUpload may Add after the Wait below started
	u.cancel()
	u.mu.Unlock()
	done := make(chan struct{})
	go func() {
		u.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for staged uploads to stop: %w", ctx.Err())
	}
}

// FlushStaged waits until no block is staged for upload, or ctx is done:
// `sluice umount --flush` and a clean shutdown call it after flushing the
// open files. Uploads that keep failing keep it waiting.
func (s *Store) FlushStaged(ctx context.Context) error {
	if s.staged == nil {
		return nil
	}
	u := s.staged
	u.mu.Lock()
	n := len(u.mu.pending)
	if n == 0 {
		u.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	u.mu.drained = append(u.mu.drained, ch)
	u.mu.Unlock()
	select {
	case <-ch:
		if u.ctx.Err() != nil {
			return errors.New("wait for staged blocks to upload: the store was closed; the next mount of the cache directory uploads them")
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for %d staged blocks to upload: %w", n, ctx.Err())
	}
}

// Staged returns the number of blocks staged and waiting for upload, and
// their bytes on disk.
func (s *Store) Staged() (blocks int, bytes int64) {
	if s.staged == nil {
		return 0, 0
	}
	s.staged.mu.Lock()
	blocks = len(s.staged.mu.pending)
	s.staged.mu.Unlock()
	return blocks, s.disk.StagedUsed()
}
