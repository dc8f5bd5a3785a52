package cli

import (
	"strings"
	"testing"

	"github.com/sluicefs/sluice/internal/volume"
)

func TestValidateCacheGroup(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    volume.CacheGroupOptions
		err  string // part of the error; empty for none
	}{
		{"none", volume.CacheGroupOptions{}, ""},
		{"plain", volume.CacheGroupOptions{Name: "train", Weight: 1}, ""},
		{"every flag", volume.CacheGroupOptions{Name: "a.b-c_1", Listen: ":9600", Weight: 100, NoSharing: true, Seal: true, TLS: true}, ""},
		{"listen on every address", volume.CacheGroupOptions{Name: "g", Listen: "0.0.0.0:0", Weight: 1}, ""},
		{"flags without a group", volume.CacheGroupOptions{NoSharing: true}, "need --cache-group"},
		{"tls without a group", volume.CacheGroupOptions{TLS: true}, "need --cache-group"},
		{"space in the name", volume.CacheGroupOptions{Name: "a b", Weight: 1}, "letters, digits"},
		{"name too long", volume.CacheGroupOptions{Name: strings.Repeat("x", 64), Weight: 1}, "1 to 63"},
		{"zero weight", volume.CacheGroupOptions{Name: "g"}, "--cache-group-weight 0"},
		{"listen without a port", volume.CacheGroupOptions{Name: "g", Listen: "host", Weight: 1}, "want HOST:PORT"},
		{"listen with an empty port", volume.CacheGroupOptions{Name: "g", Listen: "host:", Weight: 1}, "want HOST:PORT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := mountOptions{cacheGroup: tc.g}
			err := o.validateCacheGroup()
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("got %v, want an error with %q", err, tc.err)
			}
		})
	}
}
