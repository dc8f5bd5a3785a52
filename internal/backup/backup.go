// Package backup backs up a volume's metadata into its own bucket, as
// `sluice mount --backup-meta` does: once per interval, one client of the
// volume (whichever wins the lease in the metadata engine, see
// meta.Session.BackupLease) writes a gzip-compressed dump of the whole
// volume (the format of `sluice dump`, without the object storage
// secrets) to meta/dump-YYYY-MM-DD-HHMMSS.json.gz among the volume's
// objects, then deletes older backups as Rotate says.
//
// The objects are those of volume.Volume.SealedObjects: under the
// volume's NAME/ prefix, encrypted with the volume's key when it has one,
// and not compressed again with the volume's block compression (a
// backup is gzip already). That is how JuiceFS writes its own meta/
// backups, so `juicefs load --encrypt-rsa-key` reads Sluice's and
// `sluice load --encrypt-rsa-key` reads JuiceFS's. A backup of an
// encrypted volume is sealed as one object, which bounds it to
// encrypt.MaxSize (64 MiB) of gzip.
//
// A backup reads the volume in batches, each its own transaction (the
// "fast" dump), not in one snapshot: it runs beside a mount serving
// writes, whose transactions are bounded by --meta-timeout, and one
// snapshot held for the minutes a large dump takes would pin SQLite's WAL
// (no checkpoint, the file grows), hold back PostgreSQL's vacuum and
// MySQL's purge, or outlive etcd's and TiKV's compaction of old
// revisions. The price is a dump that is not a point in time: an entry
// renamed during the backup may appear twice or not at all, as in
// JuiceFS's backups. Load recomputes every counter from the tree, so the
// backup loads whatever it holds; for an exact copy, dump an idle volume
// with `sluice dump`.
package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/sluicefs/sluice/internal/dump"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/encrypt"
	"github.com/sluicefs/sluice/internal/object/mem"
)

// DefaultMaxInodes is the default of Config.MaxInodes: as JuiceFS does, a
// volume of more files than this is backed up only at intervals longer
// than an hour.
const DefaultMaxInodes = 1_000_000

// bigVolumeInterval is the interval above which MaxInodes does not apply.
const bigVolumeInterval = time.Hour

// threads is how many batches a backup reads at once: few, so that it
// stays in the background of the mount's own requests.
const threads = 2

// Config configures Run.
type Config struct {
	// Interval is how often the volume is backed up, by whichever client
	// wins the lease. Required (above 0).
	Interval time.Duration
	// Client takes the lease and reports the volume's usage. Required;
	// a read-only client never backs up.
	Client *meta.Session
	// Store is the metadata engine dumped. Required.
	Store store.Store
	// Objects is where backups are written: the volume's
	// SealedObjects. Required.
	Objects object.Store
	// MaxInodes skips a backup, with a warning, when the volume holds
	// more inodes and Interval is an hour or less (a longer interval
	// backs up any volume). 0: DefaultMaxInodes; below 0: no limit.
	MaxInodes int64
	// TempDir holds the dump while it is written, before the upload.
	// Default os.TempDir().
	TempDir string
	// Logger receives what happens. Default: discarded.
	Logger *slog.Logger
	// Now is the clock of the rotation. Default time.Now. (Backups are
	// named by the Client's clock, which takes the lease.)
	Now func() time.Time
}

