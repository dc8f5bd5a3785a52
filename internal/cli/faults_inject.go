//go:build faultinject

package cli

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/fault"
)

// faultEnv is the environment variable through which tests ask a mount to
// inject object storage faults; see fault.Parse for its format.
const faultEnv = fault.EnvVar

// faultHook returns the hook that wraps a mount's bucket with the faults
// the environment asks for, or nil when it asks for none. Only binaries
// built with the faultinject tag (the end-to-end tests build one) have it.
func faultHook(log *slog.Logger) func(object.Store) (object.Store, error) {
	cfg, ok, err := fault.FromEnv()
	if err == nil && !ok {
		return nil
	}
	return func(bucket object.Store) (object.Store, error) {
		if err != nil {
			return nil, err
		}
		s, err := fault.New(bucket, cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fault.EnvVar, err)
		}
		log.Warn("object storage faults injected", fault.EnvVar, os.Getenv(fault.EnvVar))
		return s, nil
	}
}
