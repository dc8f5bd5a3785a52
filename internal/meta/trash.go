package meta

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// The trash. On a volume formatted with TrashDays > 0, removing the last
// name of a non-directory (unlink, or rename over it) does not delete it:
// the inode moves, data and all, to
//
//	/.trash/<YYYY-MM-DD-HH, UTC>/<parent ino>-<ino>-<name>
//
// where root may restore it with a rename or delete it for good with an
// unlink. Hard-linked files (more than one name) just lose the name. A
// file unlinked while open moves to the trash like any other (it keeps a
// name, so nothing is sustained) and stays readable; if it expires while
// this client still holds it open, it is sustained until the last close.
// `.trash` is a directory at the root with a reserved inode, owned by root
// with mode 0555; its hour directories are created on demand with inodes
// derived from the hour, so creating one needs no id allocation and two
// clients creating the same one simply conflict and retry. Nothing can be
// created in, linked or renamed into the trash, and `.trash` itself can be
// neither removed, renamed nor replaced. Trash inodes are not counted in
// the volume's usage; the files in it are, until they expire.
//
// Once an hour directory is older than TrashDays (counted from the end of
// its hour), one client at a time (see cleanTrashLease) deletes its files,
// which queues their data as any deletion does, and then the directory.

const (
	// TrashIno is the inode of the .trash directory at the root.
	TrashIno Ino = 0x7FFFFFFF10000000
	// TrashName is the name of the trash directory in the root.
	TrashName = ".trash"
	// trashEnd bounds the inodes of the trash: TrashIno + 1 + hours since
	// the epoch numbers the hour directories.
	trashEnd = TrashIno + 1<<28
	// trashHourFormat names the hour directories (UTC).
	trashHourFormat = "2006-01-02-15"
	// trashCheckInterval is how often the volume's trash is expired.
	trashCheckInterval = time.Hour
	// counterTrashClean holds the unix time of the last trash expiry
	// started by any client: the lease that lets one client do it.
	counterTrashClean = "lastTrashClean"
)

// IsTrash reports whether ino is the trash directory or one of its hour
// directories.
func IsTrash(ino Ino) bool { return ino >= TrashIno && ino < trashEnd }

// isTrashEntry reports whether name in parent is the trash directory.
func isTrashEntry(parent Ino, name []byte) bool {
	return parent == RootIno && string(name) == TrashName
}

// checkNewEntry refuses names Sluice manages: .trash in the root and any
// name inside the trash.
func checkNewEntry(parent Ino, name []byte) error {
	if isTrashEntry(parent, name) || IsTrash(parent) {
		return syscall.EPERM
	}
	return nil
}

func (c *Client) trashEnabled() bool { return c.current().TrashDays > 0 }

// trashDirNode returns the attributes of a new trash directory.
func trashDirNode(ino, parent Ino, now time.Time) *Attr {
	sec, nsec := now.Unix(), uint32(now.Nanosecond())
	return &Attr{Ino: ino, Type: store.TypeDir, Mode: 0o555, Nlink: 2, Length: 4096, Parent: parent,
		Atime: sec, Mtime: sec, Ctime: sec, Atimensec: nsec, Mtimensec: nsec, Ctimensec: nsec}
}

// ensureTrashTx creates the .trash directory, stamped now, when it is
// missing. It reads the root through tx, so a caller must not store a copy
// of the root it read before.
func ensureTrashTx(tx store.Tx, now time.Time) error {
	if _, err := tx.Node(TrashIno); err == nil {
		return nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("read trash: %w", err)
	}
	rootNode, e, err := nodeEdge(tx, RootIno, []byte(TrashName))
	if err != nil {
		return err
	}
	if e.Ino != 0 && e.Ino != TrashIno {
		return fmt.Errorf("root holds an entry %s (inode %d) where the trash belongs: rename it: %w", TrashName, e.Ino, syscall.EEXIST)
	}
	tx.SetNode(trashDirNode(TrashIno, RootIno, now))
	tx.SetEdge(RootIno, store.Edge{Name: []byte(TrashName), Ino: TrashIno, Type: store.TypeDir})
	rootNode.Nlink++
	touchMtime(rootNode, now.Unix(), uint32(now.Nanosecond()))
	tx.SetNode(rootNode)
	return nil
}

// TrashHourIno is the inode of the trash directory of the hour of t.
func TrashHourIno(t time.Time) Ino { return TrashIno + 1 + Ino(t.Unix()/3600) }

// trashHourDirTx returns the hour directory for now, creating it (and the
// trash) stamped now when missing.
func trashHourDirTx(tx store.Tx, now time.Time) (Ino, error) {
	t := now.UTC()
	ino := TrashHourIno(t)
	if _, err := tx.Node(ino); err == nil {
		return ino, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return 0, fmt.Errorf("read trash directory: %w", err)
	}
	if err := ensureTrashTx(tx, now); err != nil {
		return 0, err
	}
	trash, err := node(tx, TrashIno)
	if err != nil {
		return 0, err
	}
	tx.SetNode(trashDirNode(ino, TrashIno, now))
	tx.SetEdge(TrashIno, store.Edge{Name: []byte(t.Format(trashHourFormat)), Ino: ino, Type: store.TypeDir})
	trash.Nlink++
	touchMtime(trash, now.Unix(), uint32(now.Nanosecond()))
	tx.SetNode(trash)
	return ino, nil
}

