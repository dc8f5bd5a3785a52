package e2e

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestTmpfile opens unnamed files with O_TMPFILE through a mount (as
// xfstests generic/004 and 531 do): one is written, read, fstat shows no
// link, linkat(AT_EMPTY_PATH) names it and its content is there by name,
// also after a remount; one is named through /proc/self/fd; one closed
// without a name leaves no file, and its inode and space are free again;
// one opened with O_EXCL cannot be named.
func TestTmpfile(t *testing.T) {
	for _, engine := range overlayEngines {
		t.Run(engine, func(t *testing.T) {
			v := newVolumeOn(t, engine)
			v.mount(t)
			dir := v.path("d")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			data := bytes.Repeat([]byte("tmpfile "), 100000)

			fd := openTmpfile(t, dir, 0)
			if _, err := unix.Pwrite(fd, data, 0); err != nil {
				t.Fatalf("write: %v", err)
			}
			wantLinks(t, fd, 0)
			if err := unix.Fsync(fd); err != nil {
				t.Fatalf("fsync: %v", err)
			}
			got := make([]byte, len(data))
			if n, err := unix.Pread(fd, got, 0); err != nil || n != len(data) || !bytes.Equal(got, data) {
				t.Fatalf("read back %d bytes, %v; want what was written", n, err)
			}
			if err := unix.Linkat(fd, "", unix.AT_FDCWD, v.path("d/named"), unix.AT_EMPTY_PATH); err != nil {
				t.Fatalf("linkat AT_EMPTY_PATH: %v", err)
			}
			wantLinks(t, fd, 1)
			unix.Close(fd)

			fd = openTmpfile(t, dir, 0)
			if _, err := unix.Write(fd, []byte("through proc")); err != nil {
				t.Fatal(err)
			}
			proc := fmt.Sprintf("/proc/self/fd/%d", fd)
			if err := unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, v.path("proc"), unix.AT_SYMLINK_FOLLOW); err != nil {
				t.Fatalf("linkat %s AT_SYMLINK_FOLLOW: %v", proc, err)
			}
			unix.Close(fd)

			fd = openTmpfile(t, dir, unix.O_EXCL)
			wantErrno(t, "linkat of an O_EXCL tmpfile",
				unix.Linkat(fd, "", unix.AT_FDCWD, v.path("d/excl"), unix.AT_EMPTY_PATH), syscall.ENOENT)
			unix.Close(fd)

			// close(2) does not wait for the kernel's RELEASE: the usage
			// is checked as it settles.
			used := func(st unix.Statfs_t) uint64 { return st.Files - st.Ffree }
			before := waitStatfs(t, v.mnt, "with the O_EXCL tmpfile released", func(st unix.Statfs_t) bool {
				return used(st) == 3 // d, named, proc
			})
			fd = openTmpfile(t, dir, 0)
			if _, err := unix.Pwrite(fd, data, 0); err != nil {
				t.Fatalf("write: %v", err)
			}
			if err := unix.Fsync(fd); err != nil {
				t.Fatalf("fsync: %v", err)
			}
			waitStatfs(t, v.mnt, "with a tmpfile open", func(st unix.Statfs_t) bool {
				return used(st) == 4 && (before.Bfree-st.Bfree)*uint64(st.Bsize) >= uint64(len(data))
			})
			unix.Close(fd)
			waitStatfs(t, v.mnt, "after closing the tmpfile", func(st unix.Statfs_t) bool {
				return st.Ffree == before.Ffree && st.Bfree == before.Bfree
			})

			check := func(when string) {
				t.Helper()
				names, err := readDirNames(dir)
				if err != nil || len(names) != 1 || names[0] != "named" {
					t.Errorf("%s: d lists %q, %v; want only the named tmpfile", when, names, err)
				}
				if got, err := os.ReadFile(v.path("d/named")); err != nil || !bytes.Equal(got, data) {
					t.Errorf("%s: the named tmpfile reads %d bytes, %v; want %d", when, len(got), err, len(data))
				}
				if got := readFile(t, v.path("proc")); got != "through proc" {
					t.Errorf("%s: the tmpfile named through /proc reads %q", when, got)
				}
				var st unix.Stat_t
				if err := unix.Stat(v.path("d/named"), &st); err != nil || st.Nlink != 1 || st.Mode != unix.S_IFREG|0o600 {
					t.Errorf("%s: the named tmpfile has nlink %d mode %o, %v; want 1 and a 0600 regular file", when, st.Nlink, st.Mode, err)
				}
			}
			check("mounted")
			v.umount(t)
			v.mount(t)
			check("mounted again")
		})
	}
}

// openTmpfile opens an unnamed file in dir with O_TMPFILE|O_RDWR|flags,
// mode 0600.
func openTmpfile(t *testing.T, dir string, flags int) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|flags, 0o600)
	if err != nil {
		t.Fatalf("open %s with O_TMPFILE: %v", dir, err)
	}
	return fd
}

// waitStatfs returns the statfs of mnt once ok accepts it, and fails t
// when it has not within 10 seconds.
func waitStatfs(t *testing.T, mnt, what string, ok func(unix.Statfs_t) bool) unix.Statfs_t {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := statfs(t, mnt)
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: statfs shows %d of %d inodes and %d of %d blocks free", what, st.Ffree, st.Files, st.Bfree, st.Blocks)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wantLinks fails t unless fstat of fd shows n links.
func wantLinks(t *testing.T, fd int, n uint64) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatalf("fstat: %v", err)
	}
	if uint64(st.Nlink) != n {
		t.Errorf("fstat shows nlink %d, want %d", st.Nlink, n)
	}
}
