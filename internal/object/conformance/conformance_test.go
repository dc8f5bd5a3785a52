package conformance_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/conformance"
	"github.com/sluicefs/sluice/internal/object/mem"
)

// Broken stores, each with one flaw a check must catch.
type (
	// foundEverything reports every key as present.
	foundEverything struct{ object.Store }
	// shortGets drops the last byte of every object read whole.
	shortGets struct{ object.Store }
	// markerIgnored lists from the start whatever the marker.
	markerIgnored struct{ object.Store }
	// padded reports every object one byte longer than it is, in Head
	// and List alike.
	padded struct{ object.Store }
)

func (s foundEverything) Head(ctx context.Context, key string) (object.Info, error) {
	info, err := s.Store.Head(ctx, key)
	if err != nil {
		return object.Info{Key: key}, nil
	}
	return info, nil
}

func (s shortGets) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	rc, err := s.Store.Get(ctx, key, off, limit)
	if err != nil || off != 0 || limit >= 0 {
		return rc, err
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if len(b) > 0 {
		b = b[:len(b)-1]
	}
	return io.NopCloser(strings.NewReader(string(b))), err
}

func (s markerIgnored) List(ctx context.Context, prefix, marker string, limit int) ([]object.Info, error) {
	return s.Store.List(ctx, prefix, "", limit)
}

func (s padded) Head(ctx context.Context, key string) (object.Info, error) {
	info, err := s.Store.Head(ctx, key)
	info.Size++
	return info, err
}

func (s padded) List(ctx context.Context, prefix, marker string, limit int) ([]object.Info, error) {
	infos, err := s.Store.List(ctx, prefix, marker, limit)
	for i := range infos {
		infos[i].Size++
	}
	return infos, err
}

func TestChecks(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		cfg    conformance.Config
		wrap   func(object.Store) object.Store
		failed []string // the checks that must fail; all others must pass
	}{
		{"conforming", conformance.Config{ExactSizes: true}, func(s object.Store) object.Store { return s }, nil},
		{"found everything", conformance.Config{}, func(s object.Store) object.Store { return foundEverything{s} },
			[]string{"NotFound", "Delete", "FailedPut"}},
		{"short gets", conformance.Config{}, func(s object.Store) object.Store { return shortGets{s} },
			[]string{"RoundTrip", "Overwrite", "Ranges", "Delete", "Concurrent", "AtomicOverwrite", "Large", "FailedPut"}},
		{"marker ignored", conformance.Config{}, func(s object.Store) object.Store { return markerIgnored{s} },
			[]string{"List", "ListPages"}},
		{"padded sizes, exact", conformance.Config{ExactSizes: true}, func(s object.Store) object.Store { return padded{s} },
			[]string{"RoundTrip", "Large"}},
		{"padded sizes, stored", conformance.Config{}, func(s object.Store) object.Store { return padded{s} }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.PartSize = 1 << 20 // smaller objects: the mem store has no parts
			for _, c := range conformance.Checks(cfg) {
				err := c.Run(ctx, tt.wrap(mem.New(t.Name())))
				want := false
				for _, name := range tt.failed {
					want = want || name == c.Name
				}
				if (err != nil) != want {
					t.Errorf("check %s (%s): error %v, want failure %v", c.Name, c.Doc, err, want)
				}
			}
		})
	}
}
