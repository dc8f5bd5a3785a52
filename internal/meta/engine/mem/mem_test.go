package mem_test

import (
	"testing"

	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore/kvtest"
	"github.com/sluicefs/sluice/internal/meta/store/storetest"
)

func TestSuite(t *testing.T) {
	metatest.Run(t, func(t *testing.T) store.Store { return kvstore.New(mem.New(t.Name())) })
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return kvstore.New(mem.New(t.Name())) }, storetest.Options{})
}

func TestRaces(t *testing.T) {
	db := mem.New(t.Name())
	storetest.Races(t, kvstore.New(db), kvstore.New(db))
}

func TestKV(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kvstore.DB { return mem.New(t.Name()) },
		kvtest.Options{Snapshot: true})
}

func BenchmarkMeta(b *testing.B) {
	metatest.Bench(b, func(tb testing.TB) store.Store { return kvstore.New(mem.New(tb.Name())) })
}
