//go:build faultinject

package cli

import (
	"log/slog"
	"os"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/fault"
)

// faultEnv is the environment variable through which tests ask a mount to
// inject object storage faults; see fault.Parse for its format.
const faultEnv = fault.EnvVar

// faultHook returns the hook that wraps a mount's bucket with the faults
// the environment asks for (the bucket itself when it asks for none).
// Only binaries built with the faultinject tag (the end-to-end tests
// build one) have it.
func faultHook(log *slog.Logger) func(object.Store) (object.Store, error) {
	return func(bucket object.Store) (object.Store, error) {
		s, err := fault.WrapFromEnv(bucket)
		if err != nil {
			return nil, err
		}
		if s != bucket {
			log.Warn("object storage faults injected", fault.EnvVar, os.Getenv(fault.EnvVar))
		}
		return s, nil
	}
}
