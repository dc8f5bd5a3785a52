package redis

import (
	"sync"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store/kvstore/kvcache"
)

// recent remembers the values this handle read or committed during the
// last recentTTL, so that an Update can start from them without a round
// trip. A remembered value is only a guess: the commit script compares
// every value the transaction read, remembered or not, with the stored
// one, and a stale guess fails the commit with a conflict (and is
// forgotten, so the retry reads the server). The typical use is a FUSE
// LOOKUP followed at once by CREATE, UNLINK or RENAME of the same name:
// the operation reads again the directory, entry and node that the LOOKUP
// has just read.
//
// It holds at most 2*recentMax values (kvcache.TwoGen).
type recent struct {
	mu    sync.Mutex
	epoch time.Time // origin of the at stamps (monotonic)
	m     *kvcache.TwoGen[string, recentValue]
}

// recentValue is one remembered value; v is nil for a missing key. The
// slice is shared and never modified.
type recentValue struct {
	v  []byte
	at time.Duration // since epoch: when the value was known to be current
}

// How long a remembered value is used, and how many are kept per
// generation. The window is short: a guess that turns out stale costs a
// failed commit and kvstore's backoff, so only values seen within a burst
// of related operations are worth guessing from. Only reads of at most
// recentBatch keys are remembered: the pages of a big listing would only
// push out what is worth keeping.
const (
	recentTTL   = 200 * time.Millisecond
	recentMax   = 4096
	recentBatch = 16
)

func newRecent() *recent {
	return &recent{epoch: time.Now(), m: kvcache.NewTwoGen[string, recentValue](recentMax)}
}

// now returns the current time as an at stamp.
func (r *recent) now() time.Duration { return time.Since(r.epoch) }

// get returns the remembered value of k (nil for missing) if it was seen
// within recentTTL of now.
func (r *recent) get(k string, now time.Duration) ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m.Get(k)
	if !ok || now-e.at > recentTTL {
		return nil, false
	}
	return e.v, true
}

// put remembers that k had value v (nil: missing) at time at, unless a
// value known to be current later is remembered already.
func (r *recent) put(k string, v []byte, at time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.m.Get(k); ok && e.at > at {
		return
	}
	r.m.Put(k, recentValue{v: v, at: at})
}

// forget drops what is remembered of the keys of m.
func forget[V any](r *recent, m map[string]V) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range m {
		r.m.Delete(k)
	}
}
