package procs

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// fakeProcess is a controller's view of a process whose load a test sets.
type fakeProcess struct {
	mu    sync.Mutex
	cores float64
	sizes []int // every resize, in order
}

func (f *fakeProcess) next() sample {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sample{dt: Interval, cpu: time.Duration(f.cores * float64(Interval))}
}

func (f *fakeProcess) set(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sizes = append(f.sizes, n)
}

func (f *fakeProcess) load(cores float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cores = cores
}

// fakeController runs a controller of max Ps over f, ticked by the test.
func fakeController(t *testing.T, f *fakeProcess, max int) (*Controller, func(n int)) {
	t.Helper()
	tick := make(chan time.Time)
	c := newController(max, nil, f.next, f.set)
	stopped := make(chan struct{})
	go c.run(tick, func() { close(stopped) })
	t.Cleanup(func() {
		c.Stop()
		<-stopped
	})
	return c, func(n int) {
		for i := 0; i < n; i++ {
			tick <- time.Time{}
		}
	}
}

func TestControllerFollowsTheLoad(t *testing.T) {
	f := &fakeProcess{}
	c, ticks := fakeController(t, f, 4)
	ticks(1) // the first resize happens before the first tick is taken
	if got := c.Procs(); got != 1 {
		t.Fatalf("at start: %d Ps, want 1", got)
	}
	f.load(1.5)
	ticks(int(upFor / Interval))
	ticks(1) // a tick after the one that decided: the resize is done
	if got := c.Procs(); got != 4 {
		t.Fatalf("under load: %d Ps, want 4", got)
	}
	f.load(0.1)
	ticks(int(minHold/Interval) + 1)
	if got := c.Procs(); got != 1 {
		t.Fatalf("quiet again: %d Ps, want 1", got)
	}
	c.Stop()
	if got := c.Procs(); got != 4 {
		t.Fatalf("after Stop: %d Ps, want 4", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	want := []int{1, 4, 1, 4}
	if len(f.sizes) != len(want) {
		t.Fatalf("resizes %v, want %v", f.sizes, want)
	}
	for i := range want {
		if f.sizes[i] != want[i] {
			t.Fatalf("resizes %v, want %v", f.sizes, want)
		}
	}
}

func TestStartKeepsAnExplicitGOMAXPROCS(t *testing.T) {
	t.Setenv("GOMAXPROCS", "3")
	before := runtime.GOMAXPROCS(0)
	c := Start(8, nil)
	defer c.Stop()
	time.Sleep(3 * Interval)
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("GOMAXPROCS %d after Start, want %d kept", got, before)
	}
	if got := c.Procs(); got != before {
		t.Fatalf("Procs %d, want %d", got, before)
	}
}

func TestStartWithOneCPUChangesNothing(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	c := Start(1, nil)
	c.Stop()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("GOMAXPROCS %d after Start(1), want %d kept", got, before)
	}
}

func TestReaderCountsCPU(t *testing.T) {
	r := newReader()
	var total sample
	deadline := time.Now().Add(10 * time.Second)
	for total.cpu < 20*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("%v of CPU counted in %v of a busy loop", total.cpu, total.dt)
		}
		for end := time.Now().Add(5 * time.Millisecond); time.Now().Before(end); {
		}
		s := r.next()
		total.dt += s.dt
		total.cpu += s.cpu
	}
	if total.cpu > total.dt*time.Duration(runtime.NumCPU())+50*time.Millisecond {
		t.Fatalf("%v of CPU counted in %v of wall time on %d CPUs", total.cpu, total.dt, runtime.NumCPU())
	}
}
