package meta

import (
	"testing"

	"github.com/sluicefs/sluice/internal/meta/store"
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
