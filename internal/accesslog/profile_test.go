package accesslog

import (
	"reflect"
	"testing"
	"time"
)

func profileOf(t *testing.T, f Filter, lines ...string) *Profile {
	t.Helper()
	p := &Profile{Filter: f}
	for _, l := range lines {
		p.AddLine(l)
	}
	return p
}

func TestProfileAddsUp(t *testing.T) {
	us := time.Microsecond
	lines := []string{
		`2026.11.26 14:33:35.508247 [uid:0,gid:0,pid:15940] lookup (1,"d"): ENOENT <0.000228>`,
		`2026.11.26 14:33:35.508793 [uid:0,gid:0,pid:15940] mkdir (1,"d",0755): OK (2) <0.000448>`,
		`2026.11.26 14:33:35.509350 [uid:0,gid:0,pid:15897] getattr (1): OK (size 4096) <0.000005>`,
		`2026.11.26 14:33:35.509546 [uid:0,gid:0,pid:15897] lookup (2,"f1"): ENOENT <0.000128>`,
		`#dropped 12 lines: the reader was too slow`,
		`2026.11.26 14:33:35.509908 [uid:0,gid:0,pid:15897] create (2,"f1",0644): OK (3,fh 3) <0.000302>`,
		`2026.11.26 14:33:35.510020 [uid:0,gid:0,pid:15897] flush (3,3): OK <0.000003>`,
		`2026.11.26 14:33:35.5101`, // cut short
		`2026.11.26 14:33:35.696330 [uid:65534,gid:65534,pid:15976] opendir (1): OK (fh 13) <0.000431>`,
		`2026.11.26 14:33:35.696678 [uid:65534,gid:65534,pid:15976] readdirplus (1,13,0): OK <0.000223>`,
		``,
		`2026.11.26 14:33:35.697056 [uid:0,gid:0,pid:0] releasedir (1,13): OK <0.000000>`,
	}
	type want struct {
		ops                                   []OpStats
		total                                 OpStats
		lines, comments, bad, filtered, dropd int64
		first, last                           string
	}
	tests := []struct {
		name   string
		filter Filter
		want   want
	}{
		{"everything", Filter{}, want{
			ops: []OpStats{
				{"mkdir", 1, 448 * us}, {"opendir", 1, 431 * us}, {"lookup", 2, 356 * us},
				{"create", 1, 302 * us}, {"readdirplus", 1, 223 * us}, {"getattr", 1, 5 * us},
				{"flush", 1, 3 * us}, {"releasedir", 1, 0},
			},
			total: OpStats{"total", 9, 1768 * us},
			lines: 12, comments: 2, bad: 1, dropd: 12,
			first: "2026.11.26 14:33:35.508247", last: "2026.11.26 14:33:35.697056",
		}},
		{"uid 65534", Filter{Uids: []uint32{65534}}, want{
			ops:   []OpStats{{"opendir", 1, 431 * us}, {"readdirplus", 1, 223 * us}},
			total: OpStats{"total", 2, 654 * us},
			lines: 12, comments: 2, bad: 1, filtered: 7, dropd: 12,
			first: "2026.11.26 14:33:35.696330", last: "2026.11.26 14:33:35.696678",
		}},
		{"pids", Filter{Pids: []uint32{15940, 0}}, want{
			ops:   []OpStats{{"mkdir", 1, 448 * us}, {"lookup", 1, 228 * us}, {"releasedir", 1, 0}},
			total: OpStats{"total", 3, 676 * us},
			lines: 12, comments: 2, bad: 1, filtered: 6, dropd: 12,
			first: "2026.11.26 14:33:35.508247", last: "2026.11.26 14:33:35.697056",
		}},
		{"uid and gid", Filter{Uids: []uint32{0}, Gids: []uint32{65534}}, want{
			total: OpStats{"total", 0, 0},
			lines: 12, comments: 2, bad: 1, filtered: 9, dropd: 12,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := profileOf(t, tt.filter, lines...)
			got := p.Ops()
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, tt.want.ops) {
				t.Errorf("Ops =\n%v, want\n%v", got, tt.want.ops)
			}
			if p.Total() != tt.want.total {
				t.Errorf("Total = %v, want %v", p.Total(), tt.want.total)
			}
			gotCounts := []int64{p.Lines, p.Comments, p.Bad, p.Filtered, p.Dropped, p.Skipped()}
			wantCounts := []int64{tt.want.lines, tt.want.comments, tt.want.bad, tt.want.filtered, tt.want.dropd, tt.want.comments + tt.want.bad}
			if !reflect.DeepEqual(gotCounts, wantCounts) {
				t.Errorf("lines, comments, bad, filtered, dropped, skipped = %v, want %v", gotCounts, wantCounts)
			}
			if tt.want.first != "" {
				if f := p.First.Format(TimeLayout); f != tt.want.first {
					t.Errorf("First = %s, want %s", f, tt.want.first)
				}
				if l := p.Last.Format(TimeLayout); l != tt.want.last {
					t.Errorf("Last = %s, want %s", l, tt.want.last)
				}
			} else if !p.First.IsZero() || !p.Last.IsZero() {
				t.Errorf("First, Last = %v, %v with no request", p.First, p.Last)
			}
		})
	}
}

