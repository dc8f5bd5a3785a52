// Package objecttest is the conformance suite every object.Store runs:
// backends and decorators alike. A backend's test file calls Run with a
// constructor for a fresh, empty store, and Bench from a benchmark. The
// checks themselves live in package conformance, which `sluice objbench`
// runs against real buckets too.
package objecttest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/conformance"
)

// Run runs the conformance suite, the checks of package conformance with
// its default Config, each as a subtest. newStore must return a fresh,
// empty store each time it is called; every subtest calls it once.
func Run(t *testing.T, newStore func(t *testing.T) object.Store) {
	t.Helper()
	RunConfig(t, conformance.Config{}, newStore)
}

// RunConfig is Run with the checks configured by cfg.
func RunConfig(t *testing.T, cfg conformance.Config, newStore func(t *testing.T) object.Store) {
	t.Helper()
	for _, c := range conformance.Checks(cfg) {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Run(context.Background(), newStore(t)); err != nil {
				t.Errorf("%s: %v", c.Doc, err)
			}
		})
	}
}

// Data returns n deterministic pseudo-random (incompressible) bytes.
func Data(seed uint64, n int) []byte { return conformance.Data(seed, n) }

// Put stores data under key and fails the test on error.
func Put(t testing.TB, s object.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), key, bytes.NewReader(data)); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

// Get reads key with off and limit and fails the test on error.
func Get(t testing.TB, s object.Store, key string, off, limit int64) []byte {
	t.Helper()
	b, err := conformance.Get(context.Background(), s, key, off, limit)
	if err != nil {
		t.Fatalf("Get(%q, %d, %d): %v", key, off, limit, err)
	}
	return b
}

// Bench measures Put and Get of 4 MiB objects on s.
func Bench(b *testing.B, s object.Store) {
	const size = 4 << 20
	ctx := context.Background()
	data := Data(1, size)
	b.Run("Put4MiB", func(b *testing.B) {
		b.SetBytes(size)
		for i := 0; b.Loop(); i++ {
			key := fmt.Sprintf("bench/put/%d_0_%d", i%16, size)
			if err := s.Put(ctx, key, bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Get4MiB", func(b *testing.B) {
		key := fmt.Sprintf("bench/get/1_0_%d", size)
		if err := s.Put(ctx, key, bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(size)
		for b.Loop() {
			rc, err := s.Get(ctx, key, 0, -1)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, rc); err != nil {
				b.Fatal(err)
			}
			rc.Close()
		}
	})
}
