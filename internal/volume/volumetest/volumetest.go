// Package volumetest formats throwaway volumes for tests of the packages
// that open one (volume, gc, fsck): SQLite metadata and a bucket on local
// disk, both in the test's temporary directory.
package volumetest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/all"
	"github.com/sluicefs/sluice/internal/volume"
)

// Volume is a formatted volume.
type Volume struct {
	MetaURL string       // the metadata URL to open it with
	Bucket  string       // the directory of its file bucket
	Format  *meta.Format // its settings, as stored
}

// New formats a volume named "vol" with 64 KiB blocks on file storage and
// returns it; change, when not nil, adjusts the settings first.
func New(t testing.TB, change func(*meta.Format)) *Volume {
	t.Helper()
	dir := t.TempDir()
	v := &Volume{MetaURL: "sqlite3://" + filepath.Join(dir, "meta.db"), Bucket: filepath.Join(dir, "bucket")}
	f := &meta.Format{Name: "vol", UUID: uuid.NewString(), Storage: "file", Bucket: v.Bucket,
		BlockSize: meta.MinBlockSize >> 10, MetaVersion: meta.MetaVersion}
	if change != nil {
		change(f)
	}
	ctx := context.Background()
	st, err := all.Open(ctx, v.MetaURL, true)
	if err != nil {
		t.Fatalf("open %s: %v", v.MetaURL, err)
	}
	defer st.Close()
	if _, err := meta.FormatVolume(ctx, st, f); err != nil {
		t.Fatalf("format: %v", err)
	}
	v.Format = f
	return v
}

// WriteFile creates the file name in the root of the volume at metaURL
// and writes data to it, through a VFS of its own.
func WriteFile(t testing.TB, metaURL, name string, data []byte) {
	t.Helper()
	ctx := context.Background()
	v, err := volume.Open(ctx, metaURL, volume.Options{Level: volume.FileSystem})
	if err != nil {
		t.Fatal(err)
	}
	_, fh, err := v.VFS().Create(ctx, meta.RootIno, []byte(name), 0o644, 0o022, uint32(os.O_RDWR))
	if err == nil {
		err = v.VFS().Write(ctx, fh, 0, data)
		if rerr := v.VFS().Release(ctx, fh, 0); err == nil {
			err = rerr
		}
	}
	if cerr := v.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
}
