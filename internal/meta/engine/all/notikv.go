//go:build notikv

package all

import (
	"context"
	"errors"

	"github.com/sluicefs/sluice/internal/meta/store"
)

func openTiKV(ctx context.Context, url string, create bool) (store.Store, error) {
	return nil, errors.New("this sluice was built without TiKV support (-tags notikv)")
}
