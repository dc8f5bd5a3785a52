package cli

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/all"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/volume"
	"github.com/sluicefs/sluice/internal/volume/volumetest"
)

// volumeFiles lists the regular files under the volume's prefix in its
// file bucket.
func (v *testVolume) volumeFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(filepath.Join(v.bucket, "vol"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == filepath.Join(v.bucket, "vol") {
				return fs.SkipDir // the prefix is gone altogether
			}
			return err
		}
		if !d.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// addSession registers a session with the given heartbeat, as a mount
// (live or dead) leaves one.
func (v *testVolume) addSession(t *testing.T, sid uint64, beat time.Time) {
	t.Helper()
	ctx := context.Background()
	st, err := all.Open(ctx, v.metaURL, false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = st.Update(ctx, func(tx store.Tx) error {
		tx.SetSession(store.Session{Sid: sid, Heartbeat: beat.Unix(), Info: []byte(`{"Host":"h","MountPoint":"/mnt/x"}`)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDestroyRefusals checks that destroy refuses the wrong UUID, live
// mounts (unless --force) and a script without --yes, and leaves the
// volume whole.
func TestDestroyRefusals(t *testing.T) {
	tests := []struct {
		name     string
		args     func(uuid string) []string
		liveBeat time.Duration // age of a session's heartbeat; 0: no session
		err      string
	}{
		{"wrong UUID", func(string) []string { return []string{"0000-1111", "--yes"} }, 0, "refusing to destroy it"},
		{"live mount", func(u string) []string { return []string{u, "--yes"} }, time.Second, "1 live mounts (session 42 on h at /mnt/x"},
		{"mount silent under the timeout", func(u string) []string { return []string{u, "--yes"} }, 4 * time.Minute, "live mounts"},
		{"script without --yes", func(u string) []string { return []string{u} }, 0, "pass --yes"},
		{"forced in a script without --yes", func(u string) []string { return []string{u, "--force"} }, time.Second, "pass --yes"},
		{"bad threads", func(u string) []string { return []string{u, "--yes", "--threads", "0"} }, 0, "--threads 0"},
		{"missing UUID", func(string) []string { return nil }, 0, "expects META-URL and UUID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := formatTestVolume(t)
			volumetest.WriteFile(t, v.metaURL, "f", []byte("some data"))
			if tt.liveBeat > 0 {
				v.addSession(t, 42, time.Now().Add(-tt.liveBeat))
			}
			files := v.volumeFiles(t)
			f := v.format(t)
			_, _, err := runSluice(t, "y\n", append([]string{"destroy", v.metaURL}, tt.args(f.UUID)...)...)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("destroy: %v, want an error with %q", err, tt.err)
			}
			if got := v.format(t); *got != *f {
				t.Errorf("settings changed by a refused destroy: %+v", got)
			}
			if got := v.volumeFiles(t); len(got) != len(files) || len(files) < 2 {
				t.Errorf("objects %d before, %d after a refused destroy", len(files), len(got))
			}
		})
	}
}

// TestDestroy destroys a volume with data, a dead mount's session and a
// live one (with --force), and checks that its objects and records are
// gone and status fails, while another volume in the same bucket stays.
func TestDestroy(t *testing.T) {
	tests := []struct {
		name string
		args []string
		beat time.Duration // age of a session's heartbeat; 0: no session
	}{
		{"no mounts", []string{"--yes"}, 0},
		{"a dead mount's session", []string{"--yes"}, 10 * time.Minute},
		{"a live mount, forced", []string{"--yes", "--force"}, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			v := formatTestVolume(t)
			volumetest.WriteFile(t, v.metaURL, "f", []byte("some data"))
			volumetest.WriteFile(t, v.metaURL, "g", make([]byte, 5<<20))
			if tt.beat > 0 {
				v.addSession(t, 42, time.Now().Add(-tt.beat))
			}
			// A neighbour: another volume in the same bucket.
			other := &testVolume{metaURL: "sqlite3://" + filepath.Join(t.TempDir(), "other.db"), bucket: v.bucket}
			fo := formatOptions{storage: "file", bucket: v.bucket, blockSize: 4 << 20, compress: "none"}
			if err := runFormat(ctx, new(strings.Builder), other.metaURL, "other", &fo); err != nil {
				t.Fatal(err)
			}
			if n := len(v.volumeFiles(t)); n < 3 {
				t.Fatalf("only %d objects before destroy", n)
			}
			uuid := v.format(t).UUID
			out, _, err := runSluice(t, "", append([]string{"destroy", v.metaURL, uuid}, tt.args...)...)
			if err != nil {
				t.Fatalf("destroy: %v", err)
			}
			if !strings.Contains(out, `Volume "vol" (UUID `+uuid+`) destroyed`) {
				t.Errorf("destroy output: %s", out)
			}
			if files := v.volumeFiles(t); len(files) != 0 {
				t.Errorf("objects left under vol/: %v", files)
			}
			_, _, err = runSluice(t, "", "status", v.metaURL)
			if err == nil || !strings.Contains(err.Error(), "not formatted") {
				t.Errorf("status after destroy: %v, want not formatted", err)
			}
			vol, err := volume.Open(ctx, other.metaURL, volume.Options{Level: volume.Data})
			if err != nil {
				t.Fatalf("the other volume: %v", err)
			}
			defer vol.Close(ctx)
			if _, err := vol.SealedObjects().Head(ctx, "juicefs_uuid"); err != nil {
				t.Errorf("the other volume's marker: %v", err)
			}
			// The engine may hold a new volume.
			if _, _, err := runSluice(t, "", "format", v.metaURL, "vol", "--bucket", v.bucket); err != nil {
				t.Errorf("format after destroy: %v", err)
			}
		})
	}
}

// TestSessionLiveRule checks destroy's rule against the one that cleans
// stale sessions, at the default timeout.
func TestSessionLiveRule(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	for _, tt := range []struct {
		age  time.Duration
		live bool
	}{{0, true}, {time.Minute, true}, {meta.DefaultSessionTimeout, true}, {meta.DefaultSessionTimeout + time.Second, false}, {time.Hour, false}} {
		if got := meta.SessionLive(now.Add(-tt.age), now, meta.DefaultSessionTimeout); got != tt.live {
			t.Errorf("heartbeat %v ago: live %v, want %v", tt.age, got, tt.live)
		}
	}
}

// TestDestroyAsks checks the question on a terminal: it names the volume,
// its UUID and its objects, and only a yes destroys it.
func TestDestroyAsks(t *testing.T) {
	ctx := context.Background()
	v := formatTestVolume(t)
	volumetest.WriteFile(t, v.metaURL, "f", []byte("some data"))
	uuid := v.format(t).UUID
	n := len(v.volumeFiles(t))
	o := destroyOptions{threads: 2, metaTimeout: meta.DefaultOpTimeout}
	for _, answer := range []string{"n\n", "y\n"} {
		var asked, out strings.Builder
		p := prompt{in: strings.NewReader(answer), out: &asked, terminal: true}
		err := runDestroy(ctx, &out, p, v.metaURL, uuid, &o)
		for _, want := range []string{`destroy volume "vol" (UUID ` + uuid + `)`, fmt.Sprintf("delete its %d objects", n), "Destroy the volume?"} {
			if !strings.Contains(asked.String(), want) {
				t.Errorf("question lacks %q:\n%s", want, asked.String())
			}
		}
		if answer == "n\n" {
			if err == nil || !strings.Contains(err.Error(), "not confirmed") {
				t.Fatalf("destroy answered no: %v", err)
			}
			if len(v.volumeFiles(t)) != n {
				t.Fatalf("objects deleted after a no")
			}
			continue
		}
		if err != nil {
			t.Fatalf("destroy answered yes: %v", err)
		}
		if files := v.volumeFiles(t); len(files) != 0 {
			t.Errorf("objects left: %v", files)
		}
	}
}
