package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// testFallocateKillsPriv: an fallocate changes a file as a write does,
// so one by a user without CAP_FSETID drops setuid, and setgid when the
// group may execute (generic/683-685 of the Linux file-system tests), in
// every mode, and one by root keeps them; and a write or an fallocate by
// a user who may write the file but does not own it drops its file
// capabilities (generic/688), where such a write used to fail with EPERM.
func testFallocateKillsPriv(t *testing.T, mnt string) {
	fallocate, err := exec.LookPath("fallocate")
	if err != nil {
		t.Fatalf("no fallocate(1) (util-linux): %v", err)
	}
	as := func(uid, gid uint32, args ...string) error {
		cmd := exec.Command(fallocate, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		if out, err := cmd.CombinedOutput(); err != nil {
			return &exec.ExitError{ProcessState: cmd.ProcessState, Stderr: out}
		}
		return nil
	}
	p := filepath.Join(mnt, "falloc-setid")
	for _, mode := range [][]string{nil, {"--punch-hole"}, {"--zero-range"}} {
		for _, tc := range []struct{ mode, want uint32 }{
			{0o6777, 0o777},
			{0o4777, 0o777},
			{0o2767, 0o2767}, // setgid without group execute stays
		} {
			write(t, p, make([]byte, 8192))
			if err := os.Chmod(p, os.FileMode(tc.mode&0o777)|modeBits(tc.mode)); err != nil {
				t.Fatal(err)
			}
			args := append(append([]string{}, mode...), "-o", "0", "-l", "4096", p)
			if err := as(uidA, gidA, args...); err != nil {
				t.Fatalf("fallocate %v as %d: %v (%s)", mode, uidA, err, err.(*exec.ExitError).Stderr)
			}
			if st := stat(t, p); st.Mode&0o7777 != tc.want {
				t.Errorf("after fallocate %v by another user of a %o file: mode %o, want %o", mode, tc.mode, st.Mode&0o7777, tc.want)
			}
			if err := os.Chmod(p, os.FileMode(tc.mode&0o777)|modeBits(tc.mode)); err != nil {
				t.Fatal(err)
			}
			if err := as(0, 0, args...); err != nil {
				t.Fatalf("fallocate %v as root: %v", mode, err)
			}
			if st := stat(t, p); st.Mode&0o7777 != tc.mode {
				t.Errorf("after fallocate %v by root of a %o file: mode %o, want it kept", mode, tc.mode, st.Mode&0o7777)
			}
		}
	}

	caps := []byte{1, 0, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} // v2, effective, CAP_NET_BIND_SERVICE
	c := filepath.Join(mnt, "falloc-caps")
	write(t, c, []byte("x"))
	if err := os.Chmod(c, 0o666); err != nil {
		t.Fatal(err)
	}
	for _, op := range []struct {
		name string
		run  func() error
	}{
		{"write", func() error { return asErr(asUID(t, uidA, gidA, "write", c, "y")) }},
		{"fallocate", func() error { return as(uidA, gidA, "-o", "0", "-l", "8192", c) }},
	} {
		if err := syscall.Setxattr(c, "security.capability", caps, 0); err != nil {
			t.Fatalf("set capabilities: %v", err)
		}
		if err := op.run(); err != nil {
			t.Errorf("%s by a user who may write the file: %v", op.name, err)
		}
		if _, err := syscall.Getxattr(c, "security.capability", make([]byte, 64)); err != syscall.ENODATA {
			t.Errorf("capabilities after a %s by another user: %v, want ENODATA", op.name, err)
		}
	}
	// Removing them on request still needs CAP_SETFCAP.
	if err := syscall.Setxattr(c, "security.capability", caps, 0); err != nil {
		t.Fatalf("set capabilities: %v", err)
	}
	wantAs(t, syscall.EPERM, uidA, gidA, "removexattr", c, "security.capability")
}

// asErr turns an errno of asUID into an error, nil for success.
func asErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}
