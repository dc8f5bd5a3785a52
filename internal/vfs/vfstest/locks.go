package vfstest

import (
	"context"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
)

var lockTests = []test{
	{"PosixRanges", testPosixRanges},
	{"PosixCloseDropsOwnersLocks", testPosixClose},
	{"PosixWaitEndsAtUnlock", testPosixWait},
	{"PosixWaitCancelled", testPosixWaitCancelled},
	{"OFDGoesWithLastClose", testOFDLastClose},
	{"OFDReleaseKeepsPosixLocks", testOFDReleaseKeepsPosix},
	{"OFDWaitEndsAtRelease", testOFDWait},
	{"Flock", testFlock},
	{"FlockWaitCancelled", testFlockWaitCancelled},
}

// Lock owners: the kernel's lock owner ids of three processes (their
// file tables), and of an open file description, for its OFD locks.
const (
	ownerA = 0xA
	ownerB = 0xB
	ownerC = 0xC
	ofd1   = 0xF1
)

func posix(typ uint32, start, end uint64) meta.PosixLock {
	return meta.PosixLock{Type: typ, Start: start, End: end}
}

// testPosixRanges: record locks conflict only between different owners,
// on overlapping ranges, when one is a write lock; an owner's new lock
// replaces its own over the range; F_GETLK reports a conflicting lock.
func testPosixRanges(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, nil)
	fh := fs.open(ino, syscall.O_RDWR) // shared by the owners, as after fork(2)
	defer fs.close(fh)
	steps := []struct {
		what  string
		owner uint64
		lk    meta.PosixLock
		want  syscall.Errno
	}{
		{"A write-locks 0-99", ownerA, posix(meta.LockWrite, 0, 99), 0},
		{"B cannot read-lock 50-59", ownerB, posix(meta.LockRead, 50, 59), syscall.EAGAIN},
		{"B write-locks 100-199, next to A", ownerB, posix(meta.LockWrite, 100, 199), 0},
		{"A re-locks its own range for reading", ownerA, posix(meta.LockRead, 0, 99), 0},
		{"C read-locks under A's read lock", ownerC, posix(meta.LockRead, 10, 20), 0},
		{"C cannot write-lock over B", ownerC, posix(meta.LockWrite, 150, meta.LockEnd), syscall.EAGAIN},
		{"A cannot upgrade where C reads", ownerA, posix(meta.LockWrite, 0, 99), syscall.EAGAIN},
		{"A upgrades past C's range", ownerA, posix(meta.LockWrite, 21, 99), 0},
		{"A unlocks 0-99", ownerA, posix(meta.LockUnlock, 0, 99), 0},
		{"C unlocks a range it never locked", ownerC, posix(meta.LockUnlock, 500, 600), 0},
		{"C write-locks 0-99 apart from its read lock", ownerC, posix(meta.LockWrite, 0, 99), 0},
	}
	for _, s := range steps {
		wantErrno(t, s.what, fs.v.SetLk(ctx, fh, s.owner, s.lk, false), s.want)
	}
	got, err := fs.v.GetLk(ctx, fh, ownerA, posix(meta.LockRead, 120, 130))
	if err != nil {
		t.Fatalf("getlk: %v", err)
	}
	if got.Type != meta.LockWrite || got.Start != 100 || got.End != 199 {
		t.Errorf("getlk over B's lock: %+v", got)
	}
	got, err = fs.v.GetLk(ctx, fh, ownerB, posix(meta.LockWrite, 100, 199))
	if err != nil || got.Type != meta.LockUnlock {
		t.Errorf("getlk of B over its own lock: %+v, %v; want none", got, err)
	}
	_, err = fs.v.GetLk(ctx, fh, ownerA, posix(meta.LockWrite, 300, 400))
	if err != nil {
		t.Errorf("getlk of a free range: %v", err)
	}
	wantErrno(t, "a range that ends before it starts", fs.v.SetLk(ctx, fh, ownerA, posix(meta.LockWrite, 10, 5), false), syscall.EINVAL)
}

// testPosixClose: closing any descriptor of a file drops all the POSIX
// locks its process (the lock owner) holds on the file, and no others.
func testPosixClose(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, nil)
	locking := fs.open(ino, syscall.O_RDWR)
	other := fs.open(ino, syscall.O_RDONLY) // A's second descriptor
	b := fs.open(ino, syscall.O_RDWR)
	c := fs.open(ino, syscall.O_RDWR)
	defer fs.close(locking)
	defer fs.close(b)
	defer fs.close(c)
	wantErrno(t, "A locks", fs.v.SetLk(ctx, locking, ownerA, posix(meta.LockWrite, 0, 9), false), 0)
	wantErrno(t, "B locks", fs.v.SetLk(ctx, b, ownerB, posix(meta.LockWrite, 10, 19), false), 0)
	if err := fs.v.Flush(ctx, other, ownerA); err != nil {
		t.Fatalf("close of A's other descriptor: %v", err)
	}
	if err := fs.v.Release(ctx, other, 0); err != nil {
		t.Fatalf("release: %v", err)
	}
	wantErrno(t, "C locks A's former range", fs.v.SetLk(ctx, c, ownerC, posix(meta.LockWrite, 0, 9), false), 0)
	wantErrno(t, "C cannot lock B's range", fs.v.SetLk(ctx, c, ownerC, posix(meta.LockWrite, 10, 19), false), syscall.EAGAIN)
}