func (c *Config) defaults() error {
	if c.MaxInodes == 0 {
		c.MaxInodes = DefaultMaxInodes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Interval <= 0 || c.Client == nil || c.Store == nil || c.Objects == nil {
		return errors.New("backup: Interval, Client, Store and Objects are required")
	}
	return nil
}

// Run checks about every Interval/10 (with jitter, so that the mounts of
// a volume do not all ask at once) whether a backup is due, and when this
// client wins the lease backs the volume up (see Once). It returns when
// ctx is done; errors are logged, never returned, so that a failing
// backup never stops the mount.
func Run(ctx context.Context, c Config) {
	if err := c.defaults(); err != nil {
		c.Logger.Error("metadata backup disabled", "err", err)
		return
	}
	period := max(c.Interval/10, 100*time.Millisecond)
	for {
		wait := period - period/10 + rand.N(period/5+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if _, err := Once(ctx, c); err != nil && ctx.Err() == nil {
			c.Logger.Warn("metadata backup failed", "err", err)
		}
	}
}

// Once backs the volume up when a backup is due and this client wins the
// lease for it, and then rotates the older backups. It returns the key of
// the backup written, or "" when none was due, the lease went to another
// client, or the volume is too large for the interval (logged).
func Once(ctx context.Context, c Config) (string, error) {
	if err := c.defaults(); err != nil {
		return "", err
	}
	if c.MaxInodes > 0 && c.Interval <= bigVolumeInterval {
		st, err := c.Client.StatFS(ctx)
		if err != nil {
			return "", fmt.Errorf("read the volume's usage: %w", err)
		}
		if st.UsedInodes > uint64(c.MaxInodes) {
			c.Logger.Warn("metadata backup skipped: too many files for an interval of an hour or less; set --backup-meta above 1h to back up anyway",
				"inodes", st.UsedInodes, "limit", c.MaxInodes, "interval", c.Interval)
			return "", nil
		}
	}
	start, won, err := c.Client.BackupLease(ctx, c.Interval)
	if err != nil {
		return "", fmt.Errorf("take the backup lease: %w", err)
	}
	if !won {
		return "", nil
	}
	// Named by the time the lease stored, so that two backups' names
	// are at least an interval apart as their leases are.
	key := Name(start)
	c.Logger.Info("metadata backup started", "key", key)
	stats, size, err := Write(ctx, c.Store, c.Objects, key, c.TempDir)
	if err != nil {
		return "", err
	}
	c.Logger.Info("metadata backup written", "key", key, "entries", stats.Entries, "bytes", size,
		"skipped", stats.Skipped, "took", c.Now().Sub(start).Round(time.Millisecond))
	deleted, err := Cleanup(ctx, c.Objects, c.Now())
	if err != nil {
		c.Logger.Warn("rotate metadata backups", "err", err)
	} else if len(deleted) > 0 {
		c.Logger.Info("rotated metadata backups", "deleted", len(deleted))
	}
	return key, nil
}

// Write dumps the volume in st (in batches, without secrets) into a gzip
// file in tempDir ("": os.TempDir()) and uploads it to objects as key,
// returning the dump's statistics and the size of the upload. The dump
// goes through a file, not a pipe: a retried upload must read it again
// from the start, which a file allows and a pipe would not (the retrying
// layer would buffer the whole stream in memory instead).
func Write(ctx context.Context, st store.Store, objects object.Store, key, tempDir string) (*dump.Stats, int64, error) {
	f, err := os.CreateTemp(tempDir, "sluice-backup-*.json.gz")
	if err != nil {
		return nil, 0, fmt.Errorf("backup: temporary file: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	zw, err := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err != nil {
		return nil, 0, fmt.Errorf("backup: %w", err)
	}
	stats, err := dump.Dump(ctx, st, zw, dump.Options{Fast: true, Threads: threads})
	if err != nil {
		return nil, 0, fmt.Errorf("backup: dump: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, 0, fmt.Errorf("backup: write %s: %w", f.Name(), err)
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, 0, fmt.Errorf("backup: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, 0, fmt.Errorf("backup: %w", err)
	}
	if err := objects.Put(ctx, key, f); err != nil {
		return nil, 0, fmt.Errorf("backup: upload %s: %w", key, err)
	}
	return stats, size, nil
}

// List returns the backups among objects, oldest first.
func List(ctx context.Context, objects object.Store) ([]object.Info, error) {
	var out []object.Info
	marker := ""
	for {
		page, err := objects.List(ctx, Prefix+"dump-", marker, 1000)
		if err != nil {
			return nil, fmt.Errorf("list backups: %w", err)
		}
		for _, o := range page {
			if _, ok := ParseName(o.Key); ok {
				out = append(out, o)
			}
		}
		if len(page) < 1000 {
			return out, nil
		}
		marker = page[len(page)-1].Key
	}
}

// Cleanup deletes the backups among objects that Rotate says to delete at
// now, and returns their keys. A failed listing deletes nothing.
func Cleanup(ctx context.Context, objects object.Store, now time.Time) ([]string, error) {
	infos, err := List(ctx, objects)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(infos))
	for i, o := range infos {
		keys[i] = o.Key
	}
	var deleted []string
	for _, k := range Rotate(keys, now) {
		if err := objects.Delete(ctx, k); err != nil {
			return deleted, fmt.Errorf("delete backup %s: %w", k, err)
		}
		deleted = append(deleted, k)
	}
	return deleted, nil
}

// Unseal decrypts a backup copied out of the bucket of an encrypted
// volume, given the volume's RSA key (PEM, with its passphrase when it has
// one) and its encryption algorithm ("": each is tried). stored is the
// object as the bucket holds it; the result is the gzip dump.
func Unseal(stored, pemKey []byte, passphrase, algo string) ([]byte, error) {
	key, err := encrypt.ParsePrivateKey(pemKey, []byte(passphrase))
	if err != nil {
		return nil, err
	}
	algos := encrypt.Algorithms
	if algo != "" {
		algos = []string{algo}
	}
	ctx := context.Background()
	bucket := mem.New("backup")
	if err := bucket.Put(ctx, "dump", bytes.NewReader(stored)); err != nil {
		return nil, err
	}
	var errs []error
	for _, a := range algos {
		s, err := encrypt.New(bucket, key, a)
		if err != nil {
			return nil, err
		}
		rc, err := s.Get(ctx, "dump", 0, -1)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	return nil, fmt.Errorf("decrypt the backup: %w", errors.Join(errs...))
}
