package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRmrTarget resolves paths off any mount: the parent's symbolic
// links are followed, the name's are not.
func TestRmrTarget(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.MkdirAll(filepath.Join(real, "tree"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "via")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("tree", filepath.Join(real, "link")); err != nil {
		t.Fatal(err)
	}
	realDir, err := filepath.EvalSymlinks(real)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path, dir, name string
	}{
		{filepath.Join(dir, "via", "tree"), realDir, "tree"},
		{filepath.Join(dir, "via", "link"), realDir, "link"},
		{filepath.Join(dir, "via", "tree", "..", "link"), realDir, "link"},
	}
	for _, tt := range tests {
		d, n, err := rmrTarget(tt.path)
		if err != nil || d != tt.dir || n != tt.name {
			t.Errorf("rmrTarget(%s) = %q, %q, %v; want %q, %q", tt.path, d, n, err, tt.dir, tt.name)
		}
	}
	for _, bad := range []string{"/", filepath.Join(dir, "missing")} {
		if _, _, err := rmrTarget(bad); err == nil {
			t.Errorf("rmrTarget(%s): no error", bad)
		}
	}
}
