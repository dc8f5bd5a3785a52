// Package sqltest holds the helpers the tests of the SQL engines share:
// fresh namespaces in a shared server database (a random table_prefix per
// volume, its tables dropped when the test ends), and a server that never
// answers.
package sqltest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Opener opens the volume at url (the engine's Open).
type Opener func(ctx context.Context, url string, create bool) (store.Store, error)

// WithParam returns url with the query parameter key=value added.
func WithParam(url, key, value string) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + key + "=" + value
}

// FreshURL returns base with a new random table_prefix; the tables are
// dropped when t ends (after cleanups registered later, such as closing
// the handles opened on them).
func FreshURL(t testing.TB, open Opener, base string) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	u := WithParam(base, "table_prefix", "t"+hex.EncodeToString(b[:])+"_")
	t.Cleanup(func() {
		ctx := context.Background()
		st, err := open(ctx, u, true)
		if err != nil {
			t.Errorf("open to drop the tables: %v", err)
			return
		}
		defer st.Close()
		d, ok := st.(interface{ Drop(context.Context) error })
		if !ok {
			t.Errorf("cannot drop the tables of a %T", st)
			return
		}
		if err := d.Drop(ctx); err != nil {
			t.Errorf("drop tables: %v", err)
		}
	})
	return u
}

// Store opens an empty volume of its own in the database at base, for
// metatest.Run and metatest.Bench; the caller closes the store.
func Store(tb testing.TB, open Opener, base string) store.Store {
	tb.Helper()
	st, err := open(context.Background(), FreshURL(tb, open, base), true)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	return st
}

// OpenStore opens the volume at url, failing t on error; the store is
// closed when t ends.
func OpenStore(t testing.TB, open Opener, url string, create bool) store.Store {
	t.Helper()
	st, err := open(context.Background(), url, create)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
