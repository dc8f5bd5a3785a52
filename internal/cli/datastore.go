package cli

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/fault"
	"github.com/sluicefs/sluice/internal/object/limit"
	"github.com/sluicefs/sluice/internal/object/metrics"
	"github.com/sluicefs/sluice/internal/object/retry"
)

// mountStore builds the object store stack a mount writes blocks through,
// from the bucket outwards: injected faults (SLUICE_FAULTS, for tests),
// the volume layout (prefix, encryption, compression), metrics,
// concurrency and bandwidth limits, and retries of transient errors.
func mountStore(bucket object.Store, f *meta.Format, o *mountOptions, log *slog.Logger) (object.Store, *metrics.Store, error) {
	s, err := fault.WrapFromEnv(bucket)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", fault.EnvVar, err)
	}
	if s != bucket {
		log.Warn("object storage faults injected", "spec", fault.EnvVar)
	}
	if s, err = volumeStore(s, f); err != nil {
		return nil, nil, err
	}
	m := metrics.New(s)
	upload, download := o.uploadLimit, o.downloadLimit
	if upload == 0 {
		upload = f.UploadLimit
	}
	if download == 0 {
		download = f.DownloadLimit
	}
	l, err := limit.New(m, limit.Config{
		MaxDownloads:  o.maxDownloads,
		UploadLimit:   upload * 1e6 / 8, // Mbps to bytes per second
		DownloadLimit: download * 1e6 / 8,
	})
	if err != nil {
		return nil, nil, err
	}
	r, err := retry.New(l, retry.Config{
		Timeout:    o.putTimeout,
		GetTimeout: o.getTimeout,
		OnRetry: func(op, key string, attempt int, err error, wait time.Duration) {
			log.Warn("object storage: retrying", "op", op, "key", key, "attempt", attempt, "err", err, "wait", wait)
		}})
	if err != nil {
		return nil, nil, err
	}
	return r, m, nil
}
