package kvstore

import (
	"context"
	"testing"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// nopDB is a DB that declares no limits; limitedDB declares l.
type nopDB struct{}

func (nopDB) Update(context.Context, func(Txn) error) error { return nil }
func (nopDB) View(context.Context, func(Txn) error) error   { return nil }
func (nopDB) Name() string                                  { return "nop" }
func (nopDB) Close() error                                  { return nil }

type limitedDB struct {
	nopDB
	l store.Limits
}

func (d limitedDB) Limits() store.Limits { return d.l }

func TestStoreForwardsLimits(t *testing.T) {
	cases := []struct {
		name string
		db   DB
		want store.Limits
	}{
		{"DB without Limiter", nopDB{}, store.Limits{}},
		{"DB with Limiter", limitedDB{l: store.Limits{MaxTxnOps: 128}}, store.Limits{MaxTxnOps: 128}},
	}
	for _, tc := range cases {
		if got := store.LimitsOf(New(tc.db)); got != tc.want {
			t.Errorf("%s: LimitsOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
