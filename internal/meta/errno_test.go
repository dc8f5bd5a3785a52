package meta

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestErrno(t *testing.T) {
	cases := []struct {
		err  error
		want syscall.Errno
	}{
		{nil, 0},
		{syscall.ENOENT, syscall.ENOENT},
		{fmt.Errorf("lookup: %w", syscall.EACCES), syscall.EACCES},
		{errors.New("engine down"), syscall.EIO},
		{fmt.Errorf("tx: %w", context.Canceled), syscall.EINTR},
		// A metadata engine or object store that cannot be reached is
		// EIO, never a network errno (ECONNREFUSED from stat(2)).
		{fmt.Errorf("redis: %w", &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}), syscall.EIO},
		{fmt.Errorf("metadata server: %w", syscall.ECONNRESET), syscall.EIO},
		{fmt.Errorf("write: %w", syscall.EPIPE), syscall.EIO},
		{fmt.Errorf("s3: %w", syscall.ETIMEDOUT), syscall.EIO},
		{fmt.Errorf("engine: %w", syscall.EHOSTUNREACH), syscall.EIO},
	}
	for _, c := range cases {
		if got := Errno(c.err); got != c.want {
			t.Errorf("Errno(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
