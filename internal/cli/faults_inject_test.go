//go:build faultinject

package cli

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/mem"
)

// TestFaultHook checks that a faultinject build wraps the bucket with the
// faults the environment asks for, and only then.
func TestFaultHook(t *testing.T) {
	log := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	bucket := mem.New("faults")
	t.Setenv(faultEnv, "")
	if s, err := faultHook(log)(bucket); s != object.Store(bucket) || err != nil {
		t.Errorf("hook without faults asked for = %v, %v; want the bucket itself", s, err)
	}
	t.Setenv(faultEnv, "put:fail=1")
	s, err := faultHook(log)(bucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(context.Background(), "k", bytes.NewReader(nil)); !errors.Is(err, object.ErrTransient) {
		t.Errorf("first Put: %v, want an injected fault", err)
	}
	t.Setenv(faultEnv, "put:bogus=1")
	if _, err := faultHook(log)(mem.New("faults")); err == nil {
		t.Error("a bad fault spec was accepted")
	}
}
