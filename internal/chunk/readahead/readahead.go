// Package readahead decides what to read ahead of an open file's readers.
//
// It is a pure state machine: a Policy is fed the reads of one open file
// and answers with the byte range worth fetching in the background. It
// does no I/O and knows no clock, so its table tests pin its behaviour.
//
// A Policy tracks several sessions per file, one per sequential stream (a
// file read by several threads at different offsets has one session
// each). A session remembers where its stream is (the end of its last
// read), how far ahead it has asked for data, and a window. A read that
// continues a session is a hit: the window doubles, up to Config.Max, and
// the range from what was already asked for up to the read's end plus the
// window is returned. A read that continues no session starts one with no
// readahead: a single read says nothing about the next. When all session
// slots are taken, the least recently used session is replaced.
//
// Reads of one stream reach a FUSE file system slightly out of order (the
// kernel keeps several requests in flight), so a read continues a session
// with a window when it starts anywhere from one window behind the
// session's end to one window past it. A session without a window yet (one
// read so far) is only continued by a read within Config.Gap of its end:
// random reads over a big file would otherwise often land near one of the
// sessions and each load whole blocks nobody reads.
package readahead

// Config bounds a Policy.
type Config struct {
	// Unit is the granularity of readahead, normally the volume's block
	// size; ranges returned end on a multiple of it (or at the file end).
	Unit int64
	// Min is the window of a session's first hit.
	Min int64
	// Max bounds the window: the readahead of one session.
	Max int64
	// Sessions is the number of concurrent sequential streams tracked.
	Sessions int
	// Gap is how far from a new session's end the next read may start
	// and still continue it (default 256 KiB: two kernel readahead
	// requests of a stream may arrive swapped).
	Gap int64
}

// withDefaults fills unset fields.
func (c Config) withDefaults() Config {
	if c.Unit <= 0 {
		c.Unit = 4 << 20
	}
	if c.Min <= 0 {
		c.Min = c.Unit
	}
	if c.Max < c.Min {
		c.Max = c.Min
	}
	if c.Sessions <= 0 {
		c.Sessions = 8
	}
	if c.Gap <= 0 {
		c.Gap = 256 << 10
	}
	return c
}

// session is one sequential stream.
type session struct {
	end    int64  // end of the stream's furthest read
	ahead  int64  // readahead asked for up to here
	window int64  // current readahead window; 0 until the first hit
	used   uint64 // tick of the last read, for replacement
}

// Policy is the readahead state of one open file. It is not safe for
// concurrent use; the caller serialises calls.
type Policy struct {
	conf     Config
	sessions []session
	tick     uint64
}

// New returns a Policy with no sessions.
func New(conf Config) *Policy {
	conf = conf.withDefaults()
	return &Policy{conf: conf, sessions: make([]session, 0, conf.Sessions)}
}

// Range is a byte range [Start, End) to fetch; it is empty when End <=
// Start.
type Range struct {
	Start, End int64
}

// Empty reports whether r holds no bytes.
func (r Range) Empty() bool { return r.End <= r.Start }

// Read records a read of n bytes at off in a file of length bytes and
// returns what to fetch ahead of it. limit bounds the returned range's
// length (the buffer budget left); limit <= 0 means no readahead now.
func (p *Policy) Read(off, n, length, limit int64) Range {
	p.tick++
	end := off + n
	s := p.find(off)
	if s == nil {
		p.start(end)
		return Range{}
	}
	s.used = p.tick
	if end > s.end {
		s.end = end
	}
	if s.window == 0 {
		s.window = p.conf.Min
	} else if s.window < p.conf.Max {
		s.window = min(2*s.window, p.conf.Max)
	}
	from := max(s.ahead, s.end)
	to := p.alignUp(s.end + s.window)
	to = min(to, length, from+max(limit, 0))
	if to <= from {
		return Range{}
	}
	s.ahead = to
	return Range{Start: from, End: to}
}

// Shortfall records that of a range Read returned, only the part before
// upto could be fetched (the bytes in flight were at their bound): the
// session that asked for it asks again from upto with its next read,
// instead of leaving a hole its reader finds uncached.
func (p *Policy) Shortfall(upto int64) {
	for i := range p.sessions {
		s := &p.sessions[i]
		if s.end <= upto && upto < s.ahead {
			s.ahead = upto
		}
	}
}

// find returns the session that a read at off continues, or nil.
func (p *Policy) find(off int64) *session {
	var best *session
	for i := range p.sessions {
		s := &p.sessions[i]
		slack := s.window
		if slack == 0 {
			slack = p.conf.Gap
		}
		if off < s.end-slack || off > s.end+slack {
			continue
		}
		if best == nil || abs(off-s.end) < abs(off-best.end) {
			best = s
		}
	}
	return best
}

// start begins a session for a stream now at end, replacing the least
// recently used one when all slots are taken.
func (p *Policy) start(end int64) {
	s := session{end: end, ahead: end, used: p.tick}
	if len(p.sessions) < p.conf.Sessions {
		p.sessions = append(p.sessions, s)
		return
	}
	lru := 0
	for i := range p.sessions {
		if p.sessions[i].used < p.sessions[lru].used {
			lru = i
		}
	}
	p.sessions[lru] = s
}

// Reset forgets every session, e.g. after the file was truncated or
// rewritten by another mount.
func (p *Policy) Reset() { p.sessions = p.sessions[:0] }

// alignUp rounds x up to a multiple of the unit.
func (p *Policy) alignUp(x int64) int64 {
	u := p.conf.Unit
	return (x + u - 1) / u * u
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