// TestProfileCapturedLogs adds up whole captured logs; the expected
// figures were counted with awk over the same files.
func TestProfileCapturedLogs(t *testing.T) {
	us := time.Microsecond
	tests := []struct {
		file           string
		ops            map[string]OpStats
		lines, skipped int64
		total          time.Duration
		first          string
	}{
		{"mount.log", map[string]OpStats{
			"create": {"create", 4, 842 * us}, "flockw": {"flockw", 1, 227 * us}, "flush": {"flush", 12, 8256 * us},
			"fsync": {"fsync", 1, 46013 * us}, "getattr": {"getattr", 18, 464 * us}, "getxattr": {"getxattr", 13, 1338 * us},
			"link": {"link", 1, 319 * us}, "lookup": {"lookup", 11, 3659 * us}, "mkdir": {"mkdir", 2, 643 * us},
			"open": {"open", 3, 792 * us}, "opendir": {"opendir", 4, 752 * us}, "read": {"read", 1, 282 * us},
			"readdirplus": {"readdirplus", 6, 754 * us}, "readlink": {"readlink", 1, 262 * us}, "release": {"release", 7, 548 * us},
			"releasedir": {"releasedir", 4, 1 * us}, "rename": {"rename", 1, 1158 * us}, "rmdir": {"rmdir", 1, 182 * us},
			"setattr": {"setattr", 2, 538 * us}, "setxattr": {"setxattr", 1, 548 * us}, "statfs": {"statfs", 1, 89 * us},
			"symlink": {"symlink", 1, 773 * us}, "unlink": {"unlink", 6, 1863 * us}, "write": {"write", 6, 3742 * us},
		}, 108, 0, 74045 * us, "fsync"},
		{"special.log", map[string]OpStats{
			"copy_file_range": {"copy_file_range", 1, 154 * us}, "create": {"create", 4, 565 * us}, "fallocate": {"fallocate", 1, 78 * us},
			"flush": {"flush", 7, 815 * us}, "fsync": {"fsync", 1, 61109 * us}, "fsyncdir": {"fsyncdir", 1, 0},
			"getattr": {"getattr", 6, 315 * us}, "getxattr": {"getxattr", 3, 7 * us}, "listxattr": {"listxattr", 1, 68 * us},
			"lookup": {"lookup", 6, 711 * us}, "mknod": {"mknod", 1, 172 * us}, "open": {"open", 1, 80 * us},
			"opendir": {"opendir", 1, 101 * us}, "release": {"release", 5, 13 * us}, "releasedir": {"releasedir", 1, 1 * us},
			"removexattr": {"removexattr", 1, 71 * us}, "setattr": {"setattr", 1, 4 * us}, "setlkw": {"setlkw", 1, 307 * us},
			"write": {"write", 1, 9 * us},
		}, 44, 0, 64580 * us, "fsync"},
		{"dropped.log", map[string]OpStats{
			"create": {"create", 1, 296 * us}, "flush": {"flush", 1, 3 * us}, "getattr": {"getattr", 3, 502 * us},
			"lookup": {"lookup", 2, 288 * us}, "opendir": {"opendir", 2, 104 * us}, "readdirplus": {"readdirplus", 4, 407 * us},
			"release": {"release", 1, 3 * us}, "releasedir": {"releasedir", 2, 2 * us},
		}, 17, 1, 1605 * us, "getattr"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			p := profileOf(t, Filter{}, readLines(t, tt.file)...)
			got := map[string]OpStats{}
			for _, s := range p.Ops() {
				got[s.Op] = s
			}
			if !reflect.DeepEqual(got, tt.ops) {
				t.Errorf("Ops =\n%v, want\n%v", got, tt.ops)
			}
			if p.Lines != tt.lines || p.Skipped() != tt.skipped || p.Total().Total != tt.total {
				t.Errorf("lines %d, skipped %d, total %v; want %d, %d, %v", p.Lines, p.Skipped(), p.Total().Total, tt.lines, tt.skipped, tt.total)
			}
			if first := p.Ops()[0].Op; first != tt.first {
				t.Errorf("the longest operation is %s, want %s", first, tt.first)
			}
			var sum float64
			for _, s := range p.Ops() {
				sum += p.Share(s)
			}
			if sum < 99.999 || sum > 100.001 {
				t.Errorf("shares add up to %v%%", sum)
			}
		})
	}
}

