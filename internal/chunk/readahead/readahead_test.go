package readahead

import "testing"

const (
	KiB = 1 << 10
	MiB = 1 << 20
)

// step is one read fed to a Policy and the range it must return.
type step struct {
	off, n int64
	want   Range
}

func TestPolicy(t *testing.T) {
	conf := Config{Unit: 4 * MiB, Min: 4 * MiB, Max: 32 * MiB, Sessions: 2}
	const length = 1 << 40
	tests := []struct {
		name   string
		conf   Config
		length int64
		limit  int64
		steps  []step
	}{{
		name: "first read of a file fetches nothing ahead",
		conf: conf, length: length, limit: 1 << 40,
		steps: []step{{0, 128 * KiB, Range{}}},
	}, {
		name: "sequential reads grow the window up to Max",
		conf: conf, length: length, limit: 1 << 40,
		steps: []step{
			{0, 1 * MiB, Range{}},
			{1 * MiB, 1 * MiB, Range{2 * MiB, 8 * MiB}},   // window 4M, end 2M+4M aligned up to 8M
			{2 * MiB, 1 * MiB, Range{8 * MiB, 12 * MiB}},  // window 8M: 3M+8M -> 12M
			{3 * MiB, 1 * MiB, Range{12 * MiB, 20 * MiB}}, // window 16M: 4M+16M -> 20M
			{4 * MiB, 1 * MiB, Range{20 * MiB, 40 * MiB}}, // window 32M: 5M+32M -> 40M
			{5 * MiB, 1 * MiB, Range{}},                   // 6M+32M -> 40M already asked
			{8 * MiB, 1 * MiB, Range{40 * MiB, 44 * MiB}}, // 9M+32M -> 44M
		},
	}, {
		name: "a random read does not disturb a sequential stream",
		conf: conf, length: length, limit: 1 << 40,
		steps: []step{
			{0, 1 * MiB, Range{}},
			{1 * MiB, 1 * MiB, Range{2 * MiB, 8 * MiB}},
			{500 * MiB, 4 * KiB, Range{}},
			{2 * MiB, 1 * MiB, Range{8 * MiB, 12 * MiB}},
		},
	}, {
		name: "two interleaved streams are two sessions",
		conf: conf, length: length, limit: 1 << 40,
		steps: []step{
			{0, 1 * MiB, Range{}},
			{100 * MiB, 1 * MiB, Range{}},
			{1 * MiB, 1 * MiB, Range{2 * MiB, 8 * MiB}},
			{101 * MiB, 1 * MiB, Range{102 * MiB, 108 * MiB}},
			{2 * MiB, 1 * MiB, Range{8 * MiB, 12 * MiB}},
			{102 * MiB, 1 * MiB, Range{108 * MiB, 112 * MiB}},
		},
	}, {
		name: "a third stream replaces the least recently used session",
		conf: conf, length: length, limit: 1 << 40,
		steps: []step{
			{0, 1 * MiB, Range{}},
			{100 * MiB, 1 * MiB, Range{}},
			{1 * MiB, 1 * MiB, Range{2 * MiB, 8 * MiB}},       // stream at 0 is now the most recent
			{200 * MiB, 1 * MiB, Range{}},                     // replaces the stream at 100M
			{101 * MiB, 1 * MiB, Range{}},                     // forgotten: starts over, replacing the stream at 0
			{201 * MiB, 1 * MiB, Range{202 * MiB, 208 * MiB}}, // still tracked
			{2 * MiB, 1 * MiB, Range{}},                       // forgotten
		},
	}, {
		name: "a read far from a new session's end starts another",
		conf: conf, length: length, limit: 1 << 40,
		steps: []step{
			{0, 4 * KiB, Range{}},
			{3 * MiB, 4 * KiB, Range{}}, // within Min but not Gap: random
			{3*MiB + 4*KiB, 4 * KiB, Range{3*MiB + 8*KiB, 8 * MiB}},
		},
	}, {
		name: "reads slightly out of order still hit",
		conf: conf, length: length, limit: 1 << 40,
		steps: []step{
			{0, 128 * KiB, Range{}},
			{256 * KiB, 128 * KiB, Range{384 * KiB, 8 * MiB}}, // a read overtook the one at 128K
			{128 * KiB, 128 * KiB, Range{8 * MiB, 12 * MiB}},  // the late one is a hit too; the stream's end stays 384K
		},
	}, {
		name: "readahead stops at the end of the file",
		conf: conf, length: 6 * MiB, limit: 1 << 40,
		steps: []step{
			{0, 1 * MiB, Range{}},
			{1 * MiB, 1 * MiB, Range{2 * MiB, 6 * MiB}},
			{2 * MiB, 1 * MiB, Range{}},
		},
	}, {
		name: "the budget bounds each range",
		conf: conf, length: length, limit: 3 * MiB,
		steps: []step{
			{0, 1 * MiB, Range{}},
			{1 * MiB, 1 * MiB, Range{2 * MiB, 5 * MiB}},
			{2 * MiB, 1 * MiB, Range{5 * MiB, 8 * MiB}},
		},
	}, {
		name: "no budget, no readahead",
		conf: conf, length: length, limit: 0,
		steps: []step{
			{0, 1 * MiB, Range{}},
			{1 * MiB, 1 * MiB, Range{}},
		},
	}, {
		name: "defaults: one block unit, window of one block",
		conf: Config{}, length: length, limit: 1 << 40,
		steps: []step{
			{0, 1 * MiB, Range{}},
			{1 * MiB, 1 * MiB, Range{2 * MiB, 8 * MiB}},
			{2 * MiB, 1 * MiB, Range{}}, // Max defaults to Min: 3M+4M -> 8M
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(tt.conf)
			for i, s := range tt.steps {
				got := p.Read(s.off, s.n, tt.length, tt.limit)
				if got.Empty() && s.want.Empty() {
					continue
				}
				if got != s.want {
					t.Fatalf("step %d: Read(%d, %d) = [%d, %d), want [%d, %d)", i, s.off, s.n,
						got.Start, got.End, s.want.Start, s.want.End)
				}
			}
		})
	}
}

