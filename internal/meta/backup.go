package meta

import (
	"context"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// counterLastBackup holds the unix time at which the last automatic
// metadata backup was started by any client: the lease that lets one
// client of the volume back it up per interval (see BackupLease).
const counterLastBackup = "lastBackup"

// BackupLease takes the volume's backup lease when the last automatic
// backup started interval or more ago (or never): the counter holding its
// start time is read and advanced to now in one transaction, so of several
// clients trying at once exactly one wins, and the others see the new time
// until interval has passed again. A start time in the future (a client
// with a clock ahead) does not block the lease. A read-only client never
// takes it. The lease is taken before the backup runs: a backup that fails
// is tried again only after the next interval, as a crashed one is. When
// it wins, it returns the start time it stored (whole seconds), which
// names the backup.
func (s *Session) BackupLease(ctx context.Context, interval time.Duration) (time.Time, bool, error) {
	c := s.Client
	if c.conf.ReadOnly {
		return time.Time{}, false, nil
	}
	return c.lease(ctx, counterLastBackup, interval)
}

// lease takes a volume-wide lease kept in counter: when the time it holds
// (unix seconds, the lease's last start by any client) is interval or
// more ago, was never set, or is in the future (a client whose clock ran ahead), it is
// advanced to now in one transaction, so of several clients trying at
// once exactly one wins. When it wins it returns the time it stored.
func (c *Client) lease(ctx context.Context, counter string, interval time.Duration) (time.Time, bool, error) {
	var won bool
	var now int64
	err := c.st.Update(ctx, func(tx store.Tx) error {
		won = false
		now = c.conf.Now().Unix()
		last, err := tx.Counter(counter)
		if err != nil {
			return err
		}
		if d := now - last; last != 0 && d >= 0 && d < int64(interval/time.Second) {
			return nil
		}
		tx.SetCounter(counter, now)
		won = true
		return nil
	})
	if err != nil || !won {
		return time.Time{}, false, err
	}
	return time.Unix(now, 0), true, nil
}
