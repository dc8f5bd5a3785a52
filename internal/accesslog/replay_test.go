package accesslog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// replayLines are lines of a real mount's access log, with one line cut
// short and one comment added, over three seconds (testdata/cut.log,
// which internal/cli's tests read too).
var replayLines = logLines("testdata/cut.log")

// logLines reads the lines of a test log.
func logLines(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func TestReplay(t *testing.T) {
	log := strings.Join(replayLines, "\n")
	tests := []struct {
		name     string
		text     string
		filter   Filter
		interval time.Duration
		// ends are the interval ends each was called with, with the
		// requests counted at each.
		ends     []string
		requests int64
		filtered int64
	}{
		{"once", log + "\n", Filter{}, 0, nil, 6, 0},
		{"no final newline", log, Filter{}, 0, nil, 6, 0},
		{"seconds", log, Filter{}, time.Second,
			// Intervals start at the first request, 14:33:35.508247: the
			// first ends before the create, the second before the fsync.
			[]string{"14:33:36.508247 3", "14:33:37.508247 5"}, 6, 0},
		{"half seconds", log, Filter{}, 500 * time.Millisecond,
			// No call for the empty intervals between 14:33:36.008 and
			// 14:33:36.508, and after 14:33:37.008.
			[]string{"14:33:36.008247 3", "14:33:37.008247 5"}, 6, 0},
		{"a long interval", log, Filter{}, time.Hour, nil, 6, 0},
		{"filtered", log, Filter{Pids: []uint32{15897, 15976}}, time.Second,
			// The interval of the lookups by pid 15940 only took no
			// request.
			[]string{"14:33:36.508247 1", "14:33:37.508247 3"}, 3, 3},
		{"filtered out", log, Filter{Pids: []uint32{15940}}, time.Second,
			[]string{"14:33:36.508247 2"}, 2, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Profile{Filter: tt.filter}
			var ends []string
			err := p.Replay(strings.NewReader(tt.text), "a.log", tt.interval, func(end time.Time) {
				ends = append(ends, fmt.Sprintf("%s %d", end.Format("15:04:05.000000"), p.Total().Count))
			})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(ends) != fmt.Sprint(tt.ends) {
				t.Errorf("interval ends %q, want %q", ends, tt.ends)
			}
			if p.Total().Count != tt.requests || p.Filtered != tt.filtered || p.Lines != 8 || p.Comments != 1 ||
				p.Bad != 1 || p.Dropped != 12 {
				t.Errorf("requests %d, filtered %d, lines %d, comments %d, bad %d, dropped %d; want %d, %d, 8, 1, 1, 12",
					p.Total().Count, p.Filtered, p.Lines, p.Comments, p.Bad, p.Dropped, tt.requests, tt.filtered)
			}
		})
	}
}

// failingReader returns its text, then err.
type failingReader struct {
	text string
	err  error
}

func (r *failingReader) Read(b []byte) (int, error) {
	if r.text == "" {
		return 0, r.err
	}
	n := copy(b, r.text)
	r.text = r.text[n:]
	return n, nil
}

func TestReplayReadError(t *testing.T) {
	boom := errors.New("boom")
	p := &Profile{}
	err := p.Replay(&failingReader{replayLines[0] + "\n", boom}, "a.log", 0, nil)
	if !errors.Is(err, boom) || err.Error() != "read a.log: boom" {
		t.Errorf("Replay of a failing reader = %v", err)
	}
	p = &Profile{}
	if err := p.Replay(&failingReader{"", io.EOF}, "empty.log", time.Second, nil); err != nil || p.Lines != 0 {
		t.Errorf("Replay of an empty log = %v, %d lines", err, p.Lines)
	}
}
