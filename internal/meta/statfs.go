package meta

import (
	"context"
	"math"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// unlimited is what statfs reports for a volume without a capacity: 1 PiB.
const unlimited = 1 << 50

// StatFS describes the volume's space and inodes.
type StatFS struct {
	TotalSpace, AvailSpace  uint64
	UsedInodes, AvailInodes uint64
}

// usageTx returns the space and inodes in use: the shared counters plus
// this client's deltas not yet flushed. Inside a transaction it may miss
// deltas a concurrent flush is committing; usage does not.
func (c *Client) usageTx(tx store.Tx) (space, inodes int64, err error) {
	if space, err = tx.Counter(CounterUsedSpace); err != nil {
		return 0, 0, err
	}
	if inodes, err = tx.Counter(CounterUsedInodes); err != nil {
		return 0, 0, err
	}
	return space + c.usedSpace.Load(), inodes + c.usedInodes.Load(), nil
}

func (c *Client) usage(ctx context.Context) (space, inodes int64, err error) {
	c.flushMu.RLock()
	defer c.flushMu.RUnlock()
	err = c.st.View(ctx, func(tx store.Tx) error {
		space, inodes, err = c.usageTx(tx)
		return err
	})
	return space, inodes, err
}

// StatFS returns the volume's capacity and usage. Usage counters are shared
// through the engine about once a second, so another mount's writes show
// up with that delay.
func (c *Client) StatFS(ctx context.Context) (StatFS, error) {
	space, inodes, err := c.usage(ctx)
	if err != nil {
		return StatFS{}, err
	}
	space, inodes = max(space, 0), max(inodes, 0)
	var st StatFS
	f := c.current()
	st.TotalSpace = f.Capacity
	if st.TotalSpace == 0 {
		st.TotalSpace = roomFor(unlimited, uint64(space))
	}
	if uint64(space) < st.TotalSpace {
		st.AvailSpace = st.TotalSpace - uint64(space)
	}
	st.UsedInodes = uint64(inodes)
	total := f.Inodes
	if total == 0 {
		total = roomFor(10<<20, uint64(inodes))
	}
	if uint64(inodes) < total {
		st.AvailInodes = total - uint64(inodes)
	}
	return st, nil
}

// roomFor doubles total until used is at most 80% of it, stopping before
// it would overflow: sparse files can make used space near 2^63 (stress-ng's
// fsize stressor did, and total*8 wrapped around, looping for ever).
func roomFor(total, used uint64) uint64 {
	for total/10*8 < used && total <= math.MaxUint64/2 {
		total *= 2
	}
	return total
}

// checkSpaceQuota refuses growth past the volume's capacity.
func (c *Client) checkSpaceQuota(tx store.Tx, grow int64) error {
	capacity := c.current().Capacity
	if capacity == 0 || grow <= 0 {
		return nil
	}
	space, _, err := c.usageTx(tx)
	if err != nil {
		return err
	}
	if uint64(space+grow) > capacity {
		return syscall.ENOSPC
	}
	return nil
}

// checkInodeQuota refuses a new inode past the volume's inode limit.
func (c *Client) checkInodeQuota(ctx context.Context) error {
	limit := c.current().Inodes
	if limit == 0 {
		return nil
	}
	_, inodes, err := c.usage(ctx)
	if err != nil {
		return err
	}
	if uint64(inodes) >= limit {
		return syscall.ENOSPC
	}
	return nil
}
