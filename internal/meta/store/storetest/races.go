package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// updateRetrying runs fn with st.Update until it does not conflict, for
// up to raceRetryFor: Races makes far more contention than the core, which
// Update's own retries are sized for, and a loaded server (MariaDB picks a
// deadlock victim among eight writers of one row) can keep one writer
// losing for a long while. Serializability is what Races checks; how soon
// a writer wins is not.
func updateRetrying(ctx context.Context, st store.Store, fn func(store.Tx) error) error {
	deadline := time.Now().Add(raceRetryFor)
	for {
		err := st.Update(ctx, fn)
		if !errors.Is(err, store.ErrConflict) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Duration(rand.Int64N(int64(5 * time.Millisecond))))
	}
}

// raceRetryFor bounds how long one update of Races keeps retrying.
const raceRetryFor = 3 * time.Minute

// Races checks that Update transactions on two handles of one volume are
// serializable: concurrent read-modify-writes of one counter lose no
// update and, unless the store declares it misses phantoms
// (store.Limits.MissesPhantoms), of two transactions that each add an
// entry to a directory only if they found it empty, exactly one adds (no
// write skew through a phantom; neither writes the directory's node, which
// would serialize them on its own).
func Races(t *testing.T, st1, st2 store.Store) {
	phantoms := !store.LimitsOf(st1).MissesPhantoms
	const workers, incs, rounds = 4, 25, 20
	const dirs = store.Ino(1000) // directories dirs+r, one per round
	// The counter exists before the race: every increment then locks or
	// checks one record. (Creating a missing record from eight writers at
	// once is a gap-lock deadlock on MariaDB that, on a loaded machine,
	// kept every writer losing for minutes; the phantom rounds below
	// still race to create records.)
	const base = 1000
	if err := updateRetrying(ctx, st1, func(tx store.Tx) error {
		tx.SetCounter("races", base)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers*incs+2*rounds)
	for _, st := range []store.Store{st1, st2} {
		for range workers {
			wg.Go(func() {
				for range incs {
					err := updateRetrying(ctx, st, func(tx store.Tx) error {
						v, err := tx.Counter("races")
						if err != nil {
							return err
						}
						tx.SetCounter("races", v+1)
						return nil
					})
					if err != nil {
						err = fmt.Errorf("increment: %w", err)
					}
					errs <- err
				}
			})
		}
	}
	if phantoms {
		// The rounds run one after another beside the increments: each
		// is a pair of writers scanning one empty directory. Run at
		// once, the forty scans of adjacent empty ranges all lock one
		// gap on MariaDB, and every insert then deadlocks with thirty
		// nine others; victims retry into the same gap faster than it
		// drains, which kept writers losing for minutes on a loaded
		// machine. A pair always resolves: the victim retries and finds
		// the winner's entry.
		wg.Go(func() {
			for r := range rounds {
				var pair sync.WaitGroup
				for i, st := range []store.Store{st1, st2} {
					pair.Go(func() {
						err := updateRetrying(ctx, st, func(tx store.Tx) error {
							es, err := tx.Edges(dirs+store.Ino(r), nil, 10)
							if err == nil && len(es) == 0 {
								tx.SetEdge(dirs+store.Ino(r), store.Edge{Name: fmt.Appendf(nil, "by%d", i), Ino: 5000, Type: store.TypeFile})
							}
							return err
						})
						if err != nil {
							err = fmt.Errorf("round %d, writer %d: %w", r, i, err)
						}
						errs <- err
					})
				}
				pair.Wait()
			}
		})
	}
	go func() { wg.Wait(); close(errs) }()
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// The totals are read in an Update, which checks its reads at commit:
	// a View through st2 may not see st1's last commits yet (the Redis
	// engine answers from a cache the server updates beside the writer's
	// reply; see store.MaxLag), and Races checks what was committed, not
	// how soon another handle sees it.
	var counter int64
	var entries []int
	err := updateRetrying(ctx, st2, func(tx store.Tx) error {
		v, err := tx.Counter("races")
		if err != nil {
			return err
		}
		counter, entries = v, entries[:0]
		if !phantoms {
			return nil
		}
		for r := range rounds {
			es, err := tx.Edges(dirs+store.Ino(r), nil, 10)
			if err != nil {
				return err
			}
			entries = append(entries, len(es))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if counter != base+2*workers*incs {
		t.Errorf("counter = %d after %d increments from %d: updates were lost", counter, 2*workers*incs, base)
	}
	for r, n := range entries {
		if n != 1 {
			t.Errorf("round %d: %d entries added to an empty directory, want 1", r, n)
		}
	}
}
