// Package all builds the registry of metadata engines in one place and opens
// a store.Store from a metadata URL such as sqlite3:///var/lib/sluice/vol.db
// or redis://127.0.0.1:6379/1.
package all

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/sluicefs/sluice/internal/meta/engine/etcd"
	"github.com/sluicefs/sluice/internal/meta/engine/mysql"
	"github.com/sluicefs/sluice/internal/meta/engine/postgres"
	redisengine "github.com/sluicefs/sluice/internal/meta/engine/redis"
	"github.com/sluicefs/sluice/internal/meta/engine/sluice"
	"github.com/sluicefs/sluice/internal/meta/engine/sqlite"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// opener opens one engine from the whole URL.
type opener func(ctx context.Context, url string, create bool) (store.Store, error)

// kv adapts the opener of an engine that offers an ordered key-value
// database (kvstore.DB) to an opener of its store.
func kv[D kvstore.DB](open func(ctx context.Context, url string, create bool) (D, error)) opener {
	return func(ctx context.Context, url string, create bool) (store.Store, error) {
		db, err := open(ctx, url, create)
		if err != nil {
			return nil, err
		}
		return kvstore.New(db), nil
	}
}

func engines() map[string]opener {
	sqliteOpen := func(ctx context.Context, url string, create bool) (store.Store, error) {
		path := strings.TrimPrefix(url, "sqlite3://")
		if i := strings.IndexByte(path, '?'); i >= 0 {
			path = path[:i]
		}
		return sqlite.Open(ctx, path, create)
	}
	rd := kv(redisengine.Open)
	return map[string]opener{
		"sqlite3":    sqliteOpen,
		"postgres":   postgres.Open,
		"postgresql": postgres.Open,
		"mysql":      mysql.Open,
		"redis":      rd,
		"rediss":     rd,
		"etcd":       kv(etcd.Open),
		"sluice":     kv(sluice.Open),
		"tikv":       openTiKV,
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
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("malformed metadata URL %q: expected SCHEME://ADDRESS, e.g. sqlite3://vol.db", rawURL)
	}
	open, found := engines()[strings.ToLower(scheme)]
	if !found {
		return nil, fmt.Errorf("unknown metadata engine %q in URL (supported: %s)", scheme, strings.Join(Schemes(), ", "))
	}
	st, err := open(ctx, rawURL, create)
	if err != nil {
		return nil, fmt.Errorf("metadata engine %s: %w", scheme, err)
	}
	return st, nil
}
