package redis

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
// chunks "C", flocks "F", POSIX locks "P"), the per-session families "O"
// and "Q" by session, and every other family ("N", "D", "L") as a whole.
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
	case 'O', 'Q':
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

// A directory entry ("A" ino "D" name) holds the entry's type (1 byte) and
// inode number (8 bytes), and kvstore reads the inode's node record
// ("A" ino "I") right after it reads an entry (lookup, unlink, rename). A
// read of an entry therefore also fetches that record, in the same round
// trip (see fetchScript). The rule is here, next to scanGroup, because it
// is kvstore's key layout too; if the layout changes, the prefetch only
// becomes useless, never wrong, since a prefetched value is used only for
// a read of exactly its key.
const (
	entryKind    = 'D'
	entryValue   = 1 + 8 // bytes of an entry's value
	entryInoFrom = 1     // the inode number is value[entryInoFrom:entryValue]
	nodePrefix   = "A"   // a node record is nodePrefix ino nodeKind
	nodeKind     = "I"
)

// followsValue reports whether key is a directory entry, whose value names
// the key that is read next.
func followsValue(key string) bool {
	const ino = 8
	return len(key) > 1+ino+1 && key[0] == 'A' && key[1+ino] == entryKind
}

// followKey returns the key that the value v of a directory entry points
// to, or "" when v is not an entry's value.
func followKey(v []byte) string {
	if len(v) != entryValue {
		return ""
	}
	return nodePrefix + string(v[entryInoFrom:]) + nodeKind
}
