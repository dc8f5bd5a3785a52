package e2e

import (
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReadOnlyMount checks that a --read-only mount serves reads and
// refuses every kind of change with EROFS.
func TestReadOnlyMount(t *testing.T) {
	v := newVolume(t)
	v.mount(t)
	write(t, v.path("f"), []byte("content"))
	if err := os.Mkdir(v.path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(v.path("f"), "user.x", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	v.umount(t)
	v.mount(t, "--read-only")

	if got, err := os.ReadFile(v.path("f")); err != nil || string(got) != "content" {
		t.Fatalf("read on read-only mount: %q, %v", got, err)
	}
	changes := []struct {
		name string
		fn   func() error
	}{
		{"create", func() error { return os.WriteFile(v.path("new"), nil, 0o644) }},
		{"open for write", func() error {
			f, err := os.OpenFile(v.path("f"), os.O_WRONLY, 0)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"mkdir", func() error { return os.Mkdir(v.path("d2"), 0o755) }},
		{"unlink", func() error { return os.Remove(v.path("f")) }},
		{"rmdir", func() error { return unix.Rmdir(v.path("d")) }},
		{"rename", func() error { return unix.Rename(v.path("f"), v.path("g")) }},
		{"link", func() error { return os.Link(v.path("f"), v.path("h")) }},
		{"symlink", func() error { return os.Symlink("f", v.path("s")) }},
		{"chmod", func() error { return os.Chmod(v.path("f"), 0o600) }},
		{"chown", func() error { return os.Chown(v.path("f"), 1, 1) }},
		{"truncate", func() error { return os.Truncate(v.path("f"), 0) }},
		{"utimes", func() error { return unix.UtimesNano(v.path("f"), []unix.Timespec{{Sec: 1}, {Sec: 1}}) }},
		{"setxattr", func() error { return unix.Setxattr(v.path("f"), "user.y", []byte("1"), 0) }},
		{"removexattr", func() error { return unix.Removexattr(v.path("f"), "user.x") }},
		{"mknod", func() error { return unix.Mkfifo(v.path("p"), 0o644) }},
	}
	for _, c := range changes {
		t.Run(c.name, func(t *testing.T) { wantErrno(t, c.name, c.fn(), syscall.EROFS) })
	}
}
