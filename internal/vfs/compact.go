package vfs

import (
	"context"
	"sync"
	"time"

	"github.com/sluicefs/sluice/internal/compact"
	"github.com/sluicefs/sluice/internal/meta"
)

// compactEvery is how many slices this mount commits to one chunk between
// checks of whether the chunk needs compacting.
const compactEvery = 20

// chunkRef names chunk idx of file ino.
type chunkRef struct {
	ino meta.Ino
	idx uint32
}

// compactor compacts the chunks this mount fragments, in the background
// and one at a time, so that a file written in many small pieces does not
// leave a slice list every later read must replay.
type compactor struct {
	v    *VFS
	c    *compact.Compactor
	reqs chan chunkRef

	mu      sync.Mutex
	commits map[chunkRef]int  // slices committed per chunk since its last check
	queued  map[chunkRef]bool // waiting in reqs
}

func newCompactor(v *VFS, c *compact.Compactor) *compactor {
	return &compactor{v: v, c: c, reqs: make(chan chunkRef, 256),
		commits: map[chunkRef]int{}, queued: map[chunkRef]bool{}}
}

// committed counts a slice committed to chunk idx of ino and queues the
// chunk for a check every compactEvery slices.
func (k *compactor) committed(ino meta.Ino, idx uint32) {
	ref := chunkRef{ino, idx}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.commits[ref]++
	if k.commits[ref] < compactEvery || k.queued[ref] {
		return
	}
	select {
	case k.reqs <- ref:
		delete(k.commits, ref)
		k.queued[ref] = true
	default: // busy: check at a later commit
	}
}

// run compacts queued chunks until ctx is done.
func (k *compactor) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ref := <-k.reqs:
			k.mu.Lock()
			delete(k.queued, ref)
			k.mu.Unlock()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
			st, err := k.c.ChunkIfDue(cctx, ref.ino, ref.idx)
			cancel()
			if err != nil {
				k.v.log().Debug("compaction skipped", "inode", ref.ino, "chunk", ref.idx, "err", err)
				continue
			}
			if st.Chunks > 0 {
				k.v.forgetSlices(ref.ino)
			}
		}
	}
}

// compactTree is the "compact" control: it compacts every chunk of the
// file or directory tree at ino now.
func (v *VFS) compactTree(ctx context.Context, ino meta.Ino, _ []byte) error {
	if v.compact == nil {
		return nil
	}
	_, err := v.compact.c.Tree(ctx, ino)
	v.forgetAllSlices()
	return err
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
