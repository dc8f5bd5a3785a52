package etcd_test

import (
	"testing"

	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// TestManyChunksDefaultLimits truncates and deletes files of hundreds of
// chunks, and a chunk of 150 slices, on a throwaway etcd with its default
// --max-txn-ops (128): the shared test servers run with 10000, under which
// dropping them all in one transaction would pass unnoticed.
func TestManyChunksDefaultLimits(t *testing.T) {
	addr := startEtcd(t)
	metatest.ManyChunks(t, func(t *testing.T) store.Store {
		return kvstore.New(open(t, volumeURL(t, "etcd://"+addr), true))
	})
}