// waitResult runs lock in the background and returns its result channel.
func waitResult(lock func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- lock() }()
	return done
}

// testPosixWait: F_SETLKW waits while the range is locked and takes the
// lock once it is free.
func testPosixWait(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, nil)
	fh := fs.open(ino, syscall.O_RDWR)
	defer fs.close(fh)
	wantErrno(t, "A locks", fs.v.SetLk(ctx, fh, ownerA, posix(meta.LockWrite, 0, meta.LockEnd), false), 0)
	done := waitResult(func() error { return fs.v.SetLk(ctx, fh, ownerB, posix(meta.LockWrite, 5, 5), true) })
	wantErrno(t, "A unlocks", fs.v.SetLk(ctx, fh, ownerA, posix(meta.LockUnlock, 0, meta.LockEnd), false), 0)
	wantErrno(t, "B's wait", <-done, 0)
	wantErrno(t, "A after B took the lock", fs.v.SetLk(ctx, fh, ownerA, posix(meta.LockRead, 5, 5), false), syscall.EAGAIN)
}

// testPosixWaitCancelled: a waiter whose context ends (the kernel
// interrupted the request: its process was killed) gives up with EINTR
// and takes nothing, so a third owner gets the lock once it is free.
func testPosixWaitCancelled(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, nil)
	fh := fs.open(ino, syscall.O_RDWR)
	defer fs.close(fh)
	wantErrno(t, "A locks", fs.v.SetLk(ctx, fh, ownerA, posix(meta.LockWrite, 0, meta.LockEnd), false), 0)
	wctx, cancel := context.WithCancel(ctx)
	done := waitResult(func() error { return fs.v.SetLk(wctx, fh, ownerB, posix(meta.LockWrite, 0, 9), true) })
	cancel()
	wantErrno(t, "B's cancelled wait", <-done, syscall.EINTR)
	wantErrno(t, "A unlocks", fs.v.SetLk(ctx, fh, ownerA, posix(meta.LockUnlock, 0, meta.LockEnd), false), 0)
	wantErrno(t, "C locks", fs.v.SetLk(ctx, fh, ownerC, posix(meta.LockWrite, 0, 9), false), 0)
}

// testFlock: flock(2) locks belong to the open file description (the
// handle): shared locks coexist, an exclusive one excludes, a holder may
// convert its lock, and the release of the handle drops it.
func testFlock(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, nil)
	h1 := fs.open(ino, syscall.O_RDONLY)
	h2 := fs.open(ino, syscall.O_RDONLY)
	h3 := fs.open(ino, syscall.O_RDONLY)
	defer fs.close(h2)
	defer fs.close(h3)
	// The kernel passes the handle's lock owner; use the handle ids.
	steps := []struct {
		what string
		fh   uint64
		typ  uint32
		want syscall.Errno
	}{
		{"1 shares", h1, meta.LockRead, 0},
		{"2 shares", h2, meta.LockRead, 0},
		{"3 cannot take it exclusively", h3, meta.LockWrite, syscall.EAGAIN},
		{"2 cannot upgrade while 1 shares", h2, meta.LockWrite, syscall.EAGAIN},
		{"2 unlocks", h2, meta.LockUnlock, 0},
		{"1 upgrades", h1, meta.LockWrite, 0},
		{"2 cannot share under 1's exclusive lock", h2, meta.LockRead, syscall.EAGAIN},
		{"1 converts to shared", h1, meta.LockRead, 0},
		{"2 shares again", h2, meta.LockRead, 0},
		{"2 unlocks again", h2, meta.LockUnlock, 0},
	}
	for _, s := range steps {
		wantErrno(t, s.what, fs.v.Flock(ctx, s.fh, s.fh, s.typ, false), s.want)
	}
	if err := fs.v.Flush(ctx, h1, 0); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if err := fs.v.Release(ctx, h1, h1); err != nil {
		t.Fatalf("release with the flock owner: %v", err)
	}
	wantErrno(t, "3 after 1's release", fs.v.Flock(ctx, h3, h3, meta.LockWrite, false), 0)
	wantErrno(t, "3 unlocks", fs.v.Flock(ctx, h3, h3, meta.LockUnlock, false), 0)
}

