package meta

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// TestMetaVersion checks that a client refuses, at open and at format, a
// volume whose metadata layout is newer than the one it understands, and
// opens older and current ones.
func TestMetaVersion(t *testing.T) {
	cases := []struct {
		name    string
		version int
		ok      bool
	}{
		{"before versioning", 0, true},
		{"current", MetaVersion, true},
		{"newer", MetaVersion + 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := kvstore.New(mem.New(t.Name()))
			f := &Format{Name: "vol", UUID: "u", BlockSize: 4096, MetaVersion: tc.version}
			b, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Update(ctx, func(tx store.Tx) error { tx.SetSetting(b); return nil }); err != nil {
				t.Fatal(err)
			}
			got, err := Load(ctx, st)
			if tc.ok {
				if err != nil || got.MetaVersion != tc.version {
					t.Fatalf("Load: %+v, %v", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "newer than this client supports") {
				t.Fatalf("Load of a newer volume: %v", err)
			}
			if _, err := FormatVolume(ctx, st, &Format{Name: "vol", BlockSize: 4096}); err == nil ||
				!strings.Contains(err.Error(), "newer than this client supports") {
				t.Fatalf("FormatVolume over a newer volume: %v", err)
			}
		})
	}
}

// TestUpdateFormat checks what UpdateFormat may change (what `sluice
// config` changes) and what it refuses.
func TestUpdateFormat(t *testing.T) {
	ctx := context.Background()
	base := Format{Name: "vol", UUID: "u", Storage: "file", Bucket: "/a", BlockSize: 4096, TrashDays: 1}
	tests := []struct {
		name   string
		change func(f *Format)
		err    string // substring of the error; "" when allowed
	}{
		{"capacity and inodes", func(f *Format) { f.Capacity, f.Inodes = 1<<30, 100 }, ""},
		{"trash off", func(f *Format) { f.TrashDays = 0 }, ""},
		{"bandwidth", func(f *Format) { f.UploadLimit, f.DownloadLimit = 10, 20 }, ""},
		{"bucket and keys", func(f *Format) { f.Storage, f.Bucket, f.AccessKey, f.SecretKey = "s3", "http://h/b", "ak", "sk" }, ""},
		{"name", func(f *Format) { f.Name = "other" }, "refusing to change"},
		{"UUID", func(f *Format) { f.UUID = "v" }, "refusing to change"},
		{"block size", func(f *Format) { f.BlockSize = 1024 }, "block size 4096K; refusing to change it to 1024K"},
		{"compression", func(f *Format) { f.Compression = "lz4" }, "compression none"},
		{"hash prefix", func(f *Format) { f.HashPrefix = true }, "hash prefix"},
		{"shards", func(f *Format) { f.Shards = 4 }, "shards"},
		{"encryption", func(f *Format) { f.EncryptAlgo, f.EncryptKey = "aes256gcm-rsa", "PEM" }, "encryption"},
		{"negative trash days", func(f *Format) { f.TrashDays = -1 }, "invalid trash days"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := kvstore.New(mem.New(t.Name()))
			old := base
			if _, err := FormatVolume(ctx, st, &old); err != nil {
				t.Fatal(err)
			}
			f := old
			tt.change(&f)
			err := UpdateFormat(ctx, st, &old, &f)
			got, lerr := Load(ctx, st)
			if lerr != nil {
				t.Fatal(lerr)
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("UpdateFormat: %v, want an error with %q", err, tt.err)
				}
				if *got != old {
					t.Fatalf("a refused update changed the settings: %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("UpdateFormat: %v", err)
			}
			if *got != f {
				t.Fatalf("stored %+v, want %+v", got, f)
			}
			// Updating from settings that are no longer stored is refused.
			again := f
			again.Capacity++
			if err := UpdateFormat(ctx, st, &old, &again); !errors.Is(err, ErrFormatChanged) {
				t.Fatalf("update from stale settings: %v, want ErrFormatChanged", err)
			}
		})
	}
}

// TestFormatKeepsBucket checks that a re-format still refuses a new
// bucket, which only UpdateFormat changes.
func TestFormatKeepsBucket(t *testing.T) {
	ctx := context.Background()
	st := kvstore.New(mem.New(t.Name()))
	f := &Format{Name: "vol", UUID: "u", Storage: "file", Bucket: "/a", BlockSize: 4096}
	if _, err := FormatVolume(ctx, st, f); err != nil {
		t.Fatal(err)
	}
	g := *f
	g.Bucket = "/b"
	if _, err := FormatVolume(ctx, st, &g); err == nil || !strings.Contains(err.Error(), "sluice config --bucket") {
		t.Fatalf("re-format with another bucket: %v", err)
	}
}

// TestReloadFormat checks that a client applies changed settings on its
// heartbeat: statfs and the quota checks see the new capacity and inode
// limit, the trash days change, and OnFormatChange hears of it; settings
// of another volume are refused.
func TestReloadFormat(t *testing.T) {
	ctx := context.Background()
	st := kvstore.New(mem.New(t.Name()))
	old := &Format{Name: "vol", UUID: "u", Storage: "mem", Bucket: "b", BlockSize: 4096, TrashDays: 1}
	if _, err := FormatVolume(ctx, st, old); err != nil {
		t.Fatal(err)
	}
	changes := make(chan *Format, 4)
	c, err := NewSession(ctx, st, Config{Heartbeat: time.Millisecond, OnFormatChange: func(f *Format) { changes <- f }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if s, err := c.StatFS(ctx); err != nil || s.TotalSpace != unlimited {
		t.Fatalf("statfs before: %+v, %v", s, err)
	}
	f := *old
	f.Capacity, f.Inodes, f.TrashDays, f.UploadLimit = 1<<30, 1, 0, 8
	if err := UpdateFormat(ctx, st, old, &f); err != nil {
		t.Fatal(err)
	}
	// The background heartbeat (every second at most) reloads them.
	select {
	case got := <-changes:
		if *got != f {
			t.Fatalf("OnFormatChange got %+v, want %+v", got, f)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no heartbeat reloaded the changed settings within 10s")
	}
	if s, err := c.StatFS(ctx); err != nil || s.TotalSpace != 1<<30 || s.AvailInodes != 1 {
		t.Fatalf("statfs after: %+v, %v; want 1 GiB and 1 inode (the root counts none)", s, err)
	}
	if c.trashEnabled() {
		t.Fatalf("trash still enabled after TrashDays 0")
	}
	if _, err := c.Mknod(ctx, RootIno, []byte("a"), NewNode{Type: 1, Mode: 0o644}); err != nil {
		t.Fatalf("first file under the limit of 1: %v", err)
	}
	if err := c.flushUsage(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mknod(ctx, RootIno, []byte("b"), NewNode{Type: 1, Mode: 0o644}); Errno(err) != syscall.ENOSPC {
		t.Fatalf("file past the new inode limit: %v, want ENOSPC", err)
	}
	// No change: no call.
	if err := c.ReloadFormat(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-changes:
		t.Fatalf("OnFormatChange called without a change: %+v", got)
	default:
	}
	// Another volume formatted in the engine is not taken for this one.
	other := &Format{Name: "vol", UUID: "v", Storage: "mem", Bucket: "b", BlockSize: 4096}
	b, _ := json.Marshal(other)
	if err := st.Update(ctx, func(tx store.Tx) error { tx.SetSetting(b); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := c.ReloadFormat(ctx); err == nil || !strings.Contains(err.Error(), "UUID v") {
		t.Fatalf("reload of another volume's settings: %v", err)
	}
	if got := c.Format(); got.UUID != "u" || got.Capacity != 1<<30 {
		t.Fatalf("settings after refusing another volume's: %+v", got)
	}
}

// TestReloadFormatReadOnly checks that a read-only client, which has no
// session, still follows the settings every heartbeat.
func TestReloadFormatReadOnly(t *testing.T) {
	ctx := context.Background()
	st := kvstore.New(mem.New(t.Name()))
	old := &Format{Name: "vol", UUID: "u", Storage: "mem", Bucket: "b", BlockSize: 4096}
	if _, err := FormatVolume(ctx, st, old); err != nil {
		t.Fatal(err)
	}
	changes := make(chan *Format, 1)
	c, err := NewSession(ctx, st, Config{ReadOnly: true, Heartbeat: 10 * time.Millisecond, OnFormatChange: func(f *Format) { changes <- f }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	f := *old
	f.Capacity = 1 << 30
	if err := UpdateFormat(ctx, st, old, &f); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changes:
	case <-time.After(10 * time.Second):
		t.Fatal("the read-only client did not reload the settings within 10s")
	}
	if s, err := c.StatFS(ctx); err != nil || s.TotalSpace != 1<<30 {
		t.Fatalf("statfs of the read-only client: %+v, %v", s, err)
	}
}
