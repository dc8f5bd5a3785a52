package mysql_test

import (
	"testing"

	"github.com/sluicefs/sluice/internal/dump/dumptest"
	"github.com/sluicefs/sluice/internal/meta/engine/sqlstore/sqltest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/testserver"
)

func TestDump(t *testing.T) {
	base := testserver.URL(t, testserver.MySQL)
	dumptest.Run(t, func(t *testing.T) store.Store { return sqltest.Store(t, engine, base) })
}
