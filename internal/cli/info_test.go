package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/control"
)

func TestModeString(t *testing.T) {
	tests := []struct {
		typ  string
		mode uint16
		want string
	}{
		{"file", 0o644, "-rw-r--r--"},
		{"directory", 0o755, "drwxr-xr-x"},
		{"directory", 0o1777, "drwxrwxrwt"},
		{"directory", 0o1770, "drwxrwx--T"},
		{"file", 0o4755, "-rwsr-xr-x"},
		{"file", 0o4644, "-rwSr--r--"},
		{"file", 0o2750, "-rwxr-s---"},
		{"file", 0o2640, "-rw-r-S---"},
		{"symlink", 0o777, "lrwxrwxrwx"},
		{"fifo", 0o600, "prw-------"},
		{"socket", 0o755, "srwxr-xr-x"},
		{"block device", 0o660, "brw-rw----"},
		{"character device", 0o666, "crw-rw-rw-"},
		{"unknown", 0, "----------"},
	}
	for _, tt := range tests {
		if got := modeString(tt.typ, tt.mode); got != tt.want {
			t.Errorf("modeString(%s, %04o) = %q, want %q", tt.typ, tt.mode, got, tt.want)
		}
	}
}

func TestPlural(t *testing.T) {
	tests := []struct {
		n    int
		word string
		want string
	}{{1, "file", "file"}, {0, "file", "files"}, {2, "entry", "entries"}, {1, "entry", "entry"}}
	for _, tt := range tests {
		if got := plural(tt.n, tt.word); got != tt.want {
			t.Errorf("plural(%d, %q) = %q, want %q", tt.n, tt.word, got, tt.want)
		}
	}
}

func TestPrintInfo(t *testing.T) {
	entries := int64(2)
	tests := []struct {
		name string
		r    control.InfoResult
		want []string
		not  []string
	}{
		{"file with raw slices", control.InfoResult{Ino: 5, Type: "file", Mode: 0o644, Nlink: 1, Length: 3 << 20,
			Chunks: []control.ChunkInfo{{Index: 1, Count: 2, Slices: []control.SliceInfo{
				{ID: 0, Pos: 0, Len: 10},
				{ID: 9, Size: 100, Off: 10, Len: 90, Pos: 10, Blocks: []control.BlockInfo{{Key: "vol/chunks/0/0/9_0_100", Len: 100}}},
			}}}},
			[]string{"  inode:   5\n", "  type:    file\n", "-rw-r--r-- (0644)", "3.0 MiB (3145728 bytes)", "  chunks:  1\n",
				"chunk 1 (bytes 67108864 to 134217728): 2 slices", "hole: pos 0, len 10",
				"slice 9: pos 10, size 100, off 10, len 90", "vol/chunks/0/0/9_0_100 (100 bytes)"},
			[]string{"entries:"}},
		{"directory with totals", control.InfoResult{Ino: 1, Type: "directory", Mode: 0o755, Length: 4096,
			Entries: &entries, Tree: &control.Totals{Files: 3, Dirs: 4, Length: 10}, Failed: 1},
			[]string{"drwxr-xr-x (0755)", "  entries: 2\n", "  files:   3\n", "  dirs:    4\n", "  size:    10 bytes\n",
				"  skipped: 1 directories you may not list\n"},
			[]string{"chunks:"}},
		{"symlink", control.InfoResult{Type: "symlink", Mode: 0o777, Target: "../x"},
			[]string{"lrwxrwxrwx", "  target:  ../x\n"}, []string{"chunks:", "entries:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.r.Mtime = time.Unix(1700000000, 5)
			var b bytes.Buffer
			printInfo(&b, "/mnt/x", &tt.r)
			out := b.String()
			if !strings.HasPrefix(out, "/mnt/x:\n") {
				t.Errorf("output does not start with the path:\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(out, w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestPrintFailures(t *testing.T) {
	var b bytes.Buffer
	printFailures(&b, "rmr", "/mnt/v", 3, []control.Failure{{Path: "a/b", Err: "permission denied"}})
	want := "rmr: /mnt/v/a/b: permission denied\nrmr: ... and 2 more\n"
	if b.String() != want {
		t.Errorf("printFailures wrote %q, want %q", b.String(), want)
	}
}

// TestToolFlags runs the tools with bad flags: each fails before it
// looks for a mount, naming the flag.
func TestToolFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"summary", "--depth", "-1", "x"}, "--depth -1"},
		{[]string{"summary", "--entries", "0", "x"}, "--entries 0"},
		{[]string{"summary", "--csv", "--json", "x"}, "--csv and --json"},
		{[]string{"summary", "a", "b"}, "expects one PATH"},
		{[]string{"warmup", "-p", "0", "x"}, "-p 0"},
		{[]string{"warmup", "-p", "1000", "x"}, "-p 1000"},
		{[]string{"warmup", "--check", "--evict", "x"}, "--check and --evict"},
		{[]string{"warmup", "--check", "--background", "x"}, "background"},
		{[]string{"warmup"}, "give PATHs or -f LISTFILE"},
		{[]string{"warmup", "-f", "/nonexistent/list"}, "-f"},
		{[]string{"info"}, "requires at least 1 arg"},
		{[]string{"rmr"}, "requires at least 1 arg"},
		{[]string{"rmr", "/"}, "refusing to remove /"},
		{[]string{"rmr", "/nonexistent/path"}, "no such file"},
	}
	for _, tt := range tests {
		root := NewRoot()
		root.SetArgs(tt.args)
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("sluice %s: %v, want an error with %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
}
