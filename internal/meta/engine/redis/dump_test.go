package redis

import (
	"testing"

	"github.com/sluicefs/sluice/internal/dump/dumptest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/testserver"
)

func TestDump(t *testing.T) {
	testserver.URL(t, testserver.Redis)
	dumptest.Run(t, func(t *testing.T) store.Store {
		st := kvstore.New(openDB(t, freshURL(t, testserver.Redis)))
		return st
	})
}
