package all_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicefs/sluice/internal/object/all"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		storage, bucket string
		want            string // String() of the store, or "" for an error
	}{
		{"file", dir, "file://" + dir + "/"},
		{"file", "file://" + dir, "file://" + dir + "/"},
		{"file", filepath.Join(dir, "sub") + "/", "file://" + filepath.Join(dir, "sub") + "/"},
		{"file", "", ""},
		{"file", "file://", ""},
		{"mem", "vol", "mem://vol/"},
		{"x", "b", ""},
	}
	for _, tt := range tests {
		s, err := all.Open(tt.storage, tt.bucket)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("Open(%q, %q) = %v, want an error", tt.storage, tt.bucket, s)
		case tt.want != "" && err != nil:
			t.Errorf("Open(%q, %q): %v", tt.storage, tt.bucket, err)
		case tt.want != "" && s.String() != tt.want:
			t.Errorf("Open(%q, %q).String() = %q, want %q", tt.storage, tt.bucket, s.String(), tt.want)
		}
	}
	_, err := all.Open("x", "b")
	if want := `unknown storage "x" (supported: file, mem)`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Open(x) error = %v, want %q", err, want)
	}
}
