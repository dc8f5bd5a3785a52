package meta

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestDeadlineCtx: the lazy bound keeps the context package's contract
// (Err, Done and Cause agree) whichever of Err and Done is asked first,
// for each way it can end.
func TestDeadlineCtx(t *testing.T) {
	tests := []struct {
		name      string
		bound     time.Duration
		cancel    bool // cancel the parent
		release   bool // release the bound
		doneFirst bool
		want      error
	}{
		{name: "running, Err first", bound: time.Hour},
		{name: "running, Done first", bound: time.Hour, doneFirst: true},
		{name: "expired, Err first", bound: -time.Second, want: context.DeadlineExceeded},
		{name: "expired, Done first", bound: -time.Second, doneFirst: true, want: context.DeadlineExceeded},
		{name: "parent cancelled, Err first", bound: time.Hour, cancel: true, want: context.Canceled},
		{name: "parent cancelled, Done first", bound: time.Hour, cancel: true, doneFirst: true, want: context.Canceled},
		{name: "released, Err first", bound: time.Hour, release: true, want: context.Canceled},
		{name: "released, Done first", bound: time.Hour, release: true, doneFirst: true, want: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.WithValue(context.Background(), credKey{}, Cred{Uid: 7}))
			defer cancel()
			c, release := withDeadline(parent, time.Now().Add(tt.bound))
			defer release()
			if tt.cancel {
				cancel()
			}
			if tt.release {
				release()
			}
			var err error
			if tt.doneFirst {
				select {
				case <-c.Done():
					err = c.Err()
				case <-time.After(5 * time.Second):
					if tt.want != nil {
						t.Fatal("Done not closed")
					}
				}
				if tt.want == nil {
					select {
					case <-c.Done():
						t.Fatal("Done closed early")
					default:
					}
				}
			} else {
				err = c.Err()
				select {
				case <-c.Done():
					if err == nil {
						t.Fatal("Done closed while Err is nil")
					}
				default:
					if err != nil {
						t.Fatalf("Err is %v and Done is open", err)
					}
				}
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Err = %v, want %v", err, tt.want)
			}
			if tt.want != nil && !errors.Is(context.Cause(c), tt.want) {
				t.Fatalf("Cause = %v, want %v", context.Cause(c), tt.want)
			}
			if got := CredOf(c); got.Uid != 7 {
				t.Fatalf("the parent's values are lost: %+v", got)
			}
		})
	}
}

// TestDeadlineCtxEnds: a context derived from the bound, and Done, end
// when the deadline passes or the parent is cancelled later on.
func TestDeadlineCtxEnds(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		c, release := withDeadline(context.Background(), time.Now().Add(20*time.Millisecond))
		defer release()
		child, stop := context.WithCancel(c)
		defer stop()
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("derived context not ended by the deadline")
		}
		if !errors.Is(c.Err(), context.DeadlineExceeded) || !errors.Is(child.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err = %v, child's %v", c.Err(), child.Err())
		}
	})
	t.Run("parent", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		c, release := withDeadline(parent, time.Now().Add(time.Hour))
		defer release()
		done := c.Done()
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Done not closed when the parent was cancelled")
		}
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("Err = %v", c.Err())
		}
	})
	t.Run("earlier parent deadline", func(t *testing.T) {
		pd := time.Now().Add(time.Minute)
		parent, cancel := context.WithDeadline(context.Background(), pd)
		defer cancel()
		c, release := withDeadline(parent, time.Now().Add(time.Hour))
		defer release()
		if d, ok := c.Deadline(); !ok || !d.Equal(pd) {
			t.Fatalf("Deadline = %v %v, want the parent's %v", d, ok, pd)
		}
	})
}

// TestDeadlineCtxAllocs: a bound nobody waits on starts nothing.
func TestDeadlineCtxAllocs(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := testing.AllocsPerRun(100, func() {
		c, release := withDeadline(parent, time.Now().Add(time.Minute))
		_ = c.Err()
		release()
	})
	if n > 2 {
		t.Fatalf("%v allocations for a bound nobody waits on, want at most 2", n)
	}
}
