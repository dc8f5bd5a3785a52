package accesslog

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Filter selects requests by their caller. An empty list selects every
// value; a request must match all three lists. A request whose line
// names no caller matches only a filter with no lists.
type Filter struct {
	Uids, Gids, Pids []uint32
}

// Empty reports whether f selects every request.
func (f Filter) Empty() bool {
	return len(f.Uids) == 0 && len(f.Gids) == 0 && len(f.Pids) == 0
}

// Match reports whether f selects e.
func (f Filter) Match(e *Entry) bool {
	if f.Empty() {
		return true
	}
	if !e.HasCaller {
		return false
	}
	in := func(list []uint32, v uint32) bool { return len(list) == 0 || slices.Contains(list, v) }
	return in(f.Uids, e.Uid) && in(f.Gids, e.Gid) && in(f.Pids, e.Pid)
}

// String describes f, as "uid 0,1000 pid 42"; "" for an empty filter.
func (f Filter) String() string {
	var parts []string
	for _, l := range []struct {
		name string
		ids  []uint32
	}{{"uid", f.Uids}, {"gid", f.Gids}, {"pid", f.Pids}} {
		if len(l.ids) == 0 {
			continue
		}
		s := make([]string, len(l.ids))
		for i, id := range l.ids {
			s[i] = strconv.FormatUint(uint64(id), 10)
		}
		parts = append(parts, l.name+" "+strings.Join(s, ","))
	}
	return strings.Join(parts, " ")
}

// ParseIDs parses a comma-separated list of ids, as "0,1000"; "" is the
// empty list.
func ParseIDs(s string) ([]uint32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var ids []uint32
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("bad id %q in %q: %w", f, s, errors.Unwrap(err))
		}
		ids = append(ids, uint32(n))
	}
	return ids, nil
}

// OpStats is the requests of one operation.
type OpStats struct {
	Op    string
	Count int64
	Total time.Duration // the sum of their latencies
}

// Average returns the average latency; 0 without requests.
func (s OpStats) Average() time.Duration {
	if s.Count == 0 {
		return 0
	}
	return s.Total / time.Duration(s.Count)
}

// Profile adds up the requests of an access log per operation, and
// counts the lines that are not requests. The zero Profile is empty and
// ready; it is not safe for concurrent use.
type Profile struct {
	// Filter selects the requests added up; the others are counted in
	// Filtered.
	Filter Filter

	ops map[string]*OpStats
	all OpStats

	// Lines is every line added; Comments the comment and empty lines
	// of them, Bad those that did not parse, Filtered the requests the
	// filter left out.
	Lines, Comments, Bad, Filtered int64
	// Dropped is the lines the mount reported it dropped because the
	// reader was too slow.
	Dropped int64
	// First and Last are the times of the first and last requests
	// added.
	First, Last time.Time
}

// AddLine parses line and adds it: a request with Add, anything else
// with Skip. It returns the entry and whether it was a request.
func (p *Profile) AddLine(line string) (Entry, bool) {
	e, err := Parse(line)
	if err != nil {
		p.Skip(line, err)
		return e, false
	}
	p.Add(&e)
	return e, true
}

// Skip counts a line that is not a request: err is what Parse returned
// for it. A note of dropped lines adds to Dropped.
func (p *Profile) Skip(line string, err error) {
	p.Lines++
	if !errors.Is(err, ErrComment) {
		p.Bad++
		return
	}
	p.Comments++
	if n, ok := Dropped(line); ok {
		p.Dropped += n
	}
}

// Add adds the line of one request, when the filter selects it.
func (p *Profile) Add(e *Entry) {
	p.Lines++
	if !p.Filter.Match(e) {
		p.Filtered++
		return
	}
	if p.ops == nil {
		p.ops = map[string]*OpStats{}
	}
	s := p.ops[e.Op]
	if s == nil {
		s = &OpStats{Op: e.Op}
		p.ops[e.Op] = s
	}
	s.Count++
	s.Total += e.Latency
	p.all.Count++
	p.all.Total += e.Latency
	if p.First.IsZero() || e.Time.Before(p.First) {
		p.First = e.Time
	}
	if e.Time.After(p.Last) {
		p.Last = e.Time
	}
}

// Skipped returns the lines that were not requests: comments and lines
// that did not parse.
func (p *Profile) Skipped() int64 { return p.Comments + p.Bad }

// Total returns the figures of all the requests added.
func (p *Profile) Total() OpStats {
	t := p.all
	t.Op = "total"
	return t
}

// Ops returns the figures of each operation, the longest total time
// first (then the most requests, then by name).
func (p *Profile) Ops() []OpStats {
	out := make([]OpStats, 0, len(p.ops))
	for _, s := range p.ops {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b OpStats) int {
		if c := cmp.Compare(b.Total, a.Total); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return strings.Compare(a.Op, b.Op)
	})
	return out
}

// Share returns the part of the total time s takes, in percent; 0 when
// no time was spent at all.
func (p *Profile) Share(s OpStats) float64 {
	if p.all.Total == 0 {
		return 0
	}
	return 100 * float64(s.Total) / float64(p.all.Total)
}
