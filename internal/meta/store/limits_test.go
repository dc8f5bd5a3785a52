package store_test

import (
	"context"
	"testing"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// plain is a Store that declares no limits.
type plain struct{}

func (plain) Update(context.Context, func(store.Tx) error) error { return nil }
func (plain) View(context.Context, func(store.Tx) error) error   { return nil }
func (plain) Name() string                                       { return "plain" }
func (plain) Close() error                                       { return nil }

// limited is a Store that declares l.
type limited struct {
	plain
	l store.Limits
}

func (s limited) Limits() store.Limits { return s.l }

func TestLimitsOf(t *testing.T) {
	cases := []struct {
		name string
		s    store.Store
		want store.Limits
	}{
		{"no Limiter", plain{}, store.Limits{}},
		{"Limiter", limited{l: store.Limits{MaxTxnOps: 128}}, store.Limits{MaxTxnOps: 128}},
	}
	for _, tc := range cases {
		if got := store.LimitsOf(tc.s); got != tc.want {
			t.Errorf("%s: LimitsOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
