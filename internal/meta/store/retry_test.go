package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// conflicting returns an attempt that conflicts n times, then returns
// last, and counts its runs in *runs.
func conflicting(n int, last error, runs *int) func() error {
	return func() error {
		*runs++
		if *runs <= n {
			return fmt.Errorf("engine: %w", ErrConflict)
		}
		return last
	}
}

func TestRetry(t *testing.T) {
	other := errors.New("disk on fire")
	forever := int(^uint(0) >> 1)
	cases := []struct {
		name      string
		timeout   time.Duration // of the context; 0: none
		cancel    time.Duration // cancel the context after; 0: never
		conflicts int
		last      error
		wantRuns  int // 0: more than one, not counted exactly
		wantErr   []error
	}{
		{"no conflict", 0, 0, 0, nil, 1, nil},
		{"another error is not retried", 0, 0, 0, other, 1, []error{other}},
		// More than the 50 attempts Retry used to give up after: a
		// conflict is retried for as long as the deadline allows.
		{"many conflicts then success", 10 * time.Second, 0, 60, nil, 61, nil},
		{"many conflicts then another error", 10 * time.Second, 0, 60, other, 61, []error{other}},
		{"conflicts until the deadline", 100 * time.Millisecond, 0, forever, nil, 0, []error{ErrConflict}},
		{"cancelled while waiting", 0, 50 * time.Millisecond, forever, nil, 0, []error{context.Canceled}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			if c.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.timeout)
				defer cancel()
			}
			if c.cancel > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				time.AfterFunc(c.cancel, cancel)
			}
			runs := 0
			start := time.Now()
			err := Retry(ctx, conflicting(c.conflicts, c.last, &runs))
			took := time.Since(start)
			checkErr(t, err, c.wantErr)
			if c.wantRuns > 0 && runs != c.wantRuns {
				t.Errorf("%d attempts, want %d", runs, c.wantRuns)
			}
			if c.wantRuns == 0 && runs < 2 {
				t.Errorf("%d attempts, want it retried", runs)
			}
			if bound := max(c.timeout, c.cancel); bound > 0 && took > bound+maxBackoff+50*time.Millisecond {
				t.Errorf("returned after %v, past its bound of %v", took, bound)
			}
		})
	}
}

// checkErr fails t unless err wraps each of want (none: err is nil).
func checkErr(t *testing.T, err error, want []error) {
	t.Helper()
	if len(want) == 0 && err != nil {
		t.Fatalf("error %v, want none", err)
	}
	for _, w := range want {
		if !errors.Is(err, w) {
			t.Fatalf("error %v, want one wrapping %v", err, w)
		}
	}
}

// TestBackoff: the wait after each conflict lies in [d/2, d), d doubling
// from minBackoff up to maxBackoff.
func TestBackoff(t *testing.T) {
	for i := range 64 {
		d := min(minBackoff<<min(i, 20), maxBackoff)
		for range 100 {
			if w := backoff(i); w < d/2 || w >= d {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v)", i, w, d/2, d)
			}
		}
	}
}
