//go:build !faultinject

package cli

import (
	"log/slog"
	"os"

	"github.com/sluicefs/sluice/internal/object"
)

// faultEnv is the environment variable through which tests ask a mount
// built with the faultinject tag to inject object storage faults
// (internal/object/fault). Production builds never inject any.
const faultEnv = "SLUICE_FAULTS"

// faultHook returns nil: this build injects no faults. It warns when the
// environment asks for some, so that a test run with a binary built
// without the faultinject tag does not pass for the wrong reason.
func faultHook(log *slog.Logger) func(object.Store) (object.Store, error) {
	if os.Getenv(faultEnv) != "" {
		log.Warn("object storage faults requested but not injected: this binary was built without the faultinject tag", "env", faultEnv)
	}
	return nil
}
