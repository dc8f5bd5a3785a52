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
		{"s3", "http://127.0.0.1:9000/vol", "http://127.0.0.1:9000/vol/"},
		{"s3", "http://ak:sk@127.0.0.1:9000/vol", "http://127.0.0.1:9000/vol/"},
		{"s3", "https://vol.s3.eu-west-1.amazonaws.com", "https://vol.s3.eu-west-1.amazonaws.com/"},
		{"s3", "http://127.0.0.1:9000", ""},
		{"x", "b", ""},
	}
	for _, tt := range tests {
		s, err := all.Open(tt.storage, tt.bucket, all.Options{})
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("Open(%q, %q) = %v, want an error", tt.storage, tt.bucket, s)
		case tt.want != "" && err != nil:
			t.Errorf("Open(%q, %q): %v", tt.storage, tt.bucket, err)
		case tt.want != "" && s.String() != tt.want:
			t.Errorf("Open(%q, %q).String() = %q, want %q", tt.storage, tt.bucket, s.String(), tt.want)
		}
	}
	_, err := all.Open("x", "b", all.Options{})
	if want := `unknown storage "x" (supported: file, mem, s3)`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Open(x) error = %v, want %q", err, want)
	}
}

func TestOpenHidesSecret(t *testing.T) {
	for _, bucket := range []string{"http://ak:topsecret@127.0.0.1:9000", "http://ak:topsecret@host:bad/b"} {
		_, err := all.Open("s3", bucket, all.Options{})
		if err == nil || strings.Contains(err.Error(), "topsecret") {
			t.Errorf("Open(s3, %q) error = %v, want an error without the secret", all.Redact(bucket), err)
		}
	}
	if got := all.Redact("http://ak:topsecret@h/b"); got != "http://ak:xxxxx@h/b" {
		t.Errorf("Redact = %q", got)
	}
}
