package e2e

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Unprivileged users of the permission tests, as in pjdfstest.
const (
	uidA, gidA = 65534, 65534
	uidB, gidB = 65533, 65533
)

// TestPOSIXOtherUser checks, as users other than root, the permission
// rules the kernel must enforce even for names and attributes it has
// cached: search permission on every directory of a path, the mode of a
// FIFO (which the kernel opens without asking the file system), and a
// write to a setuid file by someone else (which clears setuid and setgid).
// The mount caches names and attributes for an hour, so every step after
// the first finds what it needs in the kernel's caches. It runs on a
// volume without ACLs and on one with them (where the kernel checks ACLs
// too).
func TestPOSIXOtherUser(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format []string
	}{{"plain", nil}, {"acl", []string{"--enable-acl"}}} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVolume(t, tc.format...)
			v.mount(t, "--attr-cache", "3600", "--entry-cache", "3600", "--dir-entry-cache", "3600")
			t.Run("search permission", func(t *testing.T) { testSearchPermission(t, v.mnt) })
			t.Run("FIFO mode", func(t *testing.T) { testFIFOMode(t, v.mnt) })
			t.Run("write kills setuid", func(t *testing.T) { testWriteKillsSetID(t, v.mnt) })
			t.Run("execute-only program", func(t *testing.T) { testExecOnly(t, v.mnt) })
			t.Run("fallocate kills setuid and capabilities", func(t *testing.T) { testFallocateKillsPriv(t, v.mnt) })
		})
	}
}

// stat returns the attributes of path, failing t on error.
func stat(t *testing.T, path string) *syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return &st
}

func wantAs(t *testing.T, want syscall.Errno, uid, gid uint32, args ...string) {
	t.Helper()
	if got := asUID(t, uid, gid, args...); got != want {
		t.Errorf("as %d: %v: got %q (%d), want %q (%d)", uid, args, errnoText(got), got, errnoText(want), want)
	}
}

func errnoText(e syscall.Errno) string {
	if e == 0 {
		return "success"
	}
	return e.Error()
}

// testSearchPermission: a user who looked a file up (so the kernel caches
// the path) loses search permission on its directory; every call by path
// must then fail with EACCES and change nothing (pjdfstest chmod/05,
// chown/05, truncate/05, ftruncate/05, link/06, open/05).
func testSearchPermission(t *testing.T, mnt string) {
	base := filepath.Join(mnt, "search")
	dir := filepath.Join(base, "d")
	other := filepath.Join(base, "other")
	for _, d := range []string{base, dir, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, uidA, gidA); err != nil {
			t.Fatal(err)
		}
	}
	f := filepath.Join(dir, "f")
	wantAs(t, 0, uidA, gidA, "create", f, "0644")
	wantAs(t, 0, uidA, gidA, "chmod", f, "0642")
	wantAs(t, 0, uidA, gidA, "stat", f)
	wantAs(t, 0, uidA, gidA, "link", f, filepath.Join(other, "warm"))
	before := *stat(t, f)

	for _, tc := range []struct {
		name, dir string
	}{
		{"no search on the file's directory", dir},
		{"no search on the directory above", base},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := tc.dir
			if err := os.Chmod(target, 0o644); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := os.Chmod(target, 0o755); err != nil {
					t.Fatal(err)
				}
			}()
			wantAs(t, syscall.EACCES, uidA, gidA, "stat", f)
			wantAs(t, syscall.EACCES, uidA, gidA, "chmod", f, "0620")
			wantAs(t, syscall.EACCES, uidA, gidA, "chown", f, "65534", "65534")
			wantAs(t, syscall.EACCES, uidA, gidA, "truncate", f, "123")
			wantAs(t, syscall.EACCES, uidA, gidA, "ftruncate", f, "123")
			wantAs(t, syscall.EACCES, uidA, gidA, "open", f, "O_RDONLY")
			wantAs(t, syscall.EACCES, uidA, gidA, "open", f, "O_WRONLY,O_TRUNC")
			wantAs(t, syscall.EACCES, uidA, gidA, "link", f, filepath.Join(other, "l"))
			if target == dir {
				// The new name's directory without search permission.
				wantAs(t, syscall.EACCES, uidA, gidA, "link", filepath.Join(other, "warm"), filepath.Join(dir, "l"))
			}
			after := stat(t, f)
			if after.Mode != before.Mode || after.Size != before.Size || after.Uid != before.Uid ||
				after.Gid != before.Gid || after.Nlink != before.Nlink {
				t.Errorf("file changed: mode %o size %d owner %d:%d nlink %d, was mode %o size %d owner %d:%d nlink %d",
					after.Mode, after.Size, after.Uid, after.Gid, after.Nlink,
					before.Mode, before.Size, before.Uid, before.Gid, before.Nlink)
			}
		})
	}
	// With search permission back, the same calls succeed.
	wantAs(t, 0, uidA, gidA, "chmod", f, "0620")
	wantAs(t, 0, uidA, gidA, "truncate", f, "123")
	if st := stat(t, f); st.Mode&0o7777 != 0o620 || st.Size != 123 {
		t.Errorf("after chmod and truncate with search permission: mode %o size %d", st.Mode, st.Size)
	}
}

