package e2e

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// fileidIno64Gen is the handle type FUSE encodes for an inode without its
// parent (FILEID_INO64_GEN): the 64-bit node id, high half first, then
// the generation, as native-endian 32-bit words.
const fileidIno64Gen = 0x81

// handleOf returns the file handle of path, checking that it carries the
// inode number stat reports (FUSE node ids are Sluice inode numbers).
func handleOf(t *testing.T, path string) unix.FileHandle {
	t.Helper()
	// The mount id name_to_handle_at returns is not used: a handle is
	// opened through any descriptor of the mount it is opened on, and
	// these tests open handles on a later mount of the same volume.
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, path, 0)
	if err != nil {
		t.Fatalf("name_to_handle_at %s: %v", path, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	b := h.Bytes()
	if h.Type() != fileidIno64Gen || len(b) != 12 {
		t.Fatalf("handle of %s: type %#x, %d bytes; want FILEID_INO64_GEN, 12 bytes", path, h.Type(), len(b))
	}
	ino := uint64(binary.NativeEndian.Uint32(b[0:]))<<32 | uint64(binary.NativeEndian.Uint32(b[4:]))
	if ino != st.Ino {
		t.Fatalf("handle of %s holds node id %d, stat says inode %d", path, ino, st.Ino)
	}
	return h
}

// openByHandle opens h on the mount that mountDir is the root of.
func openByHandle(t *testing.T, mountDir string, h unix.FileHandle, flags int) (*os.File, error) {
	t.Helper()
	root, err := os.Open(mountDir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	fd, err := unix.OpenByHandleAt(int(root.Fd()), h, flags)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "handle"), nil
}

func fstatIno(t *testing.T, f *os.File) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatalf("fstat %s: %v", f.Name(), err)
	}
	return st.Ino
}

func statIno(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestFileHandles checks name_to_handle_at and open_by_handle_at
// (xfstests generic/426, 467, 477): handles taken on one mount open on a
// new mount of the volume, whose kernel never saw the inodes, so that
// the kernel must ask Sluice (FUSE_EXPORT_SUPPORT, a LOOKUP of "." on the
// handle's node id, and of ".." to connect a directory to the tree).
// Files and directories open, a directory's ".." is its parent, a file
// that lost one of its two names still opens, and a deleted file, in the
// trash or gone, gives ESTALE. It runs on SQLite and on the in-memory
// metadata server, which serves lookups and attributes remotely.
func TestFileHandles(t *testing.T) {
	for _, tc := range []struct {
		engine    string
		trashDays string
	}{
		{"sqlite3", "1"}, // a deleted file is in the trash
		{"sluice", "0"},  // a deleted file is gone
	} {
		t.Run(tc.engine+"/trash-days="+tc.trashDays, func(t *testing.T) {
			v := newVolumeOn(t, tc.engine, "--trash-days", tc.trashDays)
			v.mount(t)
			fileHandleCases(t, v)
		})
	}
}

func fileHandleCases(t *testing.T, v *volume) {
	if err := os.MkdirAll(v.path("a/b/c"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"a/b/f": "through a handle", "a/h": "two names", "a/gone": "deleted"} {
		write(t, v.path(name), []byte(data))
	}
	if err := os.Link(v.path("a/h"), v.path("a/b/c/h2")); err != nil {
		t.Fatal(err)
	}
	handles := map[string]unix.FileHandle{}
	inos := map[string]uint64{}
	for _, name := range []string{"a", "a/b", "a/b/c", "a/b/f", "a/h", "a/gone"} {
		handles[name] = handleOf(t, v.path(name))
		inos[name] = statIno(t, v.path(name))
	}
	if err := os.Remove(v.path("a/gone")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(v.path("a/h")); err != nil {
		t.Fatal(err)
	}
	// A new mount: its kernel has none of the inodes cached.
	v.umount(t)
	v.mount(t)

	t.Run("files", func(t *testing.T) {
		for _, tc := range []struct{ name, want string }{
			{"a/b/f", "through a handle"},
			{"a/h", "two names"}, // the name a/b/c/h2 is left
		} {
			f, err := openByHandle(t, v.mnt, handles[tc.name], os.O_RDONLY)
			if err != nil {
				t.Errorf("open_by_handle_at %s: %v", tc.name, err)
				continue
			}
			buf := make([]byte, 64)
			n, err := f.Read(buf)
			if err != nil || string(buf[:n]) != tc.want {
				t.Errorf("read %s through its handle: %q, %v; want %q", tc.name, buf[:n], err, tc.want)
			}
			if got := fstatIno(t, f); got != inos[tc.name] {
				t.Errorf("%s through its handle is inode %d, want %d", tc.name, got, inos[tc.name])
			}
			f.Close()
		}
	})
	t.Run("directories", func(t *testing.T) {
		for _, tc := range []struct {
			name, parent string
			entries      []string
		}{
			{"a/b/c", "a/b", []string{"h2"}},
			{"a/b", "a", []string{"c", "f"}},
			{"a", "", []string{"b"}},
		} {
			d, err := openByHandle(t, v.mnt, handles[tc.name], os.O_RDONLY|syscall.O_DIRECTORY)
			if err != nil {
				t.Errorf("open_by_handle_at %s: %v", tc.name, err)
				continue
			}
			names, err := d.Readdirnames(-1)
			slices.Sort(names)
			if err != nil || !slices.Equal(names, tc.entries) {
				t.Errorf("list %s through its handle: %q, %v; want %q", tc.name, names, err, tc.entries)
			}
			fd, err := unix.Openat(int(d.Fd()), "..", os.O_RDONLY|syscall.O_DIRECTORY, 0)
			if err != nil {
				t.Errorf("openat(handle of %s, \"..\"): %v", tc.name, err)
			} else {
				up := os.NewFile(uintptr(fd), filepath.Join(tc.name, ".."))
				if got, want := fstatIno(t, up), statIno(t, v.path(tc.parent)); got != want {
					t.Errorf("\"..\" of %s through its handle is inode %d, want %d (%s)", tc.name, got, want, tc.parent)
				}
				up.Close()
			}
			d.Close()
		}
	})
	t.Run("deleted", func(t *testing.T) {
		f, err := openByHandle(t, v.mnt, handles["a/gone"], os.O_RDONLY)
		if err == nil {
			f.Close()
		}
		wantErrno(t, "open_by_handle_at of a deleted file", err, syscall.ESTALE)
	})
}
