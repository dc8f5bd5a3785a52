package chunk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/object"
)

// Deferred syncs. A local-directory bucket makes each block durable with
// an fsync of its own, which costs a small file as much as the rest of
// its close, and a large file a journal commit per block. When the bucket
// can defer that (object.Syncer) and blocks are not staged (writeback
// stages them durably anyway), a FileWriter stores every block under
// object.DeferSync and commits its slices as unsynced: the commit records
// the slice for this session (meta.Client.WriteSliceAttr). The bucket
// starts writing a large block to its disk at once (see the file
// bucket's Put), so the disk works beside the writer as it did when each
// block was fsync'd. A background round syncs the bucket once for every
// slice committed since the last round, then forgets their records. If
// the host crashes before, whoever cleans up after the dead session
// restores the blocks the crash lost (RestoreSlice), so no file names a
// block that is not stored. fsync(2) of a file syncs the bucket before it
// returns (Sync).

const (
	// syncInterval is how often a round runs while slices wait: how much
	// unsynced data a crash of the host can cost, as the kernel's own
	// writeback interval bounds it for a local file system.
	syncInterval = time.Second
	// syncBatch starts a round early, and bounds the records one
	// transaction forgets.
	syncBatch = 1024
)

// syncer runs the rounds of deferred syncs.
type syncer struct {
	obj    object.Syncer
	synced func(ctx context.Context, ss []meta.UnsyncedSlice) error
	kick   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	round  sync.Mutex // one round at a time
	mu     struct {
		sync.Mutex
		pending []meta.UnsyncedSlice
	}
}

// TrackSyncs lets writers defer the bucket's syncs, when the bucket can
// and blocks are not staged, and reports whether they will. synced
// forgets slices once their blocks are durable (meta.Session.Synced). Call
// it once, before the first writer, and StopSyncs before the metadata
// client closes.
func (s *Store) TrackSyncs(synced func(ctx context.Context, ss []meta.UnsyncedSlice) error) bool {
	y := object.FindSyncer(s.obj)
	if y == nil || s.conf.Writeback || s.syncs != nil {
		return s.syncs != nil
	}
	s.syncs = &syncer{obj: y, synced: synced, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go s.syncLoop()
	return true
}

// defersSync reports whether writers store blocks, and commit slices,
// without a sync of their own.
func (s *Store) defersSync() bool {
	return s.syncs != nil
}

// add queues a slice just committed unsynced.
func (y *syncer) add(u meta.UnsyncedSlice) {
	y.mu.Lock()
	y.mu.pending = append(y.mu.pending, u)
	n := len(y.mu.pending)
	y.mu.Unlock()
	if n >= syncBatch {
		select {
		case y.kick <- struct{}{}:
		default:
		}
	}
}

func (s *Store) syncLoop() {
	y := s.syncs
	defer close(y.done)
	t := time.NewTicker(syncInterval)
	defer t.Stop()
	for {
		select {
		case <-y.stop:
			return
		case <-t.C:
		case <-y.kick:
		}
		if err := s.syncRound(context.Background()); err != nil {
			s.log.Warn("sync of stored blocks", "err", err)
		}
	}
}

// syncRound syncs the bucket and forgets every slice committed before.
// Slices whose records could not be forgotten wait for the next round.
func (s *Store) syncRound(ctx context.Context) error {
	y := s.syncs
	y.round.Lock()
	defer y.round.Unlock()
	y.mu.Lock()
	batch := y.mu.pending
	y.mu.pending = nil
	y.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	requeue := func(rest []meta.UnsyncedSlice) {
		y.mu.Lock()
		y.mu.pending = append(rest, y.mu.pending...)
		y.mu.Unlock()
	}
	if err := y.obj.Sync(ctx); err != nil {
		requeue(batch)
		return err
	}
	for len(batch) > 0 {
		part := batch[:min(len(batch), syncBatch)]
		if err := y.synced(ctx, part); err != nil {
			requeue(batch)
			return fmt.Errorf("forget %d synced slices: %w", len(batch), err)
		}
		batch = batch[len(part):]
	}
	return nil
}

// Sync makes every block stored so far durable, for fsync(2). Without
// deferred syncs every stored block is durable already.
func (s *Store) Sync(ctx context.Context) error {
	if s.syncs == nil {
		return nil
	}
	return s.syncs.obj.Sync(ctx)
}

// StopSyncs stops the background rounds and runs a last one, so that the
// session ends with no slice unsynced.
func (s *Store) StopSyncs(ctx context.Context) error {
	y := s.syncs
	if y == nil {
		return nil
	}
	select {
	case <-y.stop:
	default:
		close(y.stop)
	}
	// A round under way waits for the engine (forgetting synced slices)
	// with no deadline of its own: a caller that gives up closing, as a
	// mount told to stop on a stalled engine does, must not wait for it.
	// The slices stay recorded unsynced, for the next mount to restore.
	select {
	case <-y.done:
	case <-ctx.Done():
		return fmt.Errorf("stop the background syncs: %w", context.Cause(ctx))
	}
	return s.syncRound(ctx)
}

// RestoreSlice makes every block of slice (id, size) readable at its full
// length after a crash that may have lost blocks stored unsynced: a block
// that is missing, short or does not decode is replaced by zeros, stored
// durably, and counted in lost. Other failures (the bucket unreachable)
// are returned, for a later attempt.
func (s *Store) RestoreSlice(ctx context.Context, id uint64, size uint32) (lost int, err error) {
	n := (int(size) + s.conf.BlockSize - 1) / s.conf.BlockSize
	for i := range n {
		key, want := s.key(id, size, i), s.blockLen(size, i)
		ok, err := s.intact(ctx, key, want)
		if err != nil {
			return lost, err
		}
		if ok {
			continue
		}
		s.cache.Remove(key)
		if err := s.obj.Put(ctx, key, bytes.NewReader(make([]byte, want))); err != nil {
			return lost, fmt.Errorf("restore block %s: %w", key, err)
		}
		lost++
	}
	return lost, nil
}

// intact reports whether block key reads back whole at length want. A
// missing block or one that fails to read is not; an error is returned
// only when the store cannot be asked at all.
func (s *Store) intact(ctx context.Context, key string, want int) (bool, error) {
	r, err := s.obj.Get(ctx, key, 0, -1)
	if errors.Is(err, object.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return false, err
		}
		s.log.Warn("block unreadable after a crash", "key", key, "err", err)
		return false, nil
	}
	defer r.Close()
	n, err := io.Copy(io.Discard, io.LimitReader(r, int64(want)+1))
	if err != nil {
		s.log.Warn("block unreadable after a crash", "key", key, "err", err)
		return false, nil
	}
	return n == int64(want), nil
}