// testFIFOMode opens FIFOs as their owner, a member of their group and
// someone else, with modes that deny what the open asks (pjdfstest
// open/06). O_NONBLOCK keeps an open for reading from waiting for a
// writer; an allowed open for writing then fails with ENXIO (no reader).
func testFIFOMode(t *testing.T, mnt string) {
	type who struct {
		name     string
		uid, gid uint32
		shift    uint
	}
	users := []who{{"owner", uidA, gidA, 6}, {"group", uidB, gidA, 3}, {"other", uidB, gidB, 0}}
	for _, u := range users {
		p := filepath.Join(mnt, "fifo-"+u.name)
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatalf("mkfifo: %v", err)
		}
		if err := os.Chown(p, uidA, gidA); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			perm  uint32 // for u's class
			flags string
			want  syscall.Errno
		}{
			{2, "O_RDONLY,O_NONBLOCK", syscall.EACCES},
			{0, "O_RDONLY,O_NONBLOCK", syscall.EACCES},
			{4, "O_WRONLY,O_NONBLOCK", syscall.EACCES},
			{0, "O_WRONLY,O_NONBLOCK", syscall.EACCES},
			{4, "O_RDWR,O_NONBLOCK", syscall.EACCES},
			{2, "O_RDWR,O_NONBLOCK", syscall.EACCES},
			{4, "O_RDONLY,O_NONBLOCK", 0},
			{2, "O_WRONLY,O_NONBLOCK", syscall.ENXIO},
			{6, "O_RDWR,O_NONBLOCK", 0},
		} {
			// Grant the other classes everything, so only u's class
			// can deny.
			mode := uint32(0o777)&^(7<<u.shift) | tc.perm<<u.shift
			if err := os.Chmod(p, os.FileMode(mode)); err != nil {
				t.Fatal(err)
			}
			wantAs(t, tc.want, u.uid, u.gid, "open", p, tc.flags)
		}
	}
}

// testWriteKillsSetID writes, as someone else, to files of root with
// mode 0777 plus setuid or setgid: the write succeeds and clears both
// bits (pjdfstest chmod/12). A chmod by that user is still refused.
func testWriteKillsSetID(t *testing.T, mnt string) {
	for _, tc := range []struct {
		mode, want uint32
	}{
		{0o4777, 0o777},
		{0o2777, 0o777},
		{0o6777, 0o777},
		{0o2767, 0o2767}, // setgid without group execute stays
	} {
		p := filepath.Join(mnt, "setid")
		write(t, p, nil)
		if err := os.Chmod(p, os.FileMode(tc.mode&0o777)|modeBits(tc.mode)); err != nil {
			t.Fatal(err)
		}
		if st := stat(t, p); st.Mode&0o7777 != tc.mode {
			t.Fatalf("mode %o after chmod, want %o", st.Mode&0o7777, tc.mode)
		}
		wantAs(t, syscall.EPERM, uidA, gidA, "chmod", p, "0777")
		wantAs(t, 0, uidA, gidA, "write", p, "x")
		st := stat(t, p)
		if st.Mode&0o7777 != tc.want || st.Size != 1 {
			t.Errorf("after a write by another user to a %o file: mode %o size %d, want mode %o size 1",
				tc.mode, st.Mode&0o7777, st.Size, tc.want)
		}
		if got, err := os.ReadFile(p); err != nil || string(got) != "x" {
			t.Errorf("read back %q, %v", got, err)
		}
		// truncate(2) by someone else clears them too.
		if err := os.Chmod(p, os.FileMode(tc.mode&0o777)|modeBits(tc.mode)); err != nil {
			t.Fatal(err)
		}
		wantAs(t, 0, uidA, gidA, "truncate", p, "5")
		if st := stat(t, p); st.Mode&0o7777 != tc.want || st.Size != 5 {
			t.Errorf("after a truncate by another user of a %o file: mode %o size %d, want mode %o size 5",
				tc.mode, st.Mode&0o7777, st.Size, tc.want)
		}
		// A write by root (CAP_FSETID) keeps them.
		if err := os.Chmod(p, os.FileMode(tc.mode&0o777)|modeBits(tc.mode)); err != nil {
			t.Fatal(err)
		}
		write(t, p, []byte("root"))
		if st := stat(t, p); st.Mode&0o7777 != tc.mode {
			t.Errorf("after a write by root to a %o file: mode %o", tc.mode, st.Mode&0o7777)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	// Any write drops file capabilities, root's too, also through a
	// descriptor opened before they were set.
	p := filepath.Join(mnt, "caps")
	write(t, p, []byte("x"))
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	caps := []byte{1, 0, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} // v2, effective, CAP_NET_BIND_SERVICE
	for i := range 2 {
		if err := syscall.Setxattr(p, "security.capability", caps, 0); err != nil {
			t.Fatalf("set capabilities: %v", err)
		}
		if _, err := f.Write([]byte("y")); err != nil {
			t.Fatal(err)
		}
		if _, err := syscall.Getxattr(p, "security.capability", make([]byte, 64)); err != syscall.ENODATA {
			t.Errorf("write %d: capabilities after a write: %v, want ENODATA", i, err)
		}
	}
}

// modeBits turns the setuid, setgid and sticky bits of a numeric mode into
// os.FileMode bits.
func modeBits(mode uint32) os.FileMode {
	var m os.FileMode
	if mode&syscall.S_ISUID != 0 {
		m |= os.ModeSetuid
	}
	if mode&syscall.S_ISGID != 0 {
		m |= os.ModeSetgid
	}
	if mode&syscall.S_ISVTX != 0 {
		m |= os.ModeSticky
	}
	return m
}
