package e2e

import (
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestXattrOff checks a mount with --enable-xattr=false: every kind of
// extended-attribute call fails with EOPNOTSUPP while files work, the
// attributes stored before are kept for a mount with them on, and a
// volume with POSIX ACLs refuses the flag.
func TestXattrOff(t *testing.T) {
	v := newVolume(t)
	v.mount(t)
	write(t, v.path("f"), []byte("content"))
	if err := unix.Setxattr(v.path("f"), "user.kept", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	v.umount(t)

	v.mount(t, "--enable-xattr=false")
	write(t, v.path("g"), []byte("more"))
	if got := readFile(t, v.path("g")); got != "more" {
		t.Fatalf("read %q, want more", got)
	}
	buf := make([]byte, 64)
	calls := []struct {
		name string
		fn   func() error
	}{
		{"setxattr", func() error { return unix.Setxattr(v.path("g"), "user.x", []byte("1"), 0) }},
		{"getxattr", func() error { _, err := unix.Getxattr(v.path("f"), "user.kept", buf); return err }},
		{"listxattr", func() error { _, err := unix.Listxattr(v.path("f"), buf); return err }},
		{"removexattr", func() error { return unix.Removexattr(v.path("f"), "user.kept") }},
	}
	for _, c := range calls {
		// Twice: the kernel stops asking after the first ENOSYS and
		// answers itself.
		for i := range 2 {
			if err := c.fn(); !errors.Is(err, unix.EOPNOTSUPP) {
				t.Errorf("%s #%d with xattrs off: %v, want EOPNOTSUPP", c.name, i+1, err)
			}
		}
	}
	v.umount(t)

	v.mount(t)
	n, err := unix.Getxattr(v.path("f"), "user.kept", buf)
	if err != nil || string(buf[:n]) != "1" {
		t.Fatalf("xattr after a mount with xattrs off: %q, %v; want 1", buf[:n], err)
	}
	v.umount(t)

	acl := newVolume(t, "--enable-acl")
	r := sluice(t, "mount", acl.metaURL, acl.mnt, "--enable-xattr=false", "--cache-dir", acl.dir+"/cache")
	if r.code == 0 || !strings.Contains(r.stderr+r.stdout, "ACL") {
		if mounted(acl.mnt) {
			sluice(t, "umount", "--force", acl.mnt)
		}
		t.Fatalf("mount of an ACL volume with xattrs off: exit %d, output %q; want a failure naming ACLs", r.code, r.stderr+r.stdout)
	}
	if _, err := os.Stat(acl.mnt); err != nil {
		t.Fatal(err)
	}
}
