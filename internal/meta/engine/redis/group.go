package redis

import (
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore/kvcache"
)

// scanGroup returns the scan group of key: the key prefix whose sorted set
// lists key, so that kvstore can range-scan it, or nil when key is only ever
// read by its full name. It is the one place that knows kvstore's key
// layout (see the kvstore package doc). kvstore never scans
//
//	"A" ino "I"   node records
//	"A" ino "S"   symlink targets
//	"C"           counters
//	"S"           settings
//	"K"           slice references
//
// so those are not indexed. Every other "A" key is grouped by inode and
// kind ("A" ino "D" for one directory's entries; likewise xattrs "X",
// chunks "C", flocks "F", POSIX locks "P"), the per-session families "O",
// "Q" and "U" by session, and every other family ("N", "D", "L") as a whole.
// A family kvstore adds later is thus indexed, by its first byte, before
// this function learns about it: scans keep working, at the cost of one
// ZADD per write if the family turns out never to be scanned.
//
// Every key of a group starts with the group, and a Scan must stay inside
// one group. The grouping is part of the stored format: changing the group
// of existing keys needs a migration of the sorted sets. The result aliases
// key.
func scanGroup(key []byte) []byte {
	const ino = 8 // bytes of an inode or session number
	if len(key) == 0 {
		return nil
	}
	switch key[0] {
	case 'C', 'S', 'K':
		return nil
	case 'A':
		if len(key) < 1+ino+1 || key[1+ino] == 'I' || key[1+ino] == 'S' {
			return nil
		}
		return key[:1+ino+1]
	case 'O', 'Q', 'U':
		if len(key) < 1+ino {
			return nil
		}
		return key[:1+ino]
	}
	return key[:1]
}

// groupEnd returns the smallest key greater than every key in group g.
func groupEnd(g []byte) []byte {
	end := append([]byte{}, g...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// entryGroupLen is the length of the scan group of an entry key: "A" ino
// "D" (see scanGroup).
const entryGroupLen = 1 + 8 + 1

// cacheLayout tells the cache the scan groups a Scan fences and the
// directories it may know whole.
var cacheLayout = kvcache.Layout{
	Group: func(k string) string { return string(scanGroup([]byte(k))) },
	Dir: func(k string) (string, bool) {
		if !followsValue(k) {
			return "", false
		}
		return k[:entryGroupLen], true
	},
}

// followsValue reports whether key is a directory entry, whose value
// names a node (kvstore.EntryFollow).
func followsValue(key string) bool { return kvstore.EntryFollow.Follows([]byte(key)) }
