package e2e

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// testExecOnly: a program its user may execute but not read runs (mode
// 0100, 0010 or 0001, as generic/126 of the Linux file-system tests
// checks): the kernel opens it for execve with execute permission, not
// read; reading it stays refused, and without execute permission it does
// not run.
func testExecOnly(t *testing.T, mnt string) {
	prog, err := exec.LookPath("true")
	if err != nil {
		t.Fatalf("no true(1) to copy: %v", err)
	}
	dir := filepath.Join(mnt, "exec-only")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		mode      os.FileMode
		owner     uint32
		group     uint32
		uid, gid  uint32
		wantExec  error
		wantReadE error
	}{
		{"owner 0100", 0o100, uidA, 0, uidA, gidA, nil, syscall.EACCES},
		{"group 0010", 0o010, 0, gidB, uidA, gidB, nil, syscall.EACCES},
		{"other 0001", 0o001, 0, 0, uidB, gidB, nil, syscall.EACCES},
		{"owner 0600", 0o600, uidA, 0, uidA, gidA, syscall.EACCES, nil},
		{"other 0110", 0o110, 0, 0, uidB, gidB, syscall.EACCES, syscall.EACCES},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, filepath.Base(t.Name()))
			copyFile(t, prog, p)
			if err := os.Chown(p, int(c.owner), int(c.group)); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, c.mode); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(p)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: c.uid, Gid: c.gid}}
			if err := cmd.Run(); !errors.Is(err, c.wantExec) {
				t.Errorf("run as %d:%d: %v, want %v", c.uid, c.gid, err, c.wantExec)
			}
			wantAs(t, errnoOf(c.wantReadE), c.uid, c.gid, "open", p, "O_RDONLY")
		})
	}
}

func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// copyFile copies the file src to dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
