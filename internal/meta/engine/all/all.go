// Package all builds the registry of metadata engines in one place and opens
// a store.Store from a metadata URL such as sqlite3:///var/lib/sluice/vol.db.
package all

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/sluicefs/sluice/internal/meta/engine/sqlite"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// opener opens one engine from the part of the URL after "scheme://".
type opener func(ctx context.Context, addr string, create bool) (store.Store, error)

func engines() map[string]opener {
	return map[string]opener{
		"sqlite3": func(ctx context.Context, addr string, create bool) (store.Store, error) {
			if i := strings.IndexByte(addr, '?'); i >= 0 {
				addr = addr[:i]
			}
			db, err := sqlite.Open(ctx, addr, create)
			if err != nil {
				return nil, err
			}
			return kvstore.New(db), nil
		},
	}
}

// Schemes lists the supported URL schemes.
func Schemes() []string {
	var out []string
	for k := range engines() {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Open opens the metadata engine named by rawURL. With create false the
// engine must already exist (for example the SQLite file); format passes
// true.
func Open(ctx context.Context, rawURL string, create bool) (store.Store, error) {
	scheme, addr, ok := strings.Cut(rawURL, "://")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("malformed metadata URL %q: expected SCHEME://ADDRESS, e.g. sqlite3://vol.db", rawURL)
	}
	open, found := engines()[strings.ToLower(scheme)]
	if !found {
		return nil, fmt.Errorf("unknown metadata engine %q in URL (supported: %s)", scheme, strings.Join(Schemes(), ", "))
	}
	st, err := open(ctx, addr, create)
	if err != nil {
		return nil, fmt.Errorf("metadata engine %s: %w", scheme, err)
	}
	return st, nil
}
