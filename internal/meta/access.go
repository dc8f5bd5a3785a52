package meta

import (
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Access masks, as in access(2).
const (
	MayRead  = 4
	MayWrite = 2
	MayExec  = 1
)

// Node flags (the chattr bits a file system keeps).
const (
	FlagImmutable = 1
	FlagAppend    = 2
	// FlagSkipTrash is JuiceFS's mark of a file that skips the trash,
	// kept from a loaded dump so that dumping again loses nothing; Sluice
	// does not act on it.
	FlagSkipTrash = 8
)

// Mode bits beyond the permission bits.
const (
	modeSetuid = 0o4000
	modeSetgid = 0o2000
	modeSticky = 0o1000
)

// permits applies the classic owner/group/other check of mask against n.
func permits(c Cred, n *Attr, mask uint32) bool {
	if c.IsRoot() {
		// Root may do anything but execute a file nobody may execute.
		return mask&MayExec == 0 || n.Type == store.TypeDir || n.Mode&0o111 != 0
	}
	var bits uint32
	switch {
	case c.Uid == n.Uid:
		bits = uint32(n.Mode>>6) & 7
	case c.InGroup(n.Gid):
		bits = uint32(n.Mode>>3) & 7
	default:
		bits = uint32(n.Mode) & 7
	}
	return bits&mask == mask
}

// checkAccess checks mask for the caller on n, honouring n's access ACL.
func checkAccess(tx store.Tx, c Cred, n *Attr, mask uint32) error {
	if !c.IsRoot() && n.Flags&FlagACL != 0 {
		a, err := loadACL(tx, n, XattrACLAccess)
		if err != nil {
			return err
		}
		if a != nil {
			if a.permits(c, n, mask) {
				return nil
			}
			return syscall.EACCES
		}
	}
	if !permits(c, n, mask) {
		return syscall.EACCES
	}
	return nil
}

// checkSticky enforces the sticky bit of dir for removing or replacing
// victim: only the owner of the file or of the directory (or root) may.
func checkSticky(c Cred, dir, victim *Attr) error {
	if dir.Mode&modeSticky != 0 && !c.IsRoot() && c.Uid != dir.Uid && c.Uid != victim.Uid {
		return syscall.EPERM
	}
	return nil
}

// checkDirWrite checks that a caller may add or remove entries of dir.
func checkDirWrite(tx store.Tx, c Cred, dir *Attr) error {
	if dir.Type != store.TypeDir {
		return syscall.ENOTDIR
	}
	if dir.Flags&(FlagImmutable|FlagAppend) != 0 {
		return syscall.EPERM
	}
	return checkAccess(tx, c, dir, MayWrite|MayExec)
}

// validName rejects names a directory may not hold.
func checkName(name []byte) error {
	if len(name) == 0 {
		return syscall.ENOENT
	}
	if len(name) > 255 {
		return syscall.ENAMETOOLONG
	}
	for _, b := range name {
		if b == '/' || b == 0 {
			return syscall.EINVAL
		}
	}
	return nil
}

func isDot(name []byte) bool {
	return string(name) == "." || string(name) == ".."
}

// stamp returns the time of the client's clock (Config.Now) split as the
// records keep it.
func (c *Client) stamp() (int64, uint32) {
	now := c.conf.Now()
	return now.Unix(), uint32(now.Nanosecond())
}

func touchMtime(n *Attr, sec int64, nsec uint32) {
	n.Mtime, n.Mtimensec = sec, nsec
	n.Ctime, n.Ctimensec = sec, nsec
}

// touchDir stamps a directory whose entries changed and stores it, unless
// its times were stamped less than Config.DirMtimeSkip ago and its link
// count is unchanged: then the record is only read, so a burst of creates
// in one directory (from one mount or several) does not write, and
// conflict on, one hot record for every entry.
func (c *Client) touchDir(tx store.Tx, dir *Attr, sec int64, nsec uint32, nlinkChanged bool) {
	if !nlinkChanged && c.conf.DirMtimeSkip > 0 {
		age := time.Unix(sec, int64(nsec)).Sub(time.Unix(dir.Mtime, int64(dir.Mtimensec)))
		if age >= 0 && age < c.conf.DirMtimeSkip {
			return
		}
	}
	touchMtime(dir, sec, nsec)
	tx.SetNode(dir)
}

func touchCtime(n *Attr, sec int64, nsec uint32) {
	n.Ctime, n.Ctimensec = sec, nsec
}

// SpaceOf is the space an inode is charged in the volume's usage: its
// length rounded up to 4 KiB for a file, at least 4 KiB; 4 KiB for the
// others.
func SpaceOf(n *Attr) int64 {
	if n.Type == store.TypeFile {
		return align4K(n.Length)
	}
	return align4K(0)
}

// align4K is the space a file of length bytes is charged.
func align4K(length uint64) int64 {
	if length == 0 {
		return 4096
	}
	return int64((length + 4095) &^ 4095)
}

// writable fails with EROFS on a read-only client. Every call that changes
// the volume for a caller starts with it, so it also counts those calls
// (Client.changes), which the background deletion round yields to.
func (c *Client) writable() error {
	if c.conf.ReadOnly {
		return syscall.EROFS
	}
	c.changes.Add(1)
	return nil
}