func TestReset(t *testing.T) {
	p := New(Config{Unit: MiB, Max: 8 * MiB})
	p.Read(0, MiB, 1<<30, 1<<30)
	if r := p.Read(MiB, MiB, 1<<30, 1<<30); r.Empty() {
		t.Fatal("second sequential read fetched nothing ahead")
	}
	p.Reset()
	if r := p.Read(2*MiB, MiB, 1<<30, 1<<30); !r.Empty() {
		t.Fatalf("read after Reset fetched [%d, %d), want nothing", r.Start, r.End)
	}
}

// TestShortfall checks that a range only partly fetched is asked for
// again from where fetching stopped, by the stream that asked, and that
// other streams keep what they asked for.
func TestShortfall(t *testing.T) {
	p := New(Config{Unit: 4 * MiB, Min: 4 * MiB, Max: 32 * MiB, Sessions: 2})
	const length = 1 << 40
	steps := []step{
		{0, 1 * MiB, Range{}},
		{1 * MiB, 1 * MiB, Range{2 * MiB, 8 * MiB}},
		{100 * MiB, 1 * MiB, Range{}},
		{101 * MiB, 1 * MiB, Range{102 * MiB, 108 * MiB}},
		{2 * MiB, 1 * MiB, Range{8 * MiB, 12 * MiB}},
	}
	for i, s := range steps {
		if got := p.Read(s.off, s.n, length, 1<<40); got != s.want {
			t.Fatalf("step %d: read [%d, +%d) fetched %v, want %v", i, s.off, s.n, got, s.want)
		}
	}
	// Only [8M, 10M) of [8M, 12M) could start.
	p.Shortfall(10 * MiB)
	if got, want := p.Read(3*MiB, MiB, length, 1<<40), (Range{10 * MiB, 20 * MiB}); got != want {
		t.Fatalf("read after a shortfall fetched %v, want %v", got, want)
	}
	// The other stream asked for up to 108M, which it keeps.
	if got, want := p.Read(102*MiB, MiB, length, 1<<40), (Range{108 * MiB, 112 * MiB}); got != want {
		t.Fatalf("the other stream fetched %v, want %v", got, want)
	}
}
