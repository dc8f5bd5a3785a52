package accesslog

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// replayLines are lines of a real mount's access log (see testdata),
// with one line cut short and one comment added, over three seconds.
var replayLines = []string{
	`2026.11.26 14:33:35.508247 [uid:0,gid:0,pid:15940] lookup (1,"d"): ENOENT <0.000228>`,
	`2026.11.26 14:33:35.508793 [uid:0,gid:0,pid:15940] mkdir (1,"d",0755): OK (2) <0.000448>`,
	`2026.11.26 14:33:35.509546 [uid:0,gid:0,pid:15897] lookup (2,"f1"): ENOENT <0.000128>`,
	`#dropped 12 lines: the reader was too slow`,
	`2026.11.26 14:33:36.509908 [uid:0,gid:0,pid:15897] create (2,"f1",0644): OK (3,fh 3) <0.000302>`,
	`2026.11.26 14:33:36.5`,
	`2026.11.26 14:33:36.696330 [uid:65534,gid:65534,pid:15976] opendir (1): OK (fh 13) <0.000431>`,
	`2026.11.26 14:33:38.646476 [uid:0,gid:0,pid:15954] fsync (7,9): OK <0.046013>`,
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
