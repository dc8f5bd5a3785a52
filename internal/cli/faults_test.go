//go:build !faultinject

package cli

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestNoFaultsInRelease checks that a build without the faultinject tag
// ignores the environment's request for faults, and says so.
func TestNoFaultsInRelease(t *testing.T) {
	t.Setenv(faultEnv, "all:err=1")
	var log bytes.Buffer
	if hook := faultHook(slog.New(slog.NewTextHandler(&log, nil))); hook != nil {
		t.Fatal("a release build returned a fault hook")
	}
	if !strings.Contains(log.String(), "faultinject") {
		t.Errorf("no warning that faults were not injected: %q", log.String())
	}
}
