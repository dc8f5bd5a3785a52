package meta

import (
	"context"
	"testing"

	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

func TestBatchesFor(t *testing.T) {
	cases := []struct {
		name string
		in   store.Limits
		want batches
	}{
		// etcd's default --max-txn-ops: the sizes the core always used.
		{"etcd default", store.Limits{MaxTxnOps: 128}, batches{dropBudget: 96, dropScan: 24, trash: 16, delSlices: 100}},
		{"no bound declared", store.Limits{}, batches{dropBudget: 192, dropScan: 48, trash: 32, delSlices: 200}},
		{"larger than planned", store.Limits{MaxTxnOps: 10000}, batches{dropBudget: 192, dropScan: 48, trash: 32, delSlices: 200}},
		{"below the minimum", store.Limits{MaxTxnOps: 4}, batches{dropBudget: 24, dropScan: 6, trash: 4, delSlices: 25}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := batchesFor(tc.in)
			if got != tc.want {
				t.Fatalf("batchesFor(%+v) = %+v, want %+v", tc.in, got, tc.want)
			}
			// A chunk-dropping transaction must be able to release at
			// least one slice of a chunk it cuts down (see dropChunksTx).
			if (got.dropBudget-got.dropScan-1)/2 < 1 {
				t.Fatalf("batchesFor(%+v): budget %d leaves no slice to release after listing %d chunks",
					tc.in, got.dropBudget, got.dropScan)
			}
		})
	}
}

// limitedStore is a store that declares l.
type limitedStore struct {
	store.Store
	l store.Limits
}

func (s limitedStore) Limits() store.Limits { return s.l }

// TestClientLimits checks that a client plans within the limits its
// engine declares, through the operation-timeout decorator too.
func TestClientLimits(t *testing.T) {
	cases := []struct {
		name      string
		limits    store.Limits
		batch     batches
		skipDirMt bool // a create may leave its directory's node unwritten
	}{
		{"none declared", store.Limits{}, batchesFor(store.Limits{}), true},
		{"etcd", store.Limits{MaxTxnOps: 128}, batches{dropBudget: 96, dropScan: 24, trash: 16, delSlices: 100}, true},
		{"misses phantoms", store.Limits{MissesPhantoms: true}, batchesFor(store.Limits{}), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := limitedStore{kvstore.New(mem.New(t.Name())), tc.limits}
			if _, err := FormatVolume(ctx, st, &Format{Name: "vol", BlockSize: 4096}); err != nil {
				t.Fatal(err)
			}
			c, err := NewSession(ctx, st, Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			if c.batch != tc.batch {
				t.Errorf("batches %+v, want %+v", c.batch, tc.batch)
			}
			if got := c.conf.DirMtimeSkip > 0; got != tc.skipDirMt {
				t.Errorf("DirMtimeSkip %v: skipping is %v, want %v", c.conf.DirMtimeSkip, got, tc.skipDirMt)
			}
			if got := store.LimitsOf(c.st); got != tc.limits {
				t.Errorf("the client's store (%T) declares %+v, want %+v", c.st, got, tc.limits)
			}
		})
	}
}
