package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/object/encrypt"
	"github.com/sluicefs/sluice/internal/volume"
)

// metaTimeoutUsage describes --meta-timeout of the commands that work on a
// volume without mounting it.
const metaTimeoutUsage = "longest the metadata engine may take to open, and to answer each transaction (retries included), before the command fails (seconds or a duration; 0: wait for ever)"

// volumeOptions returns the options every command opens a volume with, up
// to level: object storage credentials from the environment variables
// ACCESS_KEY, SECRET_KEY and SESSION_TOKEN when set (they override the
// stored ones), the encryption key's passphrase from its environment
// variable, and log to log (nil: discarded). A timeout above 0
// (--meta-timeout) bounds opening the engine and each of its
// transactions, so that a command on an engine that stops answering
// fails instead of hanging. Commands add their own settings.
func volumeOptions(level volume.Level, log *slog.Logger, timeout time.Duration) volume.Options {
	keys := credentials{}.envOverride()
	return volume.Options{
		Level:        level,
		AccessKey:    keys.accessKey,
		SecretKey:    keys.secretKey,
		SessionToken: keys.sessionToken,
		Passphrase:   encrypt.Passphrase(),
		Logger:       log,
		OpenTimeout:  timeout,
		TxTimeout:    timeout,
		Meta:         meta.Config{OpTimeout: opTimeout(timeout)},
	}
}

// openVolume opens the volume at metaURL up to level, for commands that
// need no settings of their own, bounded by timeout (see volumeOptions).
func openVolume(ctx context.Context, metaURL string, level volume.Level, timeout time.Duration) (*volume.Volume, error) {
	return volume.Open(ctx, metaURL, volumeOptions(level, nil, timeout))
}
