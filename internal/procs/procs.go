// Package procs sizes the Go scheduler of a serving process to its load:
// one P (GOMAXPROCS=1) while its work fits one CPU, every P the process
// was given once it does not.
//
// Why. A FUSE mount serves mostly one request at a time: an application
// makes a system call, the kernel hands the request to the mount, the
// mount answers, the application goes on. With idle Ps the Go runtime
// wakes a thread on another CPU for nearly every request: the scheduler's
// monitor takes the P of the goroutine blocked reading /dev/fuse and, with
// no other P spinning, starts a thread to spin on it; a readied goroutine
// wakes an idle P. On a virtual machine, whose idle vCPUs halt, each
// such wake-up costs tens of microseconds and the CPU time of the spin.
// On one P the goroutine that read a request answers it and reads the
// next on the same thread, and nothing else wakes. Measured on a 2-vCPU
// machine when one P was chosen: a create
// loop on SQLite ran at 4,300 creates/s with two Ps and 7,700-10,000 with
// one, and the mount spent 168 µs of CPU per create with two against 75
// with one.
//
// One P caps the Go code at one CPU: compression, checksums and many
// clients at once need more. So the controller samples the process's CPU
// time (getrusage) every Interval and moves between one P and the maximum
// it was started with (see policy): up as soon as the process uses about
// a whole CPU, down once it has used well under one for a while. The
// maximum is read once, at Start: calling runtime.GOMAXPROCS ends the
// runtime's own updates of it when the process's CPU quota changes.
//
// A process started with GOMAXPROCS in its environment keeps what it was
// given: Start returns a controller that changes nothing.
package procs

import (
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Interval is how often the controller samples the process.
const Interval = 50 * time.Millisecond

// Controller moves the process between one P and its maximum.
type Controller struct {
	max   int
	procs atomic.Int32
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	log   *slog.Logger

	next func() sample // the process's load since the last call
	set  func(int)     // runtime.GOMAXPROCS
}

// Start starts a controller for the process. max is the number of Ps
// under load; 0 means runtime.GOMAXPROCS(0) at the call (the CPUs the
// process may use). With max at 1, or GOMAXPROCS set in the environment,
// the controller changes nothing. log, if not nil, hears of each change
// at debug level.
func Start(max int, log *slog.Logger) *Controller {
	if max <= 0 {
		max = runtime.GOMAXPROCS(0)
	}
	c := newController(max, log, newReader().next, func(n int) { runtime.GOMAXPROCS(n) })
	if max == 1 || os.Getenv("GOMAXPROCS") != "" {
		close(c.done)
		return c
	}
	t := time.NewTicker(Interval)
	go c.run(t.C, t.Stop)
	return c
}

// newController returns a controller of max Ps over a process read by
// next and resized by set, not yet running.
func newController(max int, log *slog.Logger, next func() sample, set func(int)) *Controller {
	c := &Controller{max: max, log: log, next: next, set: set, stop: make(chan struct{}), done: make(chan struct{})}
	c.procs.Store(int32(runtime.GOMAXPROCS(0)))
	return c
}

// Procs is the number of Ps the process runs with now.
func (c *Controller) Procs() int { return int(c.procs.Load()) }

// Stop ends the controller and gives the process its maximum back.
func (c *Controller) Stop() {
	c.once.Do(func() { close(c.stop) })
	<-c.done
}

// run runs the controller on the ticks of tick; stopTick is called when
// it ends.
func (c *Controller) run(tick <-chan time.Time, stopTick func()) {
	defer close(c.done)
	defer stopTick()
	p := newPolicy(c.max)
	c.resize(p.procs)
	for {
		select {
		case <-c.stop:
			c.resize(c.max)
			return
		case <-tick:
			if n := p.step(c.next()); n != c.Procs() {
				c.resize(n)
			}
		}
	}
}

func (c *Controller) resize(n int) {
	c.set(n)
	c.procs.Store(int32(n))
	if c.log != nil {
		c.log.Debug("scheduler resized", "procs", n)
	}
}
