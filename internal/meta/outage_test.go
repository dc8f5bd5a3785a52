package meta_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// TestFailureKinds: what an engine's failure says of its reach decides
// whether a transaction runs again and whether an outage starts; an
// answer of the core (an errno such as EAGAIN, whose Timeout method says
// true) is never taken for the engine's silence.
func TestFailureKinds(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, tc := range []struct {
		name                             string
		err                              error
		unreachable, transport, timedOut bool
	}{
		{"connection refused", fmt.Errorf("begin: %w", refused), true, true, false},
		{"dial timeout", &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}, true, true, true},
		{"connection reset", reset, false, true, false},
		{"EOF", fmt.Errorf("reply: %w", io.EOF), false, true, false},
		{"bad connection", driver.ErrBadConn, false, true, false},
		{"read timeout", readTimeout, false, true, true},
		{"not applied, reset", store.NotApplied(reset), false, true, false},
		{"EAGAIN", syscall.EAGAIN, false, false, false},
		{"ENOENT", fmt.Errorf("lookup: %w", syscall.ENOENT), false, false, false},
		{"conflict", store.ErrConflict, false, false, false},
		{"cancelled", context.Canceled, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := meta.Unreachable(tc.err); got != tc.unreachable {
				t.Errorf("unreachable(%v) = %v, want %v", tc.err, got, tc.unreachable)
			}
			if got := meta.Transport(tc.err); got != tc.transport {
				t.Errorf("transport(%v) = %v, want %v", tc.err, got, tc.transport)
			}
			if got := meta.TimedOut(tc.err); got != tc.timedOut {
				t.Errorf("timedOut(%v) = %v, want %v", tc.err, got, tc.timedOut)
			}
		})
	}
	if !errors.Is(store.NotApplied(store.ErrConflict), store.ErrConflict) {
		t.Error("NotApplied hides the error it marks")
	}
}
