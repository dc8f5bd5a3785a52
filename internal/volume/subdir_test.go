package volume_test

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/vfs"
	"github.com/sluicefs/sluice/internal/volume"
	"github.com/sluicefs/sluice/internal/volume/volumetest"
)

// TestSubdir opens a volume with Options.Subdir and checks that its VFS
// is the directory's tree, numbered from the root, with no way out.
func TestSubdir(t *testing.T) {
	ctx := context.Background()
	tv := volumetest.New(t, nil)
	whole, err := volume.Open(ctx, tv.MetaURL, volume.Options{Level: volume.FileSystem})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(v *vfs.VFS, parent meta.Ino, name string, typ uint8) *meta.Attr {
		t.Helper()
		a, err := v.Mknod(ctx, parent, []byte(name), meta.NewNode{Type: typ, Mode: 0o755})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	w := whole.VFS()
	secret := mk(w, meta.RootIno, "secret", store.TypeFile)
	outside := mk(w, meta.RootIno, "outside", store.TypeDir)
	outFile := mk(w, outside.Ino, "f", store.TypeFile)
	top := mk(w, meta.RootIno, "projects", store.TypeDir)
	sub := mk(w, top.Ino, "alpha", store.TypeDir)
	inDir := mk(w, sub.Ino, "d", store.TypeDir)
	inFile := mk(w, inDir.Ino, "f", store.TypeFile)
	if err := whole.Close(ctx); err != nil {
		t.Fatal(err)
	}

	if _, err := volume.Open(ctx, tv.MetaURL, volume.Options{Level: volume.FileSystem, Subdir: "/projects/alpha/d/f"}); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("a file as the subdir: %v", err)
	}
	if _, err := volume.Open(ctx, tv.MetaURL, volume.Options{Level: volume.FileSystem, Subdir: "/projects/beta"}); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("a missing subdir: %v", err)
	}
	vol, err := volume.Open(ctx, tv.MetaURL, volume.Options{Level: volume.FileSystem, Subdir: "projects/alpha/"})
	if err != nil {
		t.Fatal(err)
	}
	defer vol.Close(ctx)
	v := vol.VFS()
	root, err := v.GetAttr(ctx, meta.RootIno)
	if err != nil || root.Ino != meta.RootIno || root.Parent != meta.RootIno || root.Type != store.TypeDir {
		t.Fatalf("the root: %+v, %v", root, err)
	}
	d, err := v.Lookup(ctx, meta.RootIno, []byte("d"))
	if err != nil || d.Ino != inDir.Ino || d.Parent != meta.RootIno {
		t.Fatalf("lookup of d: %+v, %v (want inode %d, parent the root)", d, err, inDir.Ino)
	}
	if a, err := v.Lookup(ctx, meta.RootIno, []byte("..")); err != nil || a.Ino != meta.RootIno {
		t.Fatalf(".. of the root: %+v, %v", a, err)
	}
	if a, err := v.Lookup(ctx, d.Ino, []byte("..")); err != nil || a.Ino != meta.RootIno {
		t.Fatalf(".. of d: %+v, %v", a, err)
	}
	if a, err := v.ParentOf(ctx, d.Ino); err != nil || a.Ino != meta.RootIno {
		t.Fatalf("ParentOf d: %+v, %v", a, err)
	}
	for _, name := range []string{"secret", "outside", "projects"} {
		if _, err := v.Lookup(ctx, meta.RootIno, []byte(name)); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("lookup of /%s from the subdir: %v", name, err)
		}
	}
	// A file handle may name any inode: only those inside are found.
	for _, c := range []struct {
		name string
		ino  meta.Ino
		ok   bool
	}{{"the file inside", inFile.Ino, true}, {"the subdir's own number", sub.Ino, true},
		{"a file at the volume's root", secret.Ino, false}, {"a file in another directory", outFile.Ino, false},
		{"the directory above", top.Ino, false}} {
		a, err := v.ByHandle(ctx, c.ino)
		if c.ok && err != nil || !c.ok && !errors.Is(err, syscall.ESTALE) {
			t.Errorf("by handle, %s: %+v, %v", c.name, a, err)
		}
	}
	// Listing the root shows its entries with the subdir's numbers.
	fh, err := v.OpenDir(ctx, meta.RootIno)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	if err := v.ReadDir(ctx, fh, 0, true, func(e vfs.DirEntry) bool {
		if !vfs.IsInternal(e.Ino) {
			names = append(names, string(e.Name))
			if string(e.Name) == ".." && e.Ino != meta.RootIno {
				t.Errorf(".. in the root's listing is inode %d", e.Ino)
			}
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	v.ReleaseDir(fh)
	if want := []string{".", "..", "d"}; len(names) != len(want) || names[2] != "d" {
		t.Fatalf("the root lists %q, want %q", names, want)
	}
	// A change in the subdir is the volume's.
	if _, err := v.Mknod(ctx, meta.RootIno, []byte("new"), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if a, err := vol.Client().Lookup(ctx, sub.Ino, []byte("new")); err != nil || a.Parent != sub.Ino {
		t.Fatalf("the volume's view of the file made at the subdir's root: %+v, %v", a, err)
	}
}
