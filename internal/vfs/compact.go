package vfs

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/compact"
	"github.com/sluicefs/sluice/internal/control"
	"github.com/sluicefs/sluice/internal/meta"
)

// A chunk is checked against the compaction policy once this mount has
// committed checkSlices slices or checkBytes bytes to it since the last
// check: an overwrite wastes up to its own size in the bucket, so the
// bytes matter as much as the count. A file written once in one piece is
// never checked. A chunk whose check found waste is checked again, with
// the settling policy, once no commit touched it for settleAfter.
const (
	checkSlices = 8
	checkBytes  = 4 << 20
	settleAfter = 3 * time.Second
	// maxSettling bounds the chunks waiting to settle; past it the
	// oldest are checked at once.
	maxSettling = 4096
	// maxCounted bounds the chunks whose commits are counted (most are
	// small files' only chunk, committed once); past it the counts start
	// over, which only delays some checks.
	maxCounted = 1 << 16
)

// chunkRef names chunk idx of file ino.
type chunkRef struct {
	ino meta.Ino
	idx uint32
}

// written is what this mount committed to a chunk since its last check.
type written struct {
	slices int
	bytes  int64
}

// compactor compacts the chunks this mount writes, in the background and
// one at a time, so that a file written in many small pieces does not
// leave a slice list every later read must replay, and a file overwritten
// in place does not keep the overwritten bytes stored. Writers never wait
// for it: a check that finds the queue full is dropped and comes again
// with a later commit.
type compactor struct {
	v    *VFS
	c    *compact.Compactor
	reqs chan compactReq

	mu       sync.Mutex
	since    map[chunkRef]written   // commits per chunk since its last check
	queued   map[chunkRef]bool      // waiting in reqs
	settling map[chunkRef]time.Time // chunks to settle, with their last commit
	stats    compact.Stats          // totals, for the mount's metrics
	// waste is what the chunks this mount checked still store beyond
	// what they show, as of their last check; chunks with none are not
	// kept, and at most maxSettling are.
	waste map[chunkRef]int64
}

// compactReq is a chunk to check, and with which policy.
type compactReq struct {
	ref    chunkRef
	settle bool
}

func newCompactor(v *VFS, c *compact.Compactor) *compactor {
	k := &compactor{v: v, reqs: make(chan compactReq, 256), since: map[chunkRef]written{},
		queued: map[chunkRef]bool{}, settling: map[chunkRef]time.Time{}, waste: map[chunkRef]int64{}}
	// Drop this mount's cached lists of a compacted chunk before the
	// slices they name are deleted.
	k.c = c.WithSwapped(v.forgetSlices)
	return k
}

// committed counts a slice of n bytes committed to chunk idx of ino, and
// queues the chunk for a check when enough was committed since the last.
func (k *compactor) committed(ino meta.Ino, idx uint32, n uint32) {
	ref := chunkRef{ino, idx}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.since) >= maxCounted {
		clear(k.since)
	}
	w := k.since[ref]
	w.slices++
	w.bytes += int64(n)
	k.since[ref] = w
	if _, ok := k.settling[ref]; ok {
		k.settling[ref] = time.Now()
	}
	if w.slices < checkSlices && w.bytes < checkBytes || k.queued[ref] {
		return
	}
	if k.queueLocked(compactReq{ref: ref}) {
		delete(k.since, ref)
	}
}

// queueLocked queues r unless the queue is full; k.mu is held.
func (k *compactor) queueLocked(r compactReq) bool {
	select {
	case k.reqs <- r:
		k.queued[r.ref] = true
		return true
	default: // busy: check at a later commit
		return false
	}
}

// run compacts queued chunks until ctx is done, and queues the chunks
// that settled.
func (k *compactor) run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			k.queueSettled(time.Now())
		case r := <-k.reqs:
			k.check(ctx, r)
		}
	}
}

// check compacts the chunk of r as its policy says.
func (k *compactor) check(ctx context.Context, r compactReq) {
	k.mu.Lock()
	delete(k.queued, r.ref)
	k.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	check := k.c.ChunkIfDue
	if r.settle {
		check = k.c.ChunkSettle
	}
	st, err := check(cctx, r.ref.ino, r.ref.idx)
	if err != nil {
		k.v.log().Debug("compaction skipped", "inode", r.ref.ino, "chunk", r.ref.idx, "err", err)
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stats.Add(st)
	if st.Left > 0 && (len(k.waste) < maxSettling || k.waste[r.ref] > 0) {
		k.waste[r.ref] = st.Left
	} else {
		delete(k.waste, r.ref)
	}
	if !r.settle && (st.Waste > 0 || st.Chunks > 0) {
		if len(k.settling) >= maxSettling {
			k.queueSettledLocked(time.Now().Add(settleAfter))
		}
		k.settling[r.ref] = time.Now()
	}
}

// queueSettled queues the chunks no commit touched for settleAfter.
func (k *compactor) queueSettled(now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.queueSettledLocked(now)
}

func (k *compactor) queueSettledLocked(now time.Time) {
	for ref, last := range k.settling {
		if now.Sub(last) < settleAfter || k.queued[ref] {
			continue
		}
		if !k.queueLocked(compactReq{ref: ref, settle: true}) {
			return
		}
		delete(k.settling, ref)
	}
}

// CompactionStats is what a mount's background compaction did since it
// started.
type CompactionStats struct {
	compact.Stats
	// Waste is the bytes the chunks it checked store beyond what they
	// show, as of each one's last check.
	Waste int64
	// Pending is the number of chunks queued for a check or waiting to
	// settle.
	Pending int
}

// CompactionStats returns what the background compaction did; zero
// without a compactor.
func (v *VFS) CompactionStats() CompactionStats {
	k := v.compact
	if k == nil {
		return CompactionStats{}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	out := CompactionStats{Stats: k.stats, Pending: len(k.queued) + len(k.settling)}
	for _, w := range k.waste {
		out.Waste += w
	}
	return out
}

// compactTree is the "compact" control (root only): it compacts every
// chunk of the file or directory tree at req.Ino now, and returns what
// it did (compact.Stats).
func (v *VFS) compactTree(ctx context.Context, req control.Request, progress func(any)) (any, error) {
	if !meta.CredOf(ctx).IsRoot() {
		return nil, syscall.EPERM
	}
	if v.compact == nil {
		return compact.Stats{}, nil
	}
	stats, err := v.compact.c.Tree(ctx, req.Ino)
	v.forgetAllSlices()
	return stats, err
}

// forgetSlices drops the slice lists the open file ino cached, after its
// chunks changed behind it.
func (v *VFS) forgetSlices(ino meta.Ino) {
	if f := v.fileOf(ino); f != nil {
		f.forgetSlices()
	}
}

// forgetAllSlices drops the cached slice lists of every open file.
func (v *VFS) forgetAllSlices() {
	v.mu.Lock()
	files := make([]*openFile, 0, len(v.mu.files))
	for _, f := range v.mu.files {
		files = append(files, f)
	}
	v.mu.Unlock()
	for _, f := range files {
		f.forgetSlices()
	}
}
