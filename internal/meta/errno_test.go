package meta

import (
	"context"
	"errors"
	"fmt"
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
	}
	for _, c := range cases {
		if got := Errno(c.err); got != c.want {
			t.Errorf("Errno(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
