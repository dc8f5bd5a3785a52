// Package localdir makes the directories that hold many unrelated files on
// a local file system: a local-directory bucket's blocks and a disk cache's.
//
// Such a tree gains a directory every thousand blocks or so, and loses
// files all the time as blocks are deleted or evicted. On ext4 (and ext2/3)
// a new directory goes, by default, to the block group of its parent, and
// its files to the first group of that directory's flex group with a free
// inode. Without a journal, ext4 will not reuse an inode freed less than a
// minute ago (five, while its inode table block is dirty) and checks every
// such inode it passes while it looks for a free one, so after a volume
// deleted thousands of blocks, each new block file in a directory placed
// among them costs hundreds of microseconds of that search instead of
// twenty-odd (measured when this was built). MkdirAll marks each directory it makes
// a directory in as the top of a directory hierarchy (FS_TOPDIR_FL, what
// chattr +T sets): ext4's Orlov allocator then spreads its subdirectories
// over the groups with more free inodes and fewer directories than the
// average, which is what unrelated block directories want anyway. File
// systems without the flag ignore the mark.
package localdir

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// fsTopdirFL is FS_TOPDIR_FL of linux/fs.h: "top of directory
// hierarchies".
const fsTopdirFL = 0x00020000

// MkdirAll makes dir and its missing parents with mode perm, as
// os.MkdirAll does, and before it makes a directory whose parent lies
// strictly under root it marks that parent with Spread. root itself, and
// directories above it, are never marked: they belong to the user.
func MkdirAll(root, dir string, perm fs.FileMode) error {
	return mkdirAll(filepath.Clean(root), filepath.Clean(dir), perm)
}

func mkdirAll(root, dir string, perm fs.FileMode) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if fi.IsDir() {
			return nil
		}
		return &fs.PathError{Op: "mkdir", Path: dir, Err: unix.ENOTDIR}
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAll(root, parent, perm); err != nil {
			return err
		}
	}
	if under(root, parent) {
		Spread(parent)
	}
	err = os.Mkdir(dir, perm)
	if err != nil {
		// Made meanwhile by another goroutine or process, as os.MkdirAll
		// allows.
		if fi, lerr := os.Lstat(dir); lerr == nil && fi.IsDir() {
			return nil
		}
		return err
	}
	return nil
}

// Spread marks dir as the top of a directory hierarchy (FS_TOPDIR_FL),
// so that ext4 spreads the directories made in it over its block groups
// rather than packing them near dir. It is a hint: a file system without
// the flag, or a directory the process may not change, is left as it is.
func Spread(dir string) {
	_, _ = topdir(dir, true)
}

// Spreads reports whether dir is marked by Spread. An error means the file
// system keeps no such flags.
func Spreads(dir string) (bool, error) {
	return topdir(dir, false)
}

// Probe reports, with an error, when the file system of dir does not
// keep the mark Spread sets (ext2/3/4 do; tmpfs and FUSE do not): it makes a
// scratch directory in dir, marks it and removes it.
func Probe(dir string) error {
	d, err := os.MkdirTemp(dir, ".localdir-probe.")
	if err != nil {
		return err
	}
	defer os.Remove(d)
	_, err = topdir(d, true)
	return err
}

// topdir reports whether dir has FS_TOPDIR_FL, having set it first when
// set is true and it had not.
func topdir(dir string, set bool) (bool, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err != nil || flags&fsTopdirFL != 0 || !set {
		return flags&fsTopdirFL != 0, err
	}
	if err := unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags|fsTopdirFL)); err != nil {
		return false, err
	}
	return true, nil
}

// under reports whether path lies strictly under root (both clean).
func under(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
