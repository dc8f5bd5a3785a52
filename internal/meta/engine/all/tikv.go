//go:build !notikv

package all

import (
	"context"

	"github.com/sluicefs/sluice/internal/meta/engine/tikv"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// openTiKV opens a tikv:// URL. The TiKV client is a heavy dependency;
// build with -tags notikv to leave it out.
func openTiKV(ctx context.Context, url string, create bool) (store.Store, error) {
	return kv(tikv.Open)(ctx, url, create)
}
