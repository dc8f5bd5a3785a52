package vfs_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/sqlite"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/subtree"
	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/file"
	"github.com/sluicefs/sluice/internal/vfs"
	"github.com/sluicefs/sluice/internal/vfs/vfstest"
)

// TestSuite runs the kernel-less behaviour suite over several
// configurations of a VFS: what applications see must not depend on
// caches, writeback or the metadata engine.
func TestSuite(t *testing.T) {
	configs := []struct {
		name string
		opts func(t *testing.T) vfstest.Options
	}{
		{"mem", func(t *testing.T) vfstest.Options { return vfstest.Options{} }},
		{"mem+kernel-caches+writeback", func(t *testing.T) vfstest.Options {
			return vfstest.Options{
				Chunk: chunk.Config{CacheDirs: []string{t.TempDir()}, Writeback: true,
					MaxReadahead: 4 * vfstest.BlockSize, Prefetch: 2},
				VFS: vfs.Config{AttrTimeout: time.Second, EntryTimeout: time.Second, DirEntryTimeout: time.Second},
				// As a mount with these cache times sets them.
				Meta: meta.Config{Statahead: time.Second, DirAttrReuse: 100 * time.Millisecond},
			}
		}},
		{"sqlite+file-bucket", func(t *testing.T) vfstest.Options {
			dir := t.TempDir()
			return vfstest.Options{
				Store: func(t *testing.T) store.Store {
					st, err := sqlite.Open(context.Background(), filepath.Join(dir, "meta.db"), true)
					if err != nil {
						t.Fatalf("open sqlite: %v", err)
					}
					t.Cleanup(func() { st.Close() })
					return st
				},
				// A local directory defers the sync of written blocks.
				Object: func(object.Store) object.Store {
					fs, err := file.New(filepath.Join(dir, "bucket"))
					if err != nil {
						t.Fatal(err)
					}
					return fs
				},
			}
		}},
		// One directory of the volume as the root (mount --subdir), with
		// the caches whose capabilities the wrapper must pass on.
		{"subdir+kernel-caches", func(t *testing.T) vfstest.Options {
			return vfstest.Options{
				VFS:  vfs.Config{AttrTimeout: time.Second, EntryTimeout: time.Second, DirEntryTimeout: time.Second},
				Meta: meta.Config{Statahead: time.Second, DirAttrReuse: 100 * time.Millisecond, OpenCache: time.Second},
				OnClient: func(t *testing.T, c *meta.Session) vfs.Meta {
					ctx := meta.WithCred(context.Background(), meta.Cred{})
					d, err := c.Mknod(ctx, meta.RootIno, []byte("subdir"), meta.NewNode{Type: store.TypeDir, Mode: 0o777})
					if err != nil {
						t.Fatal(err)
					}
					return subtree.New(c, d.Ino)
				},
			}
		}},
	}
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			vfstest.Run(t, func(t *testing.T) *vfs.VFS { return vfstest.New(t, c.opts(t)) })
		})
	}
}
