package meta

import "github.com/sluicefs/sluice/internal/meta/store"

// batches are the sizes of the core's batched transactions, planned within
// the engine's store.Limits: dropping the chunks of a truncated or deleted
// file, emptying the trash, and unqueueing deleted slices each run as
// several bounded transactions rather than one that could exceed them.
type batches struct {
	// dropBudget bounds the records one transaction reads or writes while
	// dropping chunks: a chunk costs its delete, and each of its slices a
	// reference-count read and a write. It leaves a quarter of the bound
	// for the caller's own records.
	dropBudget int
	// dropScan is how many chunk indexes one such transaction lists.
	dropScan int
	// trash is how many trashed files one transaction deletes (a file
	// costs a handful of records).
	trash int
	// delSlices is how many queued slices one deletion round takes; their
	// queue records then go in one transaction.
	delSlices int
}

const (
	// planTxnOps is the bound the core plans within when the engine
	// declares none, or a larger one: on any engine a huge transaction
	// holds locks or risks conflicts for long.
	planTxnOps = 256
	// minTxnOps is the smallest engine bound the core can work within:
	// a rename alone touches a dozen records.
	minTxnOps = 32
)

// batchesFor returns the batch sizes that fit l. Under etcd's default
// --max-txn-ops (128) they are 96 records and 24 chunks per drop, 16
// trashed files and 100 queued slices.
func batchesFor(l store.Limits) batches {
	ops := l.MaxTxnOps
	if ops <= 0 || ops > planTxnOps {
		ops = planTxnOps
	}
	ops = max(ops, minTxnOps)
	return batches{dropBudget: ops * 3 / 4, dropScan: ops * 3 / 16, trash: ops / 8, delSlices: ops * 25 / 32}
}