// trashEntryName is the name a file removed as name from parent gets in
// the trash, cut to 255 bytes.
func trashEntryName(parent, ino Ino, name []byte) []byte {
	b := strconv.AppendUint(nil, uint64(parent), 10)
	b = append(b, '-')
	b = strconv.AppendUint(b, uint64(ino), 10)
	b = append(b, '-')
	b = append(b, name...)
	if len(b) > 255 {
		b = b[:255]
	}
	return b
}

// moveToTrash gives n, whose last name (name in parent) the caller has
// removed, a name in the current hour's trash directory instead.
func (c *Client) moveToTrash(tx store.Tx, parent Ino, name []byte, n *Attr) error {
	dir, err := trashHourDirTx(tx, c.conf.Now())
	if err != nil {
		return err
	}
	tx.SetEdge(dir, store.Edge{Name: trashEntryName(parent, n.Ino, name), Ino: n.Ino, Type: n.Type})
	n.Parent = dir
	tx.SetNode(n)
	return nil
}

// cleanTrash deletes the trash hour directories older than the volume's
// TrashDays and the files in them, now. Mounts run it about once an hour
// through a lease, so that one client of the volume does it at a time.
func (c *Client) cleanTrash(ctx context.Context) error {
	c.recent.forget() // see recentDirs: before, and after the change commits
	defer c.recent.forget()
	if err := c.writable(); err != nil {
		return err
	}
	now := c.conf.Now()
	keep := time.Duration(c.current().TrashDays) * 24 * time.Hour
	var after []byte
	for {
		var es []store.Edge
		err := c.st.View(ctx, func(tx store.Tx) error {
			var err error
			es, err = tx.Edges(TrashIno, after, 1000)
			return err
		})
		if err != nil {
			return fmt.Errorf("list trash: %w", err)
		}
		for _, e := range es {
			t, err := time.Parse(trashHourFormat, string(e.Name))
			if err != nil || e.Type != store.TypeDir || t.Add(time.Hour+keep).After(now) {
				continue
			}
			if err := c.emptyTrashDir(ctx, e); err != nil {
				return fmt.Errorf("expire trash %s: %w", e.Name, err)
			}
		}
		if len(es) < 1000 {
			return nil
		}
		after = es[len(es)-1].Name
	}
}

// emptyTrashDir deletes the files of one hour directory in batches, then
// the directory.
func (c *Client) emptyTrashDir(ctx context.Context, hour store.Edge) error {
	for {
		var done bool
		var r removal
		err := c.st.Update(ctx, func(tx store.Tx) error {
			r, done = removal{}, false
			es, err := tx.Edges(hour.Ino, nil, c.batch.trash)
			if err != nil {
				return err
			}
			for _, e := range es {
				n, err := tx.Node(e.Ino)
				tx.DeleteEdge(hour.Ino, e.Name)
				if errors.Is(err, store.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				if err := c.dropLink(tx, hour.Ino, e.Name, n, &r); err != nil {
					return err
				}
			}
			if len(es) > 0 {
				return nil
			}
			done = true
			return c.removeTrashDirTx(tx, hour)
		})
		if err != nil {
			return err
		}
		c.applyRemoval(&r)
		if done {
			return nil
		}
	}
}

// removeTrashDirTx deletes an empty hour directory.
func (c *Client) removeTrashDirTx(tx store.Tx, hour store.Edge) error {
	trash, err := node(tx, TrashIno)
	if err != nil {
		return err
	}
	if e, err := tx.Edge(TrashIno, hour.Name); err != nil || e.Ino != hour.Ino {
		return nil // removed meanwhile
	}
	tx.DeleteEdge(TrashIno, hour.Name)
	tx.DeleteNode(hour.Ino)
	trash.Nlink--
	sec, nsec := c.stamp()
	touchMtime(trash, sec, nsec)
	tx.SetNode(trash)
	return nil
}

// cleanTrashLease takes the volume's trash-expiry lease when the last
// expiry started more than trashCheckInterval ago: the counter holding its
// start time is read and advanced in one transaction, so of several
// clients trying at once exactly one wins.
func (c *Client) cleanTrashLease(ctx context.Context) (bool, error) {
	_, won, err := c.lease(ctx, counterTrashClean, trashCheckInterval)
	return won, err
}

// expireTrash reloads the volume's settings (ReloadFormat: a re-format may
// have changed TrashDays since the last heartbeat), then runs CleanTrash
// when it is due and this client wins the volume's lease for it (see
// cleanTrashLease), and reports whether it ran. Every mount calls it
// about once a minute.
func (c *Client) expireTrash(ctx context.Context) (bool, error) {
	c.recent.forget() // see recentDirs: before, and after the change commits
	defer c.recent.forget()
	if c.conf.ReadOnly {
		return false, nil
	}
	if err := c.reloadFormat(ctx); err != nil {
		return false, fmt.Errorf("reload volume settings: %w", err)
	}
	won, err := c.cleanTrashLease(ctx)
	if err != nil || !won {
		return false, err
	}
	return true, c.cleanTrash(ctx)
}
