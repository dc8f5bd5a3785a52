package kvstore

// FollowRule describes a read that follows another: having read a key,
// read the key its value names. Directory entries name the node record
// of their inode (EntryFollow), which a lookup reads next. The rule lives
// here, with the key layout, so that an engine that can chain reads on
// the server (Redis, with a script) knows how to, without knowing the
// layout.
type FollowRule struct {
	// Prefix and Suffix surround a followed value from byte From on to
	// make the key read next.
	Prefix, Suffix string
	From           int
	// ValueLen is the length of a value that can be followed.
	ValueLen int
	// Kind is the byte that marks a followed key: Prefix, the
	// ValueLen-From bytes the value also holds, Kind, then a name.
	Kind byte
}

// EntryFollow is the rule for directory entries: key "A" ino "D" name,
// value type(1) ino(8), followed by the node key "A" ino "I".
var EntryFollow = FollowRule{Prefix: "A", Suffix: "I", From: 1, ValueLen: 9, Kind: 'D'}

// Follows reports whether key is one the rule follows (for EntryFollow:
// whether key is a directory entry).
func (r FollowRule) Follows(key []byte) bool {
	at := len(r.Prefix) + r.ValueLen - r.From // of Kind
	return len(key) > at+1 && string(key[:len(r.Prefix)]) == r.Prefix && key[at] == r.Kind
}

// Next returns the key that value v of a followed key names, or nil when v
// cannot be followed.
func (r FollowRule) Next(v []byte) []byte {
	if len(v) != r.ValueLen {
		return nil
	}
	k := make([]byte, 0, len(r.Prefix)+len(v)-r.From+len(r.Suffix))
	k = append(k, r.Prefix...)
	k = append(k, v[r.From:]...)
	return append(k, r.Suffix...)
}

// Follower is an optional Txn ability for adapters that can read a key
// and the key its value names in one round trip. kvstore asks for it
// where it reads both (store.Tx.Lookup); without it, it reads them one
// after the other.
type Follower interface {
	// GetFollow reads keys as GetMany does and, for each key i with
	// follow[i], also the key rule.Next names in its value: next[i] is
	// that key's value, nil when it is missing or when the value cannot
	// be followed (rule.Next returns nil). Both count as reads of the
	// transaction.
	GetFollow(keys [][]byte, follow []bool, rule FollowRule) (vals, next [][]byte, err error)
}

// IsNodeKey reports whether key is the node record of an inode ("A" ino
// "I"), so that a server holding the pairs can count inodes without
// knowing the rest of the layout.
func IsNodeKey(key []byte) bool {
	return len(key) == 10 && key[0] == 'A' && key[9] == 'I'
}
