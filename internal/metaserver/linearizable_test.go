package metaserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sluicefs/sluice/internal/meta/engine/sluice"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// kvOp is an operation of the linearizability check: a put of val, or a
// get that returned val.
type kvOp struct {
	put      bool
	key, val string
}

// kvModel is a register per key: a get returns the last value put.
var kvModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		for _, op := range h {
			k := op.Input.(kvOp).key
			by[k] = append(by[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range by {
			out = append(out, ops)
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		in := input.(kvOp)
		if in.put {
			return true, in.val
		}
		return output.(kvOp).val == state.(string), state
	},
	DescribeOperation: func(input, output any) string {
		if in := input.(kvOp); in.put {
			return fmt.Sprintf("put(%s, %s)", in.key, in.val)
		}
		return fmt.Sprintf("get(%s) -> %s", input.(kvOp).key, output.(kvOp).val)
	},
}

// linearizabilityRun runs gets and puts through clients of a group of
// three while the leader is cut off from the others, and the news that
// it lost its office reaches it 2 s late; it returns whether the history
// is linearizable, and how many operations it holds.
//
// Readers talk to the old leader first; writers only to the two others,
// which elect a new leader and take the puts. A read the old leader
// served from its own state after the new leader took a put would return
// a value older than one a finished put wrote: what the read index
// prevents.
func linearizabilityRun(t *testing.T, noReadIndex bool) (bool, int) {
	t.Helper()
	ms := startGroup(t, 3, func(o *RaftOptions) {
		o.net = &netFaults{}
		o.lateStepDown = 2 * time.Second
		o.noReadIndex = noReadIndex
	})
	l := leader(t, ms)
	var others []*member
	for _, m := range ms {
		if m != l {
			others = append(others, m)
		}
	}
	ctx := context.Background()
	open := func(ms ...*member) *sluice.DB {
		var as []string
		for _, m := range ms {
			as = append(as, m.client)
		}
		db, err := sluice.Open(ctx, "sluice://"+strings.Join(as, ",")+"/vol?timeout=20s&ops=client", true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var mu sync.Mutex
	var history []porcupine.Operation
	record := func(op porcupine.Operation) {
		mu.Lock()
		history = append(history, op)
		mu.Unlock()
	}
	keys := []string{"Ka", "Kb"}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var seq atomic.Int64
	for c := range 3 { // readers, the old leader first in their URL
		db := open(append([]*member{l}, others...)...)
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				k := keys[i%len(keys)]
				call := now()
				var v []byte
				err := db.View(ctx, func(tx kvstore.Txn) error {
					var err error
					v, err = tx.Get([]byte(k))
					return err
				})
				if err != nil {
					continue // a failed read has no effect
				}
				record(porcupine.Operation{ClientId: c, Input: kvOp{key: k}, Call: call, Output: kvOp{key: k, val: string(v)}, Return: now()})
				time.Sleep(200 * time.Microsecond)
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	l.s.opts.Raft.net.setCut(true)
	for c := range 2 { // writers, which cannot reach the old leader
		db := open(others...)
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				k := keys[i%len(keys)]
				v := fmt.Sprintf("v%d", seq.Add(1))
				call := now()
				err := store.Retry(ctx, func() error {
					return db.Update(ctx, func(tx kvstore.Txn) error {
						tx.Set([]byte(k), []byte(v))
						return nil
					})
				})
				ret := now()
				if err != nil && !errors.Is(err, context.Canceled) {
					ret = math.MaxInt64 // it may or may not have been applied
				}
				record(porcupine.Operation{ClientId: 3 + c, Input: kvOp{put: true, key: k, val: v}, Call: call, Output: kvOp{}, Return: ret})
				time.Sleep(time.Millisecond)
			}
		})
	}
	time.Sleep(3 * time.Second)
	l.s.opts.Raft.net.setCut(false)
	time.Sleep(500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	res, _ := porcupine.CheckOperationsVerbose(kvModel, history, time.Minute)
	if res == porcupine.Unknown {
		t.Fatalf("the checker gave up on %d operations", len(history))
	}
	return res == porcupine.Ok, len(history)
}

// TestGroupLinearizable checks with a model checker (porcupine) that a
// group's reads and writes are linearizable while its leader is cut off
// and learns it late, and that the check catches the stale reads the
// same run makes without the read index.
func TestGroupLinearizable(t *testing.T) {
	ok, n := linearizabilityRun(t, false)
	t.Logf("%d operations, linearizable: %v", n, ok)
	if !ok {
		t.Fatal("the history of gets and puts is not linearizable")
	}
	t.Run("without the read index", func(t *testing.T) {
		ok, n := linearizabilityRun(t, true)
		t.Logf("%d operations, linearizable: %v", n, ok)
		if ok {
			t.Fatal("the check found nothing wrong with reads served by a cut-off leader that does not confirm it leads")
		}
	})
}
