package kvstore

import (
	"bytes"
	"testing"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// TestEntryFollow checks the rule against the layout the transaction
// writes: an entry's key follows, its value names its node's key.
func TestEntryFollow(t *testing.T) {
	entry := inoKey(7, 'D', []byte("name"))
	if !EntryFollow.Follows(entry) {
		t.Fatalf("entry key %q does not follow", entry)
	}
	for _, k := range [][]byte{inoKey(7, 'I', nil), inoKey(7, 'X', []byte("user.a")), []byte("setting")} {
		if EntryFollow.Follows(k) {
			t.Errorf("key %q follows", k)
		}
	}
	v := []byte{store.TypeFile, 0, 0, 0, 0, 0, 0, 0, 42}
	if got, want := EntryFollow.Next(v), inoKey(42, 'I', nil); !bytes.Equal(got, want) {
		t.Fatalf("Next(%x) = %q, want the node key %q", v, got, want)
	}
	if got := EntryFollow.Next(v[:5]); got != nil {
		t.Fatalf("Next of a short value = %q, want nil", got)
	}
}