func TestProfileOrder(t *testing.T) {
	// Same total: more requests first; same both: by name.
	p := profileOf(t, Filter{},
		`2026.11.26 14:33:35.000001 [uid:0,gid:0,pid:1] b (1): OK <0.000010>`,
		`2026.11.26 14:33:35.000002 [uid:0,gid:0,pid:1] a (1): OK <0.000010>`,
		`2026.11.26 14:33:35.000003 [uid:0,gid:0,pid:1] c (1): OK <0.000005>`,
		`2026.11.26 14:33:35.000004 [uid:0,gid:0,pid:1] c (1): OK <0.000005>`,
		`2026.11.26 14:33:35.000005 [uid:0,gid:0,pid:1] d (1): OK <0.000020>`,
	)
	var order []string
	for _, s := range p.Ops() {
		order = append(order, s.Op)
	}
	if want := []string{"d", "c", "a", "b"}; !reflect.DeepEqual(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	if got := (OpStats{Count: 4, Total: 10 * time.Microsecond}).Average(); got != 2500*time.Nanosecond {
		t.Errorf("Average = %v", got)
	}
	if got := (OpStats{}).Average(); got != 0 {
		t.Errorf("Average of nothing = %v", got)
	}
	if got := p.Share(OpStats{Total: 20 * time.Microsecond}); got != 40 {
		t.Errorf("Share = %v, want 40", got)
	}
}

func TestParseIDs(t *testing.T) {
	tests := []struct {
		in   string
		want []uint32
		ok   bool
	}{
		{"", nil, true},
		{"0", []uint32{0}, true},
		{"0,1000, 65534", []uint32{0, 1000, 65534}, true},
		{"x", nil, false},
		{"1,", nil, false},
		{"-1", nil, false},
		{"4294967296", nil, false},
	}
	for _, tt := range tests {
		got, err := ParseIDs(tt.in)
		if (err == nil) != tt.ok || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseIDs(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
	f := Filter{Uids: []uint32{0, 1000}, Pids: []uint32{42}}
	if got, want := f.String(), "uid 0,1000 pid 42"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}
