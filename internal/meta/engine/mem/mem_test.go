package mem_test

import (
	"testing"

	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

func TestSuite(t *testing.T) {
	metatest.Run(t, func(t *testing.T) store.Store { return kvstore.New(mem.New(t.Name())) })
}

func BenchmarkMeta(b *testing.B) {
	metatest.Bench(b, func(tb testing.TB) store.Store { return kvstore.New(mem.New(tb.Name())) })
}
