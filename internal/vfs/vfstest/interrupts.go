package vfstest

import (
	"bytes"
	"context"
	"slices"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/vfs"
)

// An access path cancels an operation's context when the kernel
// interrupts the request (a signal to the calling process, which may be
// dying). Cancellation may end a wait early; it must never leave an
// operation half done, nor skip the clean-up that closing and unlocking
// owe other processes.
var interruptTests = []test{
	{"CloseDropsLocks", testInterruptedClose},
	{"ReleaseDropsFlock", testInterruptedRelease},
	{"UnlockUnlocks", testInterruptedUnlock},
	{"WriteIsWholeOrNothing", testInterruptedWrite},
	{"ReadDirResumes", testInterruptedReadDir},
}

// cancelled returns a root context that is already cancelled.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(asRoot())
	cancel()
	return ctx
}

// testInterruptedClose: the close of a descriptor of a killed process
// (a flush whose context is cancelled) still drops its POSIX locks.
func testInterruptedClose(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, nil)
	fh := fs.open(ino, syscall.O_RDWR)
	wantErrno(t, "A locks", fs.v.SetLk(ctx, fh, ownerA, posix(meta.LockWrite, 0, meta.LockEnd), false), 0)
	fs.write(fh, 0, []byte("data"))
	fs.v.Flush(cancelled(), fh, ownerA) // EINTR or not: the locks go
	wantErrno(t, "C locks after A's interrupted close", fs.v.SetLk(ctx, fh, ownerC, posix(meta.LockWrite, 0, 9), false), 0)
	if err := fs.v.Release(ctx, fh, 0); err != nil {
		t.Fatalf("release: %v", err)
	}
	if got := string(fs.content(ino)); got != "data" {
		t.Fatalf("after an interrupted close and the release: %q", got)
	}
}

// testInterruptedRelease: a release whose context is cancelled still
// commits the writes, drops the handle's flock and the handle: what opens
// the file next finds all that done.
func testInterruptedRelease(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, nil)
	h1 := fs.open(ino, syscall.O_RDWR)
	wantErrno(t, "1 locks", fs.v.Flock(ctx, h1, h1, meta.LockWrite, false), 0)
	data := pattern(3*BlockSize+5, 1)
	fs.write(h1, 0, data)
	wantErrno(t, "interrupted release", fs.v.Release(cancelled(), h1, h1), 0)
	h2 := fs.open(ino, syscall.O_RDONLY)
	defer fs.close(h2)
	wantErrno(t, "2 locks after 1's interrupted release", fs.v.Flock(ctx, h2, h2, meta.LockWrite, false), 0)
	wantErrno(t, "release again", fs.v.Release(ctx, h1, 0), syscall.EBADF)
	if got := fs.readAll(h2); !bytes.Equal(got, data) {
		t.Fatalf("after an interrupted release: %d bytes, want %d", len(got), len(data))
	}
}

// testInterruptedUnlock: an unlock whose context is cancelled unlocks.
func testInterruptedUnlock(t *testing.T, fs *fsys) {
	ctx := asRoot()
	ino := fs.create(meta.RootIno, "f", 0o644, nil)
	h1 := fs.open(ino, syscall.O_RDWR)
	h2 := fs.open(ino, syscall.O_RDWR)
	defer fs.close(h1)
	defer fs.close(h2)
	wantErrno(t, "A locks", fs.v.SetLk(ctx, h1, ownerA, posix(meta.LockWrite, 0, meta.LockEnd), false), 0)
	wantErrno(t, "1 flocks", fs.v.Flock(ctx, h1, h1, meta.LockWrite, false), 0)
	fs.write(h1, 0, []byte("data"))
	fs.v.SetLk(cancelled(), h1, ownerA, posix(meta.LockUnlock, 0, meta.LockEnd), false)
	fs.v.Flock(cancelled(), h1, h1, meta.LockUnlock, false)
	wantErrno(t, "C locks after A's interrupted unlock", fs.v.SetLk(ctx, h2, ownerC, posix(meta.LockWrite, 0, 9), false), 0)
	wantErrno(t, "2 flocks after 1's interrupted unlock", fs.v.Flock(ctx, h2, h2, meta.LockWrite, false), 0)
}

// testInterruptedWrite: a write whose context is cancelled either fails
// and writes nothing, or succeeds.
func testInterruptedWrite(t *testing.T, fs *fsys) {
	ino := fs.create(meta.RootIno, "f", 0o644, nil)
	fh := fs.open(ino, syscall.O_RDWR)
	data := pattern(2*BlockSize, 1) // full blocks start uploads
	err := fs.v.Write(cancelled(), fh, 0, data)
	fs.close(fh)
	got := fs.content(ino)
	switch {
	case err == nil && !bytes.Equal(got, data):
		t.Fatalf("interrupted write succeeded, but the file has %d bytes (differing at %d)", len(got), firstDiff(got, data))
	case err != nil && len(got) != 0:
		t.Fatalf("interrupted write failed (%v), but the file has %d bytes", err, len(got))
	}
}

// testInterruptedReadDir: a directory read interrupted while it fetches
// the next page fails, and the kernel's retry at the same offset resumes
// there, also when entries before it were removed meanwhile.
func testInterruptedReadDir(t *testing.T, fs *fsys) {
	ctx := asRoot()
	d := fs.mkdir(meta.RootIno, "d", 0o755)
	names := fillDir(fs, d, manyEntries)
	s := fs.openStream(d)
	got := namesOf(s.next(2+999, false)) // all but the last entry of the first page
	// The interrupted call takes the last entry of the page and fetches
	// the next one. When it fails, the kernel keeps none of what it got
	// (the reply is an error); when it succeeds (an engine that ignores
	// cancellation), the kernel keeps it all.
	var taken []vfs.DirEntry
	err := fs.v.ReadDir(cancelled(), s.fh, s.off, false, func(e vfs.DirEntry) bool {
		if len(taken) == 5 {
			return false
		}
		taken = append(taken, e)
		return true
	})
	if err == nil && len(taken) > 0 {
		got = append(got, namesOf(taken)...)
		s.off = taken[len(taken)-1].Off
	}
	for _, n := range names[:5] {
		if err := fs.v.Unlink(ctx, d, []byte(n)); err != nil {
			t.Fatalf("unlink: %v", err)
		}
	}
	if got := append(got, namesOf(s.rest(100, false))...); !slices.Equal(got, names) {
		t.Fatalf("after an interrupted read (%v): %d names, want %d (first difference at %d)", err, len(got), len(names), firstDiffStrings(got, names))
	}
}
