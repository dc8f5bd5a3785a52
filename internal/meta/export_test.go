package meta

import (
	"context"
	"time"
)

// ProcessDeletions runs processDeletions with budget, for the tests of
// package meta_test.
func (c *Session) ProcessDeletions(ctx context.Context, budget time.Duration) error {
	return c.processDeletions(ctx, budget)
}

// DeletionRound runs deletionRound, for the tests of package meta_test.
func (c *Session) DeletionRound(seen *uint64) time.Duration { return c.deletionRound(seen) }

// The budgets of background deletion rounds, for the tests of package
// meta_test.
const (
	DeletionBudget = deletionBudget
	OneBatch       = oneBatch
)

// The classifications of an engine's failures (outage.go), for the tests
// of package meta_test.
var (
	Unreachable = unreachable
	Transport   = transport
	TimedOut    = timedOut
)
