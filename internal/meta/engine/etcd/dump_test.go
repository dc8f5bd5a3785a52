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
	// etcd takes at most 128 operations a transaction (--max-txn-ops), so
	// a load is a raft commit per 64 records: the directory is 20,000
	// entries here, 100,000 on the engines without that bound.
	dumptest.RunOptions(t, func(t *testing.T) store.Store {
		return kvstore.New(open(t, volumeURL(t, base), true))
	}, dumptest.Options{BigDir: 20_000})
}
