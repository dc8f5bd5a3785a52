package cache

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// statfs returns the bytes available to unprivileged users and the total
// size of the file system holding path.
func statfs(path string) (avail, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}
