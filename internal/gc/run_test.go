package gc_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/gc"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/volume"
	"github.com/sluicefs/sluice/internal/volume/volumetest"
)

// putRaw stores an object in the volume's bucket directory, as a stray
// file would be, with the given modification time.
func putRaw(t *testing.T, tv *volumetest.Volume, key string, size int, mtime time.Time) {
	t.Helper()
	p := filepath.Join(tv.Bucket, "vol", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, bytes.Repeat([]byte{1}, size), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func open(t *testing.T, metaURL string, level volume.Level) *volume.Volume {
	t.Helper()
	v, err := volume.Open(context.Background(), metaURL, volume.Options{Level: level})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close(context.Background()) })
	return v
}

func TestRun(t *testing.T) {
	ctx := context.Background()
	tv := volumetest.New(t, nil)
	volumetest.WriteFile(t, tv.MetaURL, "f", bytes.Repeat([]byte("x"), 3<<16+100)) // 4 blocks
	now := time.Now()
	const (
		stray   = "chunks/0/999/999999_0_1024"
		young   = "chunks/0/999/999998_0_10"
		foreign = "chunks/readme.txt"
	)
	putRaw(t, tv, stray, 1024, now.Add(-2*time.Hour))
	putRaw(t, tv, young, 10, now.Add(-time.Minute))
	putRaw(t, tv, foreign, 5, now.Add(-2*time.Hour))

	var leaks []string
	r, err := gc.Run(ctx, open(t, tv.MetaURL, volume.Data), gc.Options{MinAge: time.Hour, Now: func() time.Time { return now },
		OnLeak: func(info object.Info) { leaks = append(leaks, info.Key) }})
	if err != nil {
		t.Fatal(err)
	}
	want := gc.Report{MinAge: time.Hour,
		All:        gc.Count{Objects: 7, Bytes: 3<<16 + 100 + 1024 + 10 + 5},
		Referenced: gc.Count{Objects: 4, Bytes: 3<<16 + 100},
		Leaked:     gc.Count{Objects: 1, Bytes: 1024},
		Young:      gc.Count{Objects: 1, Bytes: 10},
		Foreign:    gc.Count{Objects: 1, Bytes: 5},
		Space:      meta.SpaceReport{Files: 1, Chunks: 1, SliceEntries: 1, Slices: 1, Referenced: 3<<16 + 100, Visible: 3<<16 + 100},
	}
	if *r != want {
		t.Errorf("report = %+v\nwant %+v", *r, want)
	}
	if !slices.Equal(leaks, []string{stray}) {
		t.Errorf("OnLeak told %q, want %q", leaks, stray)
	}

	// Deleting needs a client.
	if _, err := gc.Run(ctx, open(t, tv.MetaURL, volume.Data), gc.Options{Delete: true}); err == nil || !strings.Contains(err.Error(), "client") {
		t.Errorf("Run with Delete on a volume without client: %v, want an error", err)
	}
	var progress []gc.Phase
	r, err = gc.Run(ctx, open(t, tv.MetaURL, volume.Client), gc.Options{MinAge: 0, Delete: true, Threads: 2,
		Progress: func(p gc.Progress) {
			if len(progress) == 0 || progress[len(progress)-1] != p.Phase {
				progress = append(progress, p.Phase)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Leaked.Objects != 2 || r.Deleted != r.Leaked || !r.Flushed {
		t.Errorf("report with Delete and no MinAge = %+v; want both strays leaked and deleted, queues flushed", *r)
	}
	if !slices.Equal(progress, []gc.Phase{gc.ScanMetadata, gc.ListObjects, gc.DeleteLeaks}) {
		t.Errorf("progress phases = %v", progress)
	}
	r, err = gc.Run(ctx, open(t, tv.MetaURL, volume.Data), gc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Leaked.Objects != 0 || r.Referenced.Objects != 4 || r.Foreign.Objects != 1 {
		t.Errorf("report after deleting = %+v; want the file's 4 blocks and the foreign key only", *r)
	}
}
