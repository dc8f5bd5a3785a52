package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/all"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/testserver"
)

// testVolume is a volume formatted by `sluice format` on SQLite and a
// file bucket in a temporary directory.
type testVolume struct {
	dir, metaURL, bucket string
}

// formatTestVolume formats a volume named "vol" with a day of trash and
// the keys given, which the file storage ignores but stores.
func formatTestVolume(t *testing.T) *testVolume {
	t.Helper()
	dir := t.TempDir()
	v := &testVolume{dir: dir, metaURL: "sqlite3://" + filepath.Join(dir, "meta.db"), bucket: filepath.Join(dir, "bucket")}
	o := formatOptions{storage: "file", bucket: v.bucket, blockSize: 4 << 20, compress: "none", trashDays: 1, trashSet: true,
		keys: credentials{accessKey: "AK", secretKey: "s3cret"}}
	if err := runFormat(context.Background(), io.Discard, v.metaURL, "vol", &o); err != nil {
		t.Fatal(err)
	}
	return v
}

// format reads the volume's settings.
func (v *testVolume) format(t *testing.T) *meta.Format {
	t.Helper()
	ctx := context.Background()
	st, err := all.Open(ctx, v.metaURL, false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f, err := meta.Load(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// setUsage sets the volume's usage counters, as mounts flush them.
func (v *testVolume) setUsage(t *testing.T, space, inodes int64) {
	t.Helper()
	ctx := context.Background()
	st, err := all.Open(ctx, v.metaURL, false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = st.Update(ctx, func(tx store.Tx) error {
		tx.SetCounter(meta.CounterUsedSpace, space)
		tx.SetCounter(meta.CounterUsedInodes, inodes)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// runSluice runs the command line args with stdin (not a terminal) and
// returns what it printed and its error.
func runSluice(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := NewRoot()
	var out, errb bytes.Buffer
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errb)
	err = root.ExecuteContext(context.Background())
	return out.String(), errb.String(), err
}

func TestConfigShow(t *testing.T) {
	v := formatTestVolume(t)
	out, _, err := runSluice(t, "", "config", v.metaURL)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"Name": "vol"`, `"UUID": "` + v.format(t).UUID + `"`, `"AccessKey": "AK"`, `"SecretKey": "removed"`, `"TrashDays": 1`} {
		if !strings.Contains(out, want) {
			t.Errorf("config output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("config shows the secret key:\n%s", out)
	}
}

// TestConfigChanges runs config with each kind of flag on a fresh volume
// and checks what is stored, what is printed and what is refused.
func TestConfigChanges(t *testing.T) {
	otherBucket := filepath.Join(t.TempDir(), "moved")
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		space   int64 // bytes in use before the change
		want    func(f *meta.Format)
		out     string // in stdout when it succeeds
		err     string // in the error when refused; the settings must not change
		remount bool   // the output says mounts must be mounted again
	}{
		{name: "capacity and inodes", args: []string{"--capacity", "2", "--inodes", "100"},
			want: func(f *meta.Format) { f.Capacity, f.Inodes = 2<<30, 100 }, out: "Capacity: unlimited → 2G"},
		{name: "capacity with a unit", args: []string{"--capacity", "512M"},
			want: func(f *meta.Format) { f.Capacity = 512 << 20 }, out: "Capacity: unlimited → 512M"},
		{name: "more trash days", args: []string{"--trash-days", "7"},
			want: func(f *meta.Format) { f.TrashDays = 7 }, out: "TrashDays: 1 → 7"},
		{name: "bandwidth", args: []string{"--upload-limit", "10", "--download-limit", "20"},
			want: func(f *meta.Format) { f.UploadLimit, f.DownloadLimit = 10, 20 }, out: "UploadLimit: unlimited → 10 Mbps"},
		{name: "secret key", args: []string{"--secret-key", "other"},
			want: func(f *meta.Format) { f.SecretKey = "other" }, out: "SecretKey: removed → removed (a new one)", remount: true},
		{name: "capacity above the usage", args: []string{"--capacity", "100M"}, space: 10 << 20,
			want: func(f *meta.Format) { f.Capacity = 100 << 20 }},
		{name: "capacity below the usage in a script", args: []string{"--capacity", "1M"}, space: 10 << 20,
			err: "capacity 1M is below the 10M in use"},
		{name: "capacity below the usage with --yes", args: []string{"--capacity", "1M", "--yes"}, space: 10 << 20,
			want: func(f *meta.Format) { f.Capacity = 1 << 20 }},
		{name: "trash off in a script", args: []string{"--trash-days", "0"}, err: "pass --yes"},
		{name: "trash off with --yes", args: []string{"--trash-days", "0", "--yes"},
			want: func(f *meta.Format) { f.TrashDays = 0 }, out: "TrashDays: 1 → 0 (no trash)"},
		{name: "new bucket in a script", args: []string{"--bucket", otherBucket}, err: "pass --yes"},
		{name: "new bucket with --yes", args: []string{"--bucket", otherBucket, "--yes"},
			want: func(f *meta.Format) { f.Bucket = otherBucket }, remount: true},
		{name: "unusable bucket", args: []string{"--bucket", filepath.Join(notDir, "sub"), "--yes"}, err: "is not usable"},
		{name: "nothing to change", args: []string{"--trash-days", "1"}, out: "nothing changed"},
		{name: "negative trash days", args: []string{"--trash-days", "-1"}, err: "--trash-days -1"},
		{name: "negative upload limit", args: []string{"--upload-limit", "-5"}, err: "--upload-limit -5"},
		{name: "name", args: []string{"--name", "other"}, err: `has name vol; refusing to change it to other`},
		{name: "UUID", args: []string{"--uuid", "other"}, err: "refusing to change"},
		{name: "block size", args: []string{"--block-size", "1M"}, err: "has block size 4096K; refusing to change it to 1024K"},
		{name: "compression", args: []string{"--compress", "zstd"}, err: "has compression none; refusing"},
		{name: "hash prefix", args: []string{"--hash-prefix"}, err: "has hash prefix false; refusing"},
		{name: "shards", args: []string{"--shards", "4"}, err: "has shards 0; refusing"},
		{name: "encryption", args: []string{"--encrypt-algo", "chacha20-rsa"}, err: "has encryption none; refusing"},
		{name: "immutable with --yes", args: []string{"--block-size", "1M", "--capacity", "1", "--yes"}, err: "refusing to change"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := formatTestVolume(t)
			if tt.space > 0 {
				v.setUsage(t, tt.space, 1)
			}
			before := v.format(t)
			out, _, err := runSluice(t, "", append([]string{"config", v.metaURL}, tt.args...)...)
			after := v.format(t)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("config %v: %v, want an error with %q; output:\n%s", tt.args, err, tt.err, out)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error is not one line: %q", err)
				}
				if *after != *before {
					t.Fatalf("a refused config changed the settings:\n%+v\nto\n%+v", before, after)
				}
				return
			}
			if err != nil {
				t.Fatalf("config %v: %v", tt.args, err)
			}
			want := *before
			if tt.want != nil {
				tt.want(&want)
			}
			if *after != want {
				t.Errorf("stored settings:\n%+v\nwant\n%+v", after, &want)
			}
			if !strings.Contains(out, tt.out) {
				t.Errorf("output lacks %q:\n%s", tt.out, out)
			}
			if got := strings.Contains(out, "mounted again"); got != tt.remount {
				t.Errorf("output says mounts need a remount: %v, want %v:\n%s", got, tt.remount, out)
			}
		})
	}
}

// TestConfigForeignBucket checks that config refuses a bucket holding
// another volume of the same name.
func TestConfigForeignBucket(t *testing.T) {
	v, other := formatTestVolume(t), formatTestVolume(t)
	_, _, err := runSluice(t, "", "config", v.metaURL, "--bucket", other.bucket, "--yes")
	if err == nil || !strings.Contains(err.Error(), "holds the objects of another volume (UUID "+other.format(t).UUID) {
		t.Fatalf("config onto another volume's bucket: %v", err)
	}
	if got := v.format(t).Bucket; got != v.bucket {
		t.Fatalf("bucket after refusal: %s", got)
	}
}

// TestConfigBucketWithObjects checks that moving to a bucket that holds
// the volume's objects (copied there) is not reported as holding none.
func TestConfigBucketWithObjects(t *testing.T) {
	v := formatTestVolume(t)
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.CopyFS(moved, os.DirFS(v.bucket)); err != nil {
		t.Fatal(err)
	}
	p := prompt{in: strings.NewReader("y\n"), out: new(bytes.Buffer), terminal: true}
	o := configOptions{bucket: moved, metaTimeout: meta.DefaultOpTimeout}
	var out bytes.Buffer
	if err := runConfig(context.Background(), &out, p, v.metaURL, &o, func(f string) bool { return f == "bucket" }); err != nil {
		t.Fatal(err)
	}
	asked := p.out.(*bytes.Buffer).String()
	if !strings.Contains(asked, "move the volume to file bucket "+moved) || strings.Contains(asked, "holds none of its objects") {
		t.Errorf("question about a bucket with the volume's objects:\n%s", asked)
	}
	if got := v.format(t).Bucket; got != moved {
		t.Errorf("bucket %s, want %s", got, moved)
	}
}

// TestPromptConfirm checks the confirmation of risky changes: --yes
// confirms, a script cannot, and on a terminal only a yes does.
func TestPromptConfirm(t *testing.T) {
	tests := []struct {
		name     string
		terminal bool
		yes      bool
		answer   string
		err      string // "" when confirmed
	}{
		{"--yes in a script", false, true, "", ""},
		{"--yes on a terminal", true, true, "n\n", ""},
		{"script", false, false, "y\n", "pass --yes"},
		{"y", true, false, "y\n", ""},
		{"YES", true, false, " YES \n", ""},
		{"yes without newline", true, false, "yes", ""},
		{"n", true, false, "n\n", "not confirmed"},
		{"empty line", true, false, "\n", "not confirmed"},
		{"other", true, false, "sure\n", "not confirmed"},
		{"end of input", true, false, "", "no answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			p := prompt{in: strings.NewReader(tt.answer), out: &out, terminal: tt.terminal, yes: tt.yes}
			err := p.confirm("risky thing", "Do it?")
			if tt.err == "" {
				if err != nil {
					t.Fatalf("confirm: %v, want nil", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "risky thing") {
				t.Fatalf("confirm: %v, want an error naming the risk with %q", err, tt.err)
			}
			asked := strings.Contains(out.String(), "Do it? [y/N]")
			if want := tt.terminal && !tt.yes; asked != want {
				t.Errorf("asked %v, want %v; output %q", asked, want, out.String())
			}
		})
	}
}

// TestIsTerminal checks the terminal test on what is not one.
func TestIsTerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "in")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for name, r := range map[string]io.Reader{"file": f, "reader": strings.NewReader("y"), "/dev/null": null} {
		if isTerminal(r) {
			t.Errorf("%s taken for a terminal", name)
		}
	}
	// The master side of a new pseudo-terminal answers as a terminal.
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		testserver.Missing(t, fmt.Sprintf("no pseudo-terminal to check the positive case: %v", err), "Linux provides /dev/ptmx")
	}
	defer pty.Close()
	if !isTerminal(pty) {
		t.Errorf("a pseudo-terminal is not taken for a terminal")
	}
}
