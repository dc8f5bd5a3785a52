package dump_test

import (
	"context"
	"github.com/sluicefs/sluice/internal/meta/engine/sqlite"
	"path/filepath"
	"testing"

	"github.com/sluicefs/sluice/internal/dump/dumptest"
	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

func TestMem(t *testing.T) {
	dumptest.Run(t, func(t *testing.T) store.Store {
		st := kvstore.New(mem.New(t.Name()))
		t.Cleanup(func() { st.Close() })
		return st
	})
}

func TestSQLite(t *testing.T) {
	dumptest.Run(t, func(t *testing.T) store.Store {
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "meta.db"), true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	})
}
