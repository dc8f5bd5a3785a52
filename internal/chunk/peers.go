package chunk

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sluicefs/sluice/internal/object"
)

// Peers is a cache group (package cachegroup) as a Store uses it: the
// other mounts of the volume whose caches hold blocks for this one.
//
// A block another member owns is read from it, and kept in the memory
// cache only (the disk cache holds this member's own share); a block
// object storage does not have yet is looked for in the members' caches
// (a member's writeback staged it); warming a block warms it on its
// owner. Requests a Store serves its peers (ServeBlock) never go to
// peers themselves.
type Peers interface {
	// Remote reports whether another member owns block key now.
	Remote(key string) bool
	// Read fills p with bytes [off, off+len(p)) of block key from its
	// owner, reporting false when the owner is this member or could not
	// serve it: the caller then reads object storage.
	Read(ctx context.Context, key string, off int, p []byte) bool
	// Find fills p with block key from the cache of any member that has
	// it, reporting whether one had.
	Find(ctx context.Context, key string, p []byte) bool
	// Warm asks the owner of block key to cache it, reporting false
	// when this member owns it or the owner could not.
	Warm(ctx context.Context, key string) bool
}

// SetPeers makes the Store read through the cache group p (nil: none).
// Call it before the Store serves reads.
func (s *Store) SetPeers(p Peers) { s.peers = p }

// InGroup reports whether the Store reads through a cache group.
func (s *Store) InGroup() bool { return s.peers != nil }

type forPeerKey struct{}

// peersFor returns s.peers unless ctx is a request a peer made.
func (s *Store) peersFor(ctx context.Context) Peers {
	if s.peers == nil || ctx.Value(forPeerKey{}) != nil {
		return nil
	}
	return s.peers
}

// errPeerMissed is what a fetch from a peer that could not serve a block
// ends with; the reader then fetches it from object storage.
var errPeerMissed = errors.New("the owner did not serve the block")

// fetchFromPeer returns block key (want bytes) from its owner, sharing
// the request with concurrent readers of it. The flight has its own
// name, so a peer's request for the same block (which never goes to
// peers) cannot wait for it: two members that disagree for a moment
// about the owner do not wait for each other.
func (s *Store) fetchFromPeer(ctx context.Context, p Peers, key string, want int) (fetchResult, bool) {
	ch := s.fetches.DoChan("peer "+key, func() (any, error) {
		if b, ok := s.cached(key, want); ok {
			return fetchResult{b, 0, fromDisk}, nil
		}
		b, gen := s.fetchBuf(want)
		if !p.Read(context.WithoutCancel(ctx), key, 0, b) {
			s.dropFetchBuf(b)
			return nil, errPeerMissed
		}
		s.mem.Put(key, b)
		return fetchResult{b, gen, fromPeer}, nil
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return fetchResult{}, false
		}
		return res.Val.(fetchResult), true
	case <-ctx.Done():
		return fetchResult{}, false
	}
}

// fetchBuf returns a buffer for a fetched block of n bytes and its pool
// generation (see fetchPool).
func (s *Store) fetchBuf(n int) ([]byte, uint64) {
	if s.fetched != nil {
		return s.fetched.get(n)
	}
	return make([]byte, n), 0
}

// dropFetchBuf returns a buffer of fetchBuf that was not filled.
func (s *Store) dropFetchBuf(b []byte) {
	if s.fetched != nil {
		s.fetched.put(b)
	}
}

// serveBufs recycles the buffers ServeBlock reads ranges from the disk
// cache into: a fresh 1 MiB buffer costs the zeroing of its pages, a
// fifth of serving it.
var serveBufs = sync.Pool{New: func() any { return new([]byte) }}

// ServeBlock calls send with bytes [off, off+n) of block key for a peer
// of the cache group: from the caches (staged blocks included), or,
// unless cachedOnly, fetched from object storage (once for concurrent
// requests, and never from peers) and cached here. With n 0 it only
// makes sure the block is cached, as Warm does. A block found nowhere
// gives an error wrapping object.ErrNotFound. It satisfies
// cachegroup.Blocks.
func (s *Store) ServeBlock(ctx context.Context, key string, off, n int, cachedOnly bool, send func([]byte) error) error {
	ref, err := ParseBlockKey(key)
	if err != nil {
		return err
	}
	if ref.HashPrefix != s.conf.HashPrefix || off < 0 || n < 0 || off+n > ref.Len {
		return fmt.Errorf("serve block %s [%d, +%d): not a block of this volume", key, off, n)
	}
	ctx = context.WithValue(ctx, forPeerKey{}, true)
	if n == 0 {
		if cachedOnly {
			if !s.Cached(ref) {
				return fmt.Errorf("serve block %s: not cached: %w", key, object.ErrNotFound)
			}
			return send(nil)
		}
		if _, err := s.Warm(ctx, ref); err != nil {
			return err
		}
		return send(nil)
	}
	defer s.readers.leave(s.readers.enter())
	if b, ok := s.mem.Get(key); ok && len(b) == ref.Len {
		return send(b[off : off+n])
	}
	if s.disk != nil && n == ref.Len {
		// The whole file in one read (as the reader's own disk cache
		// reads it), not through the memory cache: that is for this
		// member's own reads.
		if b, ok := s.disk.Get(key); ok && len(b) == n {
			return send(b)
		}
	} else if s.disk != nil {
		bp := serveBufs.Get().(*[]byte)
		defer serveBufs.Put(bp)
		if cap(*bp) < n {
			*bp = make([]byte, n)
		}
		p := (*bp)[:n]
		if s.disk.ReadAt(key, p, int64(off)) {
			return send(p)
		}
	}
	if cachedOnly {
		b, ok := s.cached(key, ref.Len)
		if !ok {
			return fmt.Errorf("serve block %s: not cached: %w", key, object.ErrNotFound)
		}
		return send(b[off : off+n])
	}
	b, _, err := s.fetchBlock(ctx, ref.ID, s.sliceSizeFor(ref), ref.Index)
	if err != nil {
		return err
	}
	return send(b[off : off+n])
}
