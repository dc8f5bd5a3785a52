package localdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sluicefs/sluice/internal/testserver"
)

// flagsKept skips the test (fails it under CI=true) when dir's file
// system does not keep the mark (tmpfs, FUSE): MkdirAll could mark
// nothing.
func flagsKept(t *testing.T, dir string) {
	t.Helper()
	if err := Probe(dir); err != nil {
		testserver.Missing(t, fmt.Sprintf("a file system that keeps FS_TOPDIR_FL under %s (%v)", dir, err), "put TMPDIR on ext4")
	}
}

func TestMkdirAllMarksParentsBelowRoot(t *testing.T) {
	root := t.TempDir()
	flagsKept(t, root)
	leaf := filepath.Join(root, "vol", "chunks", "0", "12")
	if err := MkdirAll(root, leaf+"/", 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dir  string
		want bool
	}{
		{root, false}, // the user's directory
		{filepath.Join(root, "vol"), true},
		{filepath.Join(root, "vol", "chunks"), true},
		{filepath.Join(root, "vol", "chunks", "0"), true},
		{leaf, false}, // nothing was made in it
	}
	for _, tt := range tests {
		got, err := Spreads(tt.dir)
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("%s: marked %v, want %v", tt.dir, got, tt.want)
		}
		fi, err := os.Stat(tt.dir)
		if err != nil || !fi.IsDir() {
			t.Fatalf("%s: not a directory (%v)", tt.dir, err)
		}
	}
	// A directory that existed before is marked when one is made in it.
	old := filepath.Join(root, "vol", "chunks", "0", "12")
	if err := MkdirAll(root, filepath.Join(old, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, _ := Spreads(old); !got {
		t.Errorf("%s: not marked after a directory was made in it", old)
	}
	// Existing directories are left as they are, and succeed.
	if err := MkdirAll(root, leaf, 0o755); err != nil {
		t.Errorf("existing directory: %v", err)
	}
}

func TestMkdirAllErrors(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{file, filepath.Join(file, "d")} {
		err := MkdirAll(root, dir, 0o755)
		if !errors.Is(err, unix.ENOTDIR) {
			t.Errorf("MkdirAll(%s) = %v, want ENOTDIR", dir, err)
		}
	}
}

func TestUnder(t *testing.T) {
	tests := []struct {
		root, path string
		want       bool
	}{
		{"/b", "/b/v", true},
		{"/b", "/b/v/c", true},
		{"/b", "/b", false},
		{"/b", "/", false},
		{"/b", "/bb/v", false},
		{"/b", "/a/v", false},
	}
	for _, tt := range tests {
		if got := under(tt.root, tt.path); got != tt.want {
			t.Errorf("under(%q, %q) = %v, want %v", tt.root, tt.path, got, tt.want)
		}
	}
}
