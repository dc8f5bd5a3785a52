package procs

import (
	"syscall"
	"time"
)

// sample is what the process did between two readings.
type sample struct {
	dt  time.Duration // wall time
	cpu time.Duration // the process's CPU time in it, user and system, every thread
}

// reader reads the process's CPU time and returns what it did since the
// reading before.
type reader struct {
	at  time.Time
	cpu time.Duration
}

func newReader() *reader {
	r := &reader{}
	r.read()
	return r
}

// next reads the process and returns the sample since the last reading.
func (r *reader) next() sample {
	at, cpu := r.at, r.cpu
	r.read()
	return sample{dt: r.at.Sub(at), cpu: r.cpu - cpu}
}

func (r *reader) read() {
	r.at = time.Now()
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
}
