package e2e

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// overlayEngines are the engines the whiteout and O_TMPFILE tests run
// on: one the mount runs the POSIX core over, and the metadata server,
// where the core runs on the server.
var overlayEngines = []string{"sqlite3", "sluice"}

// TestRenameWhiteout renames with RENAME_WHITEOUT through a mount, as
// overlayfs does in its upper directory: the name moves and a 0:0
// character device is left at the source; with NOREPLACE onto an
// existing name it fails with EEXIST and changes nothing; with EXCHANGE
// the kernel refuses it.
func TestRenameWhiteout(t *testing.T) {
	for _, engine := range overlayEngines {
		t.Run(engine, func(t *testing.T) {
			v := newVolumeOn(t, engine)
			v.mount(t)
			src, dst, other := v.path("src"), v.path("d/dst"), v.path("other")
			if err := os.Mkdir(v.path("d"), 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, src, []byte("moved"))
			write(t, other, []byte("other"))
			renameat2 := func(from, to string, flags uint) error {
				return unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, flags)
			}
			if err := renameat2(src, dst, unix.RENAME_WHITEOUT); err != nil {
				t.Fatalf("rename with RENAME_WHITEOUT: %v", err)
			}
			if got := readFile(t, dst); got != "moved" {
				t.Errorf("the moved file reads %q", got)
			}
			checkWhiteout(t, src)
			wantErrno(t, "RENAME_WHITEOUT|RENAME_NOREPLACE onto an existing name",
				renameat2(dst, other, unix.RENAME_WHITEOUT|unix.RENAME_NOREPLACE), syscall.EEXIST)
			wantErrno(t, "RENAME_WHITEOUT|RENAME_EXCHANGE",
				renameat2(dst, other, unix.RENAME_WHITEOUT|unix.RENAME_EXCHANGE), syscall.EINVAL)
			if got, want := readFile(t, dst), "moved"; got != want {
				t.Errorf("after the failures %s reads %q, want %q", dst, got, want)
			}
			if got, want := readFile(t, other), "other"; got != want {
				t.Errorf("after the failures %s reads %q, want %q", other, got, want)
			}
			// With NOREPLACE onto a free name, and over a whiteout (as
			// overlayfs renames a file back over one).
			if err := renameat2(dst, v.path("d/free"), unix.RENAME_WHITEOUT|unix.RENAME_NOREPLACE); err != nil {
				t.Fatalf("RENAME_WHITEOUT|RENAME_NOREPLACE onto a free name: %v", err)
			}
			checkWhiteout(t, dst)
			if err := renameat2(v.path("d/free"), src, unix.RENAME_WHITEOUT); err != nil {
				t.Fatalf("RENAME_WHITEOUT over a whiteout: %v", err)
			}
			checkWhiteout(t, v.path("d/free"))
			if got := readFile(t, src); got != "moved" {
				t.Errorf("the file moved back reads %q", got)
			}
			names, err := readDirNames(v.path("d"))
			if err != nil || len(names) != 2 {
				t.Errorf("d lists %q, %v; want the two whiteouts", names, err)
			}
		})
	}
}

// checkWhiteout fails t unless path is a whiteout: a character device
// 0:0 with no permission bits, owned by the caller (root).
func checkWhiteout(t *testing.T, path string) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatalf("stat the whiteout %s: %v", filepath.Base(path), err)
	}
	if st.Mode != unix.S_IFCHR || st.Rdev != 0 || st.Nlink != 1 || st.Uid != 0 || st.Gid != 0 {
		t.Errorf("%s: mode %o rdev %d nlink %d owner %d:%d, want a character device 0:0, mode 0, nlink 1, owned by root",
			filepath.Base(path), st.Mode, st.Rdev, st.Nlink, st.Uid, st.Gid)
	}
}
