package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// statusOutput is the part of `sluice status --more`'s JSON that
// TestStatusMoreShowsOpenFilesLocksAndTrash reads.
type statusOutput struct {
	Sessions []struct {
		Sid        uint64
		MountPoint string
		OpenFiles  int
		Open       []struct {
			Inode uint64
			Path  string
		}
		SustainedCount int
		LockCount      int
		Sustained      []statusFile
		Locks          []statusLock
	}
	Trash *struct {
		Files, Bytes, Dirs int64
	}
	Deletion *struct {
		SustainedFiles, SustainedBytes int64
	}
}

type statusFile struct {
	Inode  uint64
	Length uint64
	Path   string
}

type statusLock struct {
	Inode uint64
	Kind  string
	Type  string
	Owner uint64
	Range *struct {
		Start, End uint64
		Pid        uint32
	}
	Path string
}

// TestStatusMoreShowsOpenFilesLocksAndTrash: this process holds files of
// a mount open: one under flock(2), one under a POSIX lock, and one
// removed for good (from the trash) while open; another file waits in
// the trash. `status --more` shows the mount's session with both locks
// (with the files' paths) and the sustained file, and the trash with
// that one file and its bytes.
func TestStatusMoreShowsOpenFilesLocksAndTrash(t *testing.T) {
	v := newVolume(t, "--trash-days", "1")
	v.mount(t, "--heartbeat", "1s") // mounts publish their open files with each heartbeat

	open := func(name string, size int, flags int) (*os.File, uint64) {
		t.Helper()
		write(t, v.path(name), newRand(uint64(size)).bytes(size))
		f, err := os.OpenFile(v.path(name), flags, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f, inode(t, v.path(name))
	}
	flocked, flockedIno := open("flocked", 100, os.O_RDWR)
	if err := syscall.Flock(int(flocked.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("flock: %v", err)
	}
	plocked, plockedIno := open("plocked", 200, os.O_RDWR)
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: 0, Len: 10}
	if err := syscall.FcntlFlock(plocked.Fd(), syscall.F_SETLK, &lk); err != nil {
		t.Fatalf("fcntl(F_SETLK): %v", err)
	}

	write(t, v.path("trashed"), newRand(1).bytes(1234))
	if err := os.Remove(v.path("trashed")); err != nil {
		t.Fatal(err)
	}
	_, heldIno := open("held", 321, os.O_RDONLY)
	if err := os.Remove(v.path("held")); err != nil {
		t.Fatal(err)
	}
	held, err := filepath.Glob(filepath.Join(v.path(".trash"), "*", "*-held"))
	if err != nil || len(held) != 1 {
		t.Fatalf("held in the trash: %q, %v; want one file", held, err)
	}
	if err := os.Remove(held[0]); err != nil { // for good, while open
		t.Fatal(err)
	}

	var out string
	var got statusOutput
	for deadline := time.Now().Add(30 * time.Second); ; {
		out = mustSluice(t, "status", "--more", v.metaURL)
		got = statusOutput{}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("status --more printed no JSON: %v\n%s", err, out)
		}
		if len(got.Sessions) != 1 {
			t.Fatalf("status --more: %d sessions, want the mount's:\n%s", len(got.Sessions), out)
		}
		if got.Sessions[0].OpenFiles == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // until the next heartbeat
	}
	s := got.Sessions[0]
	open3 := map[uint64]string{}
	for _, f := range s.Open {
		open3[f.Inode] = f.Path
	}
	if want := map[uint64]string{flockedIno: "/flocked", plockedIno: "/plocked", heldIno: ""}; s.OpenFiles != 3 || !reflect.DeepEqual(open3, want) {
		t.Errorf("open files: %d %v, want 3: %v:\n%s", s.OpenFiles, open3, want, out)
	}
	if s.MountPoint != v.mnt || s.SustainedCount != 1 || s.LockCount != 2 {
		t.Errorf("session of %s: %d sustained files and %d locks; want %s, 1 and 2:\n%s", s.MountPoint, s.SustainedCount, s.LockCount, v.mnt, out)
	}
	if want := []statusFile{{Inode: heldIno, Length: 321}}; !reflect.DeepEqual(s.Sustained, want) {
		t.Errorf("sustained files %+v, want %+v", s.Sustained, want)
	}
	var flock, posix *statusLock
	for i, l := range s.Locks {
		switch l.Kind {
		case "flock":
			flock = &s.Locks[i]
		case "posix":
			posix = &s.Locks[i]
		}
	}
	if flock == nil || flock.Inode != flockedIno || flock.Type != "write" || flock.Path != "/flocked" || flock.Range != nil {
		t.Errorf("flock %+v, want a write lock on /flocked (inode %d):\n%s", flock, flockedIno, out)
	}
	if posix == nil || posix.Inode != plockedIno || posix.Type != "write" || posix.Path != "/plocked" ||
		posix.Range == nil || posix.Range.Start != 0 || posix.Range.End != 9 || posix.Range.Pid != uint32(os.Getpid()) {
		t.Errorf("POSIX lock %+v, want a write lock on bytes 0-9 of /plocked (inode %d) by pid %d:\n%s", posix, plockedIno, os.Getpid(), out)
	}
	if got.Trash == nil || got.Trash.Files != 1 || got.Trash.Bytes != 1234 || got.Trash.Dirs != 1 {
		t.Errorf("trash %+v, want 1 file of 1234 bytes in 1 hour directory:\n%s", got.Trash, out)
	}
	if got.Deletion == nil || got.Deletion.SustainedFiles != 1 || got.Deletion.SustainedBytes != 321 {
		t.Errorf("deletion %+v, want 1 sustained file of 321 bytes:\n%s", got.Deletion, out)
	}

	// Without --more: the counts, no lists, no scans.
	plain := mustSluice(t, "status", v.metaURL)
	if !strings.Contains(plain, `"LockCount": 2`) || !strings.Contains(plain, `"SustainedCount": 1`) ||
		strings.Contains(plain, `"Locks"`) || strings.Contains(plain, `"Trash"`) {
		t.Errorf("status without --more:\n%s", plain)
	}
}
