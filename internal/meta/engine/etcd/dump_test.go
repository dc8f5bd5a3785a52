package etcd_test

import (
	"testing"

	"github.com/sluicefs/sluice/internal/dump/dumptest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/testserver"
)

func TestDump(t *testing.T) {
	base := testserver.URL(t, testserver.Etcd)
	dumptest.Run(t, func(t *testing.T) store.Store {
		return kvstore.New(open(t, volumeURL(t, base), true))
	})
}
