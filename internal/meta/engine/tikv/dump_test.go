package tikv_test

import (
	"testing"

	"github.com/sluicefs/sluice/internal/dump/dumptest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

func TestDump(t *testing.T) {
	s := mockStore(t)
	dumptest.RunOptions(t, func(t *testing.T) store.Store { return kvstore.New(volume(t, s)) }, dumptest.Options{BigDir: 20_000})
}
