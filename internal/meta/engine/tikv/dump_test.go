package tikv_test

import (
	"testing"

	"github.com/sluicefs/sluice/internal/dump/dumptest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

func TestDump(t *testing.T) {
	s := mockStore(t)
	// mocktikv, the in-process emulator, resolves a lock by scanning its
	// whole store (a profile of 8,000 entries spends 82% there), which
	// makes a bulk load quadratic in it and not on TiKV: the
	// 100,000-entry directory runs on every engine with a server.
	dumptest.RunOptions(t, func(t *testing.T) store.Store { return kvstore.New(volume(t, s)) }, dumptest.Options{BigDir: 2_000})
}
