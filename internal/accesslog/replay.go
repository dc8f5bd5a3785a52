package accesslog

import (
	"bufio"
	"fmt"
	"io"
	"time"
)

// Replay adds up into p the access log read from r, a copy saved earlier;
// name names r in errors.
//
// With interval > 0 it also cuts the log's own time into intervals, from
// the time of its first request on: when a request ends at or after the
// end of an interval in which p took requests (the filter selected
// some), it calls each with that end before adding the request, so that
// p then holds the totals up to end. Intervals without such requests are
// passed over. The totals of the last interval are those of the whole
// log, which p holds once Replay returns.
//
// Replay reads as fast as r gives lines, not in the log's time, and
// takes no context: r is a file, whose reads end.
func (p *Profile) Replay(r io.Reader, name string, interval time.Duration, each func(end time.Time)) error {
	br := bufio.NewReaderSize(r, 256<<10)
	var end time.Time // of the current interval
	changed := false  // requests added since the last call of each
	for {
		line, rerr := br.ReadString('\n')
		if rerr != nil && rerr != io.EOF {
			return fmt.Errorf("read %s: %w", name, rerr)
		}
		if line == "" && rerr == io.EOF {
			return nil
		}
		e, err := Parse(line)
		if err != nil {
			p.Skip(line, err)
			continue
		}
		if interval > 0 {
			if end.IsZero() {
				end = e.Time.Add(interval)
			}
			if !e.Time.Before(end) {
				if changed {
					each(end)
					changed = false
				}
				end = end.Add((e.Time.Sub(end)/interval + 1) * interval)
			}
		}
		before := p.Filtered
		p.Add(&e)
		changed = changed || p.Filtered == before
	}
}
