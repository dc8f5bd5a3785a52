package cli

import (
	"context"
	"log/slog"
	"os"

	"github.com/sluicefs/sluice/internal/object/encrypt"
	"github.com/sluicefs/sluice/internal/volume"
)

// volumeOptions returns the options every command opens a volume with, up
// to level: object storage credentials from the environment variables
// ACCESS_KEY, SECRET_KEY and SESSION_TOKEN when set (they override the
// stored ones), the encryption key's passphrase from its environment
// variable, and log to log (nil: discarded). Commands add their own
// settings.
func volumeOptions(level volume.Level, log *slog.Logger) volume.Options {
	keys := credentials{}.envOverride()
	return volume.Options{
		Level:        level,
		AccessKey:    keys.accessKey,
		SecretKey:    keys.secretKey,
		SessionToken: keys.sessionToken,
		Passphrase:   os.Getenv(encrypt.PassphraseEnv),
		Logger:       log,
	}
}

// openVolume opens the volume at metaURL up to level, for commands that
// need no settings of their own.
func openVolume(ctx context.Context, metaURL string, level volume.Level) (*volume.Volume, error) {
	return volume.Open(ctx, metaURL, volumeOptions(level, nil))
}
