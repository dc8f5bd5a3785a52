package procs

import "time"

// policy decides the number of Ps from samples of the process's load. It
// is the controller's arithmetic, with no clock of its own: tests feed it
// samples.
//
// On one P it counts the process's CPU over the last upFor: at upCPU
// cores or more the work needs more than the one P can run (threads in
// system calls and cgo run beside it, so a process held to one P can
// still show more than one core), and the policy goes to max. On max Ps
// it counts the CPU over the last hold: under downCPU the work fits one
// P, even counting the CPU that idle Ps' wake-ups themselves cost, and
// the policy goes back to one. A load near the thresholds would flap
// between the two; every return to max within flapWithin of a step down
// doubles hold (up to maxHold), and a quiet spell of flapWithin on one P
// sets it back to minHold.
type policy struct {
	max   int
	procs int

	hold    time.Duration // how long the load must stay low on max Ps
	window  []sample      // the samples since the last change, newest last, at most max(upFor, hold) of them
	downAgo time.Duration // time since the last step down (-1: none yet)
}

// Thresholds of the policy (see policy).
const (
	upCPU      = 0.95
	downCPU    = 0.8
	upFor      = 200 * time.Millisecond
	minHold    = time.Second
	maxHold    = 32 * time.Second
	flapWithin = 10 * time.Second
)

func newPolicy(max int) *policy {
	return &policy{max: max, procs: 1, hold: minHold, downAgo: -1}
}

// step takes the next sample and returns the number of Ps to run with.
// The window holds only samples since the last change, so a window that
// spans a duration also says the policy has been in its state that long.
func (p *policy) step(s sample) int {
	if s.dt <= 0 {
		return p.procs
	}
	p.window = append(p.window, s)
	if p.downAgo >= 0 {
		p.downAgo += s.dt
	}
	p.trim(max(upFor, p.hold))
	if p.procs == 1 {
		if p.downAgo >= flapWithin {
			p.hold = minHold
		}
		if cpu, full := p.cpuOver(upFor); full && cpu >= upCPU {
			if p.downAgo >= 0 && p.downAgo < flapWithin {
				p.hold = min(2*p.hold, maxHold)
			}
			p.set(p.max)
		}
	} else if cpu, full := p.cpuOver(p.hold); full && cpu < downCPU {
		p.set(1)
		p.downAgo = 0
	}
	return p.procs
}

func (p *policy) set(n int) {
	p.procs = n
	p.window = p.window[:0]
}

// cpuOver is the CPU in cores over the newest samples that span d, and
// whether the samples span d at all.
func (p *policy) cpuOver(d time.Duration) (cores float64, full bool) {
	var dt, cpu time.Duration
	for i := len(p.window) - 1; i >= 0 && dt < d; i-- {
		dt += p.window[i].dt
		cpu += p.window[i].cpu
	}
	if dt < d {
		return 0, false
	}
	return float64(cpu) / float64(dt), true
}

// trim drops the samples older than the newest that span d.
func (p *policy) trim(d time.Duration) {
	var dt time.Duration
	i := len(p.window) - 1
	for ; i > 0 && dt < d; i-- {
		dt += p.window[i].dt
	}
	if dt >= d {
		n := copy(p.window, p.window[i+1:])
		p.window = p.window[:n]
	}
}
