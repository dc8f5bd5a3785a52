package cachegroup

import (
	"hash/fnv"
	"math"
)

// Member is one mount of a cache group.
type Member struct {
	// ID names the member's cache for as long as it lasts (its host and
	// cache directory), so that a member restarted with the same cache
	// owns the same blocks again.
	ID string
	// Addr is the HOST:PORT its peers reach it at.
	Addr string
	// Weight is its share of the blocks relative to the others; 0 holds
	// none (--no-sharing).
	Weight int
}

// hashString is the 64-bit FNV-1a hash of s: stable across processes and
// releases, as owners must be.
func hashString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// mix is the finalizer of SplitMix64: it spreads every bit of x over the
// result, so that scores of one key on different members are
// independent.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// score is the weighted rendezvous score of the member whose ID hashes
// to id for the key hashing to key: weight / -ln(u), u uniform in (0, 1)
// from the pair. The member with the highest score owns the key; each
// member wins a share of keys proportional to its weight, and removing
// one moves only the keys it owned.
func score(id, key uint64, weight int) float64 {
	u := (float64(mix(id^mix(key))>>11) + 0.5) / (1 << 53)
	return float64(weight) / -math.Log(u)
}

// ring is the members that may own blocks, with the hashes of their IDs.
type ring struct {
	members []Member
	ids     []uint64
}

func newRing(ms []Member) ring {
	r := ring{}
	for _, m := range ms {
		if m.Weight > 0 {
			r.members = append(r.members, m)
			r.ids = append(r.ids, hashString(m.ID))
		}
	}
	return r
}

// owner returns the index in r.members of the owner of key among the
// members up says are usable, or -1 when there is none.
func (r ring) owner(key string, up func(i int) bool) int {
	k := hashString(key)
	best, bestScore := -1, 0.0
	for i, m := range r.members {
		if !up(i) {
			continue
		}
		if s := score(r.ids[i], k, m.Weight); best < 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}