// testFlockWaitCancelled is testPosixWaitCancelled for flock(2).
func testFlockWaitCancelled(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, nil)
	h1 := fs.open(ino, syscall.O_RDONLY)
	h2 := fs.open(ino, syscall.O_RDONLY)
	h3 := fs.open(ino, syscall.O_RDONLY)
	defer fs.close(h2)
	defer fs.close(h3)
	wantErrno(t, "1 locks", fs.v.Flock(ctx, h1, h1, meta.LockWrite, false), 0)
	wctx, cancel := context.WithCancel(ctx)
	done := waitResult(func() error { return fs.v.Flock(wctx, h2, h2, meta.LockWrite, true) })
	cancel()
	wantErrno(t, "2's cancelled wait", <-done, syscall.EINTR)
	wantErrno(t, "3 while 1 holds it", fs.v.Flock(ctx, h3, h3, meta.LockWrite, false), syscall.EAGAIN)
	if err := fs.v.Release(ctx, h1, h1); err != nil {
		t.Fatalf("release of 1 with its flock: %v", err)
	}
	wantErrno(t, "3 locks", fs.v.Flock(ctx, h3, h3, meta.LockWrite, false), 0)
	wantErrno(t, "3 unlocks", fs.v.Flock(ctx, h3, h3, meta.LockUnlock, false), 0)
}

// testOFDLastClose: an OFD lock (the kernel sends it as a record lock
// whose owner is the description, and no unlock at close) outlives the
// closes of the description's descriptors, each a FLUSH with another
// owner (a dup's close, a fork child's), and goes at the description's
// release.
func testOFDLastClose(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, nil)
	h1 := fs.open(ino, syscall.O_RDWR)
	h2 := fs.open(ino, syscall.O_RDWR)
	defer fs.close(h2)
	wantErrno(t, "OFD lock", fs.v.SetLk(ctx, h1, ofd1, posix(meta.LockWrite, 0, 9), false), 0)
	for _, closer := range []uint64{ownerA, ownerC} {
		if err := fs.v.Flush(ctx, h1, closer); err != nil {
			t.Fatalf("close of a descriptor of the description by %#x: %v", closer, err)
		}
		wantErrno(t, "B under the OFD lock after a close", fs.v.SetLk(ctx, h2, ownerB, posix(meta.LockWrite, 5, 5), false), syscall.EAGAIN)
	}
	got, err := fs.v.GetLk(ctx, h2, ownerB, posix(meta.LockWrite, 0, 9))
	if err != nil || got.Type != meta.LockWrite {
		t.Errorf("getlk under the OFD lock: %+v, %v", got, err)
	}
	if err := fs.v.Release(ctx, h1, 0); err != nil {
		t.Fatalf("release of the description: %v", err)
	}
	wantErrno(t, "B after the release", fs.v.SetLk(ctx, h2, ownerB, posix(meta.LockWrite, 5, 5), false), 0)
}

// testOFDReleaseKeepsPosix: the release of a handle keeps the POSIX
// locks of a process that locked through it, closed it (a FLUSH with its
// owner) and locked again through another handle.
func testOFDReleaseKeepsPosix(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, nil)
	h1 := fs.open(ino, syscall.O_RDWR) // shared by A and its fork child C
	h2 := fs.open(ino, syscall.O_RDWR)
	hb := fs.open(ino, syscall.O_RDWR)
	defer fs.close(h2)
	defer fs.close(hb)
	wantErrno(t, "A locks through 1", fs.v.SetLk(ctx, h1, ownerA, posix(meta.LockWrite, 0, 9), false), 0)
	if err := fs.v.Flush(ctx, h1, ownerA); err != nil {
		t.Fatalf("A closes 1: %v", err)
	}
	wantErrno(t, "A locks through 2", fs.v.SetLk(ctx, h2, ownerA, posix(meta.LockWrite, 0, 9), false), 0)
	if err := fs.v.Flush(ctx, h1, ownerC); err != nil {
		t.Fatalf("C closes 1: %v", err)
	}
	if err := fs.v.Release(ctx, h1, 0); err != nil {
		t.Fatalf("release of 1: %v", err)
	}
	wantErrno(t, "B under A's lock after the release of 1", fs.v.SetLk(ctx, hb, ownerB, posix(meta.LockWrite, 5, 5), false), syscall.EAGAIN)
}

// testOFDWait: a blocking request under an OFD lock is woken by the
// release of the holder's description.
func testOFDWait(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, nil)
	h1 := fs.open(ino, syscall.O_RDWR)
	h2 := fs.open(ino, syscall.O_RDWR)
	defer fs.close(h2)
	wantErrno(t, "OFD lock", fs.v.SetLk(ctx, h1, ofd1, posix(meta.LockWrite, 0, meta.LockEnd), false), 0)
	done := waitResult(func() error { return fs.v.SetLk(ctx, h2, ownerB, posix(meta.LockWrite, 0, 9), true) })
	if err := fs.v.Release(ctx, h1, 0); err != nil {
		t.Fatalf("release of the description: %v", err)
	}
	wantErrno(t, "B's wait", <-done, 0)
}
