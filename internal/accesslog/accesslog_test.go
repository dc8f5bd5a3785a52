package accesslog

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The lines below, and the files in testdata, were captured from
// .accesslog of real mounts (`cat MOUNT/.accesslog > FILE` while a shell
// worked in the mount): they are what internal/fuse writes, not what
// this package expects.

func at(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.ParseInLocation("2006.01.02 15:04:05.000000", s, time.Local)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func TestParse(t *testing.T) {
	us := time.Microsecond
	tests := []struct {
		name string
		line string
		want Entry
	}{
		{"create with reply", `2026.11.26 14:33:35.509908 [uid:0,gid:0,pid:15897] create (2,"f1",0644): OK (3,fh 3) <0.000302>`,
			Entry{Time: at(t, "2026.11.26 14:33:35.509908"), HasCaller: true, Pid: 15897, Op: "create",
				Args: `2,"f1",0644`, Result: "OK", Reply: "3,fh 3", Latency: 302 * us}},
		{"lookup ENOENT", `2026.11.26 14:33:35.508247 [uid:0,gid:0,pid:15940] lookup (1,"d"): ENOENT <0.000228>`,
			Entry{Time: at(t, "2026.11.26 14:33:35.508247"), HasCaller: true, Pid: 15940, Op: "lookup",
				Args: `1,"d"`, Result: "ENOENT", Latency: 228 * us}},
		{"no reply", `2026.11.26 14:33:35.510020 [uid:0,gid:0,pid:15897] flush (3,3): OK <0.000003>`,
			Entry{Time: at(t, "2026.11.26 14:33:35.510020"), HasCaller: true, Pid: 15897, Op: "flush",
				Args: "3,3", Result: "OK", Latency: 3 * us}},
		{"other user", `2026.11.26 14:33:35.696330 [uid:65534,gid:65534,pid:15976] opendir (1): OK (fh 13) <0.000431>`,
			Entry{Time: at(t, "2026.11.26 14:33:35.696330"), HasCaller: true, Uid: 65534, Gid: 65534, Pid: 15976,
				Op: "opendir", Args: "1", Result: "OK", Reply: "fh 13", Latency: 431 * us}},
		{"zero latency", `2026.11.26 14:33:35.525589 [uid:0,gid:0,pid:0] releasedir (2,6): OK <0.000000>`,
			Entry{Time: at(t, "2026.11.26 14:33:35.525589"), HasCaller: true, Op: "releasedir",
				Args: "2,6", Result: "OK"}},
		{"long latency", `2026.11.26 14:33:35.646476 [uid:0,gid:0,pid:15954] fsync (7,9): OK <0.046013>`,
			Entry{Time: at(t, "2026.11.26 14:33:35.646476"), HasCaller: true, Pid: 15954, Op: "fsync",
				Args: "7,9", Result: "OK", Latency: 46013 * us}},
		{"readlink quoted reply", `2026.11.26 14:33:35.554065 [uid:0,gid:0,pid:15946] readlink (6): OK ("f1") <0.000262>`,
			Entry{Time: at(t, "2026.11.26 14:33:35.554065"), HasCaller: true, Pid: 15946, Op: "readlink",
				Args: "6", Result: "OK", Reply: `"f1"`, Latency: 262 * us}},
		{"rename", `2026.11.26 14:33:35.546135 [uid:0,gid:0,pid:15944] rename (2,"f2",2,"g2"): OK <0.001158>`,
			Entry{Time: at(t, "2026.11.26 14:33:35.546135"), HasCaller: true, Pid: 15944, Op: "rename",
				Args: `2,"f2",2,"g2"`, Result: "OK", Latency: 1158 * us}},
		{"setattr", `2026.11.26 14:33:35.567042 [uid:0,gid:0,pid:15949] setattr (5,valid=0x248,size=100): OK <0.000361>`,
			Entry{Time: at(t, "2026.11.26 14:33:35.567042"), HasCaller: true, Pid: 15949, Op: "setattr",
				Args: "5,valid=0x248,size=100", Result: "OK", Latency: 361 * us}},
		{"getxattr ERANGE", `2026.11.26 14:33:35.574875 [uid:0,gid:0,pid:15951] getxattr (5,"user.x"): ERANGE <0.000322>`,
			Entry{Time: at(t, "2026.11.26 14:33:35.574875"), HasCaller: true, Pid: 15951, Op: "getxattr",
				Args: `5,"user.x"`, Result: "ERANGE", Latency: 322 * us}},
		{"flock", `2026.11.26 14:33:35.648953 [uid:0,gid:0,pid:15955] flockw (3,10,5014188640093549084,type=1,0,9223372036854775807): OK <0.000227>`,
			Entry{Time: at(t, "2026.11.26 14:33:35.648953"), HasCaller: true, Pid: 15955, Op: "flockw",
				Args: "3,10,5014188640093549084,type=1,0,9223372036854775807", Result: "OK", Latency: 227 * us}},
		{"name that looks like the end of a line", `2026.11.26 14:35:19.122555 [uid:0,gid:0,pid:19598] create (1,"a\"): OK (1) <9.9>",0644): OK (10,fh 19) <0.000173>`,
			Entry{Time: at(t, "2026.11.26 14:35:19.122555"), HasCaller: true, Pid: 19598, Op: "create",
				Args: `1,"a\"): OK (1) <9.9>",0644`, Result: "OK", Reply: "10,fh 19", Latency: 173 * us}},
		{"name with a newline", `2026.11.26 14:35:19.123389 [uid:0,gid:0,pid:19592] lookup (1,"new\nline"): ENOENT <0.000084>`,
			Entry{Time: at(t, "2026.11.26 14:35:19.123389"), HasCaller: true, Pid: 19592, Op: "lookup",
				Args: `1,"new\nline"`, Result: "ENOENT", Latency: 84 * us}},
		{"copy_file_range", `2026.11.26 14:35:19.282126 [uid:0,gid:0,pid:19601] copy_file_range (13,0,14,0,100): OK (100) <0.000154>`,
			Entry{Time: at(t, "2026.11.26 14:35:19.282126"), HasCaller: true, Pid: 19601, Op: "copy_file_range",
				Args: "13,0,14,0,100", Result: "OK", Reply: "100", Latency: 154 * us}},
		{"with its newline", "2026.11.26 14:35:19.126595 [uid:0,gid:0,pid:19599] mknod (1,\"fifo\",010644): OK (12) <0.000172>\n",
			Entry{Time: at(t, "2026.11.26 14:35:19.126595"), HasCaller: true, Pid: 19599, Op: "mknod",
				Args: `1,"fifo",010644`, Result: "OK", Reply: "12", Latency: 172 * us}},
		// internal/fuse leaves the caller out of a request without a
		// header.
		{"no caller", `2026.11.26 14:33:35.525589 releasedir (2,6): OK <0.000001>`,
			Entry{Time: at(t, "2026.11.26 14:33:35.525589"), Op: "releasedir", Args: "2,6", Result: "OK", Latency: us}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.line)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !got.Time.Equal(tt.want.Time) {
				t.Errorf("Time = %v, want %v", got.Time, tt.want.Time)
			}
			got.Time, tt.want.Time = time.Time{}, time.Time{}
			if got != tt.want {
				t.Errorf("Parse =\n%+v, want\n%+v", got, tt.want)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	const good = `2026.11.26 14:33:35.509908 [uid:0,gid:0,pid:15897] create (2,"f1",0644): OK (3,fh 3) <0.000302>`
	tests := []struct {
		name    string
		line    string
		comment bool
	}{
		{"empty", "", true},
		{"newline only", "\n", true},
		{"dropped note", "#dropped 77660 lines: the reader was too slow", true},
		{"comment", "# anything", true},
		{"cut in the middle", good[:60], false},
		{"no latency", strings.TrimSuffix(good, " <0.000302>"), false},
		{"bad latency", strings.Replace(good, "<0.000302>", "<fast>", 1), false},
		{"negative latency", strings.Replace(good, "<0.000302>", "<-1>", 1), false},
		{"bad time", strings.Replace(good, "14:33:35", "14:73:35", 1), false},
		{"no time", good[27:], false},
		{"bad uid", strings.Replace(good, "uid:0", "uid:x", 1), false},
		{"caller cut", strings.Replace(good, "] create", " create", 1), false},
		{"no operation", strings.Replace(good, "create (", "(", 1), false},
		{"no result", strings.Replace(good, ": OK (3,fh 3)", ": ", 1), false},
		{"arguments not closed", strings.Replace(good, "0644): OK", "0644 OK", 1), false},
		{"quote not closed", strings.Replace(good, `"f1"`, `"f1`, 1), false},
		{"reply not closed", strings.Replace(good, "(3,fh 3)", "(3,fh 3", 1), false},
		{"garbage", "hello world", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.line)
			if err == nil {
				t.Fatalf("Parse(%q) succeeded", tt.line)
			}
			if got := errors.Is(err, ErrComment); got != tt.comment {
				t.Errorf("Parse(%q) = %v; comment %v, want %v", tt.line, err, got, tt.comment)
			}
			var se *SyntaxError
			if !tt.comment && !errors.As(err, &se) {
				t.Errorf("Parse(%q) = %T %v, want a *SyntaxError", tt.line, err, err)
			}
		})
	}
	if _, err := Parse(good); err != nil {
		t.Fatalf("the line the cases start from does not parse: %v", err)
	}
}

func TestDropped(t *testing.T) {
	tests := []struct {
		line string
		n    int64
		ok   bool
	}{
		{"#dropped 77660 lines: the reader was too slow", 77660, true},
		{"#dropped 1 lines: the reader was too slow", 1, true},
		{"#dropped many lines", 0, false},
		{"# dropped 3 lines", 0, false},
		{"2026.11.26 14:33:35.525589 releasedir (2,6): OK <0.000001>", 0, false},
	}
	for _, tt := range tests {
		n, ok := Dropped(tt.line)
		if n != tt.n || ok != tt.ok {
			t.Errorf("Dropped(%q) = %d, %v; want %d, %v", tt.line, n, ok, tt.n, tt.ok)
		}
	}
}

// readLines returns the lines of a file in testdata.
func readLines(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestParseCapturedLogs: every line captured from a mount parses, except
// the comments, and the operation and latency it yields are those the
// plain text shows in its fourth and last fields (how `awk` would read
// them: no name in these files holds a space before the operation).
func TestParseCapturedLogs(t *testing.T) {
	for _, name := range []string{"mount.log", "special.log", "dropped.log"} {
		t.Run(name, func(t *testing.T) {
			lines := readLines(t, name)
			if len(lines) == 0 {
				t.Fatal("empty file")
			}
			for i, line := range lines {
				e, err := Parse(line)
				if strings.HasPrefix(line, "#") {
					if !errors.Is(err, ErrComment) {
						t.Errorf("line %d: Parse(%q) = %v, want ErrComment", i+1, line, err)
					}
					continue
				}
				if err != nil {
					t.Errorf("line %d: %v", i+1, err)
					continue
				}
				fields := strings.Fields(line)
				if e.Op != fields[3] {
					t.Errorf("line %d: Op = %q, want %q", i+1, e.Op, fields[3])
				}
				last := fields[len(fields)-1]
				lat, err := time.ParseDuration(strings.Trim(last, "<>") + "s")
				if err != nil {
					t.Fatalf("line %d: %v", i+1, err)
				}
				if e.Latency != lat {
					t.Errorf("line %d: Latency = %v, want %v", i+1, e.Latency, lat)
				}
				if !strings.HasPrefix(line, e.Time.Format(TimeLayout)+" ") {
					t.Errorf("line %d: Time = %v, not the line's", i+1, e.Time)
				}
			}
		})
	}
}
