package meta

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Lock types, as fcntl(2) and flock(2) use them.
const (
	LockRead   = syscall.F_RDLCK
	LockWrite  = syscall.F_WRLCK
	LockUnlock = syscall.F_UNLCK
)

// LockEnd is the End of a range that reaches the end of the file.
const LockEnd = 1<<63 - 1

// PosixLock is one byte-range lock: bytes Start to End inclusive.
type PosixLock struct {
	Start, End uint64
	Type       uint32
	Pid        uint32
}

func (l PosixLock) overlaps(o PosixLock) bool { return l.Start <= o.End && o.Start <= l.End }

// Locks are held by (session, owner) pairs recorded in the engine, so they
// hold across mounts; a waiter polls with backoff, because engines have no
// common way to notify.
const (
	lockPollMin = time.Millisecond
	lockPollMax = 100 * time.Millisecond
)

// waitLock retries try while it reports a conflict (EAGAIN) and block is
// set, until ctx ends (EINTR). try is told whether it is a retry.
func waitLock(ctx context.Context, block bool, try func(retry bool) error) error {
	delay := lockPollMin
	for retry := false; ; retry = true {
		err := try(retry)
		if block && ctx.Err() != nil {
			return syscall.EINTR
		}
		if err != syscall.EAGAIN || !block {
			return err
		}
		select {
		case <-ctx.Done():
			return syscall.EINTR
		case <-time.After(delay):
		}
		delay = min(delay*2, lockPollMax)
	}
}

// stillRegistered fails with ENOLCK when this client's session is no
// longer registered: another client cleaned it up as dead or stale while
// a lock wait of it went on. The lock must not be taken then: nobody
// would ever release it, as no session record leads to it. (On the
// metadata server a wait goes on for a mount that died: see
// Client.cleanDeadLocalSessions.) Each retry of a wait checks it, in the
// transaction that would take the lock.
func (c *Client) stillRegistered(tx store.Tx) error {
	ss, err := tx.Sessions()
	if err != nil {
		return err
	}
	for _, s := range ss {
		if s.Sid == c.sid {
			return nil
		}
	}
	return fmt.Errorf("session %d was cleaned up during a lock wait: %w", c.sid, syscall.ENOLCK)
}

// Flock applies flock(2) of typ (LockRead, LockWrite, LockUnlock) for owner
// on ino. A conflicting lock of another owner, on any mount, makes it fail
// with EAGAIN, or wait when block is set. A lock taken returns the file's
// attributes as of the transaction that took it, so that the caller can
// tell, without another round trip, whether the file changed since it
// last looked (lock-to-read coherence); an unlock returns nil.
func (c *Client) Flock(ctx context.Context, ino Ino, owner uint64, typ uint32, block bool) (*Attr, error) {
	if err := c.writable(); err != nil {
		return nil, err
	}
	me := store.LockRecord{Sid: c.sid, Owner: owner}
	var out *Attr
	err := waitLock(ctx, block, func(retry bool) error {
		return c.st.Update(ctx, func(tx store.Tx) error {
			n, err := node(tx, ino)
			if err != nil {
				return err
			}
			out = n
			if retry {
				if err := c.stillRegistered(tx); err != nil {
					return err
				}
			}
			if typ == LockUnlock {
				tx.SetLock(ino, store.LockFlock, me)
				return nil
			}
			held, err := tx.Locks(ino, store.LockFlock)
			if err != nil {
				return err
			}
			for _, h := range held {
				mine := h.Sid == me.Sid && h.Owner == me.Owner
				if !mine && len(h.Data) == 1 && (typ == LockWrite || uint32(h.Data[0]) == LockWrite) {
					return syscall.EAGAIN
				}
			}
			tx.SetLock(ino, store.LockFlock, store.LockRecord{Sid: me.Sid, Owner: me.Owner, Data: []byte{byte(typ)}})
			tx.SetLockedInode(me.Sid, ino, true)
			return nil
		})
	})
	if err != nil || typ == LockUnlock {
		return nil, err
	}
	return out, nil
}

// GetLk returns the first lock of another owner that conflicts with lk, or
// lk with Type LockUnlock when there is none, as F_GETLK does.
func (c *Client) GetLk(ctx context.Context, ino Ino, owner uint64, lk PosixLock) (PosixLock, error) {
	out := PosixLock{Type: LockUnlock}
	err := c.st.View(ctx, func(tx store.Tx) error {
		held, err := tx.Locks(ino, store.LockPosix)
		if err != nil {
			return err
		}
		out = PosixLock{Type: LockUnlock}
		for _, h := range held {
			if h.Sid == c.sid && h.Owner == owner {
				continue
			}
			ranges, err := decodeRanges(h.Data)
			if err != nil {
				return fmt.Errorf("inode %d: %w", ino, err)
			}
			for _, r := range ranges {
				if r.overlaps(lk) && (lk.Type == LockWrite || r.Type == LockWrite) {
					out = r
					return nil
				}
			}
		}
		return nil
	})
	return out, err
}

