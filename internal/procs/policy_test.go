package procs

import (
	"testing"
	"time"
)

// phase is a stretch of steady load fed to a policy in ticks of Interval.
type phase struct {
	d     time.Duration
	cores float64
	want  int // Ps at the end of the phase
}

func TestPolicy(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		phases []phase
	}{
		{"idle stays on one P", 2, []phase{{10 * time.Second, 0.05, 1}}},
		{"a request at a time stays on one P", 2, []phase{{10 * time.Second, 0.75, 1}}},
		{"a whole CPU goes to max", 2, []phase{{time.Second, 0.3, 1}, {upFor, 1.2, 2}}},
		{"not before the window is full", 2, []phase{{upFor - Interval, 3, 1}, {Interval, 3, 2}}},
		{"max is every P given", 8, []phase{{time.Second, 1.5, 8}}},
		{"a busy spell stays at max", 2, []phase{{time.Second, 1.5, 2}, {10 * time.Second, 0.9, 2}}},
		{"back to one P after a quiet hold", 2, []phase{
			{time.Second, 1.5, 2},
			{400 * time.Millisecond, 0.2, 2}, // the last second averages 0.98 cores
			{600 * time.Millisecond, 0.2, 1},
		}},
		{"one busy tick in the hold keeps max", 2, []phase{
			{time.Second, 1.5, 2},
			{minHold / 2, 0.2, 2},
			{Interval, 16, 2}, // 0.8 s of CPU in one tick: the hold's average is over downCPU
			{minHold / 2, 0.2, 2},
		}},
		{"flapping doubles the hold", 2, []phase{
			{time.Second, 1.5, 2},
			{minHold, 0.5, 1},    // down after the first hold
			{upFor, 1.2, 2},      // up again within flapWithin: hold 2 s
			{minHold, 0.5, 2},    // one hold is not enough now
			{minHold, 0.5, 1},    // two are
			{flapWithin, 0.1, 1}, // a quiet spell on one P
			{upFor, 1.2, 2},      // up again, hold back to 1 s...
			{minHold, 0.5, 1},    // ...so one hold brings it down
		}},
		{"the hold doubles up to maxHold", 2, flaps(8)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPolicy(tt.max)
			var at time.Duration
			for i, ph := range tt.phases {
				var got int
				for end := at + ph.d; at < end; at += Interval {
					got = p.step(sample{dt: Interval, cpu: time.Duration(ph.cores * float64(Interval))})
				}
				if got != ph.want {
					t.Fatalf("phase %d (%v at %.2f cores, ends at %v): %d Ps, want %d", i, ph.d, ph.cores, at, got, ph.want)
				}
			}
			if p.hold > maxHold {
				t.Fatalf("hold %v over maxHold %v", p.hold, maxHold)
			}
		})
	}
}

// flaps is n rounds of a load that goes up and then down as soon as the
// hold lets it, each time up again right after the step down: the hold
// doubles each round, to maxHold.
func flaps(n int) []phase {
	var ps []phase
	hold := minHold
	for i := 0; i < n; i++ {
		ps = append(ps, phase{upFor, 1.2, 2}, phase{hold - Interval, 0.5, 2}, phase{Interval, 0.5, 1})
		if i > 0 {
			hold = min(2*hold, maxHold)
			ps[len(ps)-2].d, ps[len(ps)-1].d = hold-Interval, Interval
		}
	}
	return ps
}

func TestPolicyIgnoresEmptySamples(t *testing.T) {
	p := newPolicy(2)
	for i := 0; i < 100; i++ {
		if got := p.step(sample{dt: 0, cpu: time.Second}); got != 1 {
			t.Fatalf("sample %d of no time: %d Ps, want 1", i, got)
		}
	}
}
