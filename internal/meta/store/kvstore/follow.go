package kvstore

// FollowRule describes a read kvstore makes right after another: having
// read a directory entry (lookup, unlink, rename), it reads the node record
// of the inode the entry names. An engine that can chain reads on the
// server (Redis, with a script) may fetch both in one round trip. The rule
// lives here, with the key layout; an engine that applies it must use a
// value it fetched ahead only for a read of exactly that key, so a rule
// that no longer matches the layout costs a round trip, never wrong data.
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

// Follows reports whether a read of key is followed by a read of the key
// its value names.
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