// SetLk applies a POSIX record lock (F_SETLK, or F_SETLKW with block) for
// owner on ino. Like Flock, a lock taken returns the file's attributes as
// of the transaction that took it; an unlock returns nil.
func (c *Client) SetLk(ctx context.Context, ino Ino, owner uint64, lk PosixLock, block bool) (*Attr, error) {
	if err := c.writable(); err != nil {
		return nil, err
	}
	if lk.Start > lk.End {
		return nil, syscall.EINVAL
	}
	if lk.Type != LockUnlock {
		c.mu.Lock()
		c.mu.posix[ino] = true
		c.mu.Unlock()
	}
	var out *Attr
	err := waitLock(ctx, block, func(retry bool) error {
		return c.st.Update(ctx, func(tx store.Tx) error {
			n, err := node(tx, ino)
			if err != nil {
				return err
			}
			out = n
			if retry {
				if err := c.stillRegistered(tx); err != nil {
					return err
				}
			}
			held, err := tx.Locks(ino, store.LockPosix)
			if err != nil {
				return err
			}
			var mine []PosixLock
			for _, h := range held {
				ranges, err := decodeRanges(h.Data)
				if err != nil {
					return fmt.Errorf("inode %d: %w", ino, err)
				}
				if h.Sid == c.sid && h.Owner == owner {
					mine = ranges
					continue
				}
				if lk.Type == LockUnlock {
					continue
				}
				for _, r := range ranges {
					if r.overlaps(lk) && (lk.Type == LockWrite || r.Type == LockWrite) {
						return syscall.EAGAIN
					}
				}
			}
			mine = applyRange(mine, lk)
			tx.SetLock(ino, store.LockPosix, store.LockRecord{Sid: c.sid, Owner: owner, Data: encodeRanges(mine)})
			if len(mine) > 0 {
				tx.SetLockedInode(c.sid, ino, true)
			}
			return nil
		})
	})
	if err != nil || lk.Type == LockUnlock {
		return nil, err
	}
	return out, nil
}

// ReleaseLocks drops the POSIX locks owner holds on ino, as closing any of
// a process's descriptors of a file does.
func (c *Client) ReleaseLocks(ctx context.Context, ino Ino, owner uint64) error {
	if c.conf.ReadOnly {
		return nil
	}
	c.mu.Lock()
	held := c.mu.posix[ino]
	c.mu.Unlock()
	if !held {
		return nil // no record of this session on ino
	}
	return c.st.Update(ctx, func(tx store.Tx) error {
		tx.SetLock(ino, store.LockPosix, store.LockRecord{Sid: c.sid, Owner: owner})
		return nil
	})
}

// applyRange sets lk over the owner's ranges: the part of older ranges it
// covers is replaced (or removed, for LockUnlock).
func applyRange(ranges []PosixLock, lk PosixLock) []PosixLock {
	var out []PosixLock
	for _, r := range ranges {
		if !r.overlaps(lk) {
			out = append(out, r)
			continue
		}
		if r.Start < lk.Start {
			left := r
			left.End = lk.Start - 1
			out = append(out, left)
		}
		if r.End > lk.End {
			right := r
			right.Start = lk.End + 1
			out = append(out, right)
		}
	}
	if lk.Type != LockUnlock {
		out = append(out, lk)
	}
	slices.SortFunc(out, func(a, b PosixLock) int {
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	// Merge neighbours of the same type.
	merged := out[:0]
	for _, r := range out {
		if n := len(merged); n > 0 && merged[n-1].Type == r.Type && merged[n-1].End != LockEnd && merged[n-1].End+1 >= r.Start {
			merged[n-1].End = max(merged[n-1].End, r.End)
			continue
		}
		merged = append(merged, r)
	}
	return merged
}

const rangeSize = 8 + 8 + 4 + 4

func encodeRanges(rs []PosixLock) []byte {
	b := make([]byte, 0, len(rs)*rangeSize)
	for _, r := range rs {
		b = binary.BigEndian.AppendUint64(b, r.Start)
		b = binary.BigEndian.AppendUint64(b, r.End)
		b = binary.BigEndian.AppendUint32(b, r.Type)
		b = binary.BigEndian.AppendUint32(b, r.Pid)
	}
	return b
}

func decodeRanges(b []byte) ([]PosixLock, error) {
	if len(b)%rangeSize != 0 {
		return nil, fmt.Errorf("corrupt lock record (%d bytes)", len(b))
	}
	out := make([]PosixLock, len(b)/rangeSize)
	for i := range out {
		p := b[i*rangeSize:]
		out[i] = PosixLock{Start: binary.BigEndian.Uint64(p), End: binary.BigEndian.Uint64(p[8:]),
			Type: binary.BigEndian.Uint32(p[16:]), Pid: binary.BigEndian.Uint32(p[20:])}
	}
	return out, nil
}
