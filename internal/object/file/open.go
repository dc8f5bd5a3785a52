package file

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// openFile is os.OpenFile for the bucket's regular files, in two system
// calls rather than six: os.OpenFile tries to add every file it opens to
// the runtime's poller, which a regular file refuses, at the cost of four
// fcntl(2) and a failed epoll_ctl(2). A small file's block is written or
// read in a handful of calls, so those were half of them. os.NewFile
// leaves the descriptor out of the poller (one fcntl to see that it is
// blocking). Errors are *fs.PathError, as os.OpenFile's.
func openFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(name, flag|unix.O_CLOEXEC, uint32(perm.Perm()))
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}
