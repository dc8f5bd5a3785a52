package vfs

import (
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
)

// TestLockRequestWaitsForRelease checks a lock request that overtakes the
// RELEASE of a description holding an OFD lock (the kernel sends RELEASE
// after close(2) returned, and requests are served concurrently): it
// waits for the release and finds the lock gone, whether it tests the
// range (another process's F_OFD_GETLK right after the close) or takes
// it with the released description's owner id (a new description at the
// same kernel address).
func TestLockRequestWaitsForRelease(t *testing.T) {
	const ofdOwner, other = 0xF1, 0xB
	whole := meta.PosixLock{Start: 0, End: meta.LockEnd, Type: meta.LockWrite, Pid: 1}
	for _, tc := range []struct {
		name  string
		owner uint64 // of the request that overtakes the release
	}{
		{"another owner tests the range", other},
		{"a new description reuses the owner id", ofdOwner},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newVolume(t, 0).mount(t)
			ino := m.create(t, "f", nil)
			h1, h2 := m.open(t, ino), m.open(t, ino)
			defer m.close(t, h2)
			if err := m.SetLk(as(1), h1, ofdOwner, whole, false); err != nil {
				t.Fatalf("OFD lock: %v", err)
			}
			waiting := make(chan struct{}, 1)
			testHookWaitRelease = func(meta.Ino) { waiting <- struct{}{} }
			defer func() { testHookWaitRelease, testHookReleasingLocks = nil, nil }()
			got := make(chan error, 1)
			testHookReleasingLocks = func(meta.Ino) {
				// The request comes while the release is under way; it
				// must wait (or it has answered before the locks went).
				go func() {
					if tc.owner == ofdOwner {
						got <- m.SetLk(as(2), h2, tc.owner, whole, false)
						return
					}
					lk, err := m.GetLk(as(2), h2, tc.owner, whole)
					if err == nil && lk.Type != meta.LockUnlock {
						t.Errorf("getlk during the release: the released lock %+v", lk)
					}
					got <- err
				}()
				select {
				case <-waiting:
				case err := <-got:
					got <- err
				}
			}
			if err := m.Release(as(1), h1, 0); err != nil {
				t.Fatalf("release: %v", err)
			}
			if err := <-got; err != nil {
				t.Fatalf("request during the release: %v", err)
			}
			if tc.owner == ofdOwner {
				// The new description's lock must have outlived the release.
				lk, err := m.GetLk(as(3), h2, other, whole)
				if err != nil || lk.Type != meta.LockWrite {
					t.Fatalf("the new description's lock after the release: %+v, %v", lk, err)
				}
			}
		})
	}
}
