package volume_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/all"
	"github.com/sluicefs/sluice/internal/volume"
)

// ExampleOpen opens a volume's data, as gc and fsck do, and lists its
// blocks.
func ExampleOpen() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sluice-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	metaURL := "sqlite3://" + filepath.Join(dir, "meta.db")
	// What `sluice format` does, without the checks of the bucket.
	st, err := all.Open(ctx, metaURL, true)
	if err != nil {
		log.Fatal(err)
	}
	_, err = meta.FormatVolume(ctx, st, &meta.Format{Name: "demo", UUID: "5e0c3a1f-0000-4000-8000-000000000001",
		Storage: "file", Bucket: filepath.Join(dir, "bucket"), BlockSize: 4096, MetaVersion: meta.MetaVersion})
	st.Close()
	if err != nil {
		log.Fatal(err)
	}

	v, err := volume.Open(ctx, metaURL, volume.Options{Level: volume.Data})
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close(ctx)
	blocks, err := v.Objects().List(ctx, "chunks/", "", 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("volume %s: %d KiB blocks, %d stored\n", v.Format().Name, v.Format().BlockSize, len(blocks))
	// Output: volume demo: 4096 KiB blocks, 0 stored
}
