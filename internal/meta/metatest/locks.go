package metatest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/testserver"
)

// needBootID skips t (fails it under CI=true) where the kernel has no
// boot id, by which a client tells the sessions of its own host and boot.
func needBootID(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/proc/sys/kernel/random/boot_id"); err != nil {
		testserver.Missing(t, fmt.Sprintf("no boot id to tell this host's sessions by: %v", err), "run on Linux")
	}
}

// testLocks checks flock and POSIX record locks between two clients
// (two mounts) of one volume.
func testLocks(t *testing.T, ns newStoreFunc) {
	st := openStore(t, ns)
	format(t, st, testFormat())
	a := newClient(t, st, meta.Config{})
	b := newClient(t, st, meta.Config{})
	f := mkfile(t, a, meta.RootIno, "f")

	// flock: a writer excludes everyone; readers share.
	wantErr(t, "a flock W", lockErr(a.Flock(root, f.Ino, 1, meta.LockWrite, false)), 0)
	wantErr(t, "b flock R while a holds W", lockErr(b.Flock(root, f.Ino, 1, meta.LockRead, false)), syscall.EAGAIN)
	wantErr(t, "a flock W again (same owner)", lockErr(a.Flock(root, f.Ino, 1, meta.LockWrite, false)), 0)
	wantErr(t, "a other owner flock R", lockErr(a.Flock(root, f.Ino, 2, meta.LockRead, false)), syscall.EAGAIN)
	wantErr(t, "a downgrade to R", lockErr(a.Flock(root, f.Ino, 1, meta.LockRead, false)), 0)
	wantErr(t, "b flock R shares", lockErr(b.Flock(root, f.Ino, 1, meta.LockRead, false)), 0)
	wantErr(t, "b flock W while a reads", lockErr(b.Flock(root, f.Ino, 1, meta.LockWrite, false)), syscall.EAGAIN)

	// A blocking request waits for the holder to unlock.
	got := make(chan error, 1)
	go func() { got <- lockErr(b.Flock(root, f.Ino, 1, meta.LockWrite, true)) }()
	wantErr(t, "a unlock", lockErr(a.Flock(root, f.Ino, 1, meta.LockUnlock, false)), 0)
	select {
	case err := <-got:
		wantErr(t, "b blocking flock W after unlock", err, 0)
	case <-time.After(10 * time.Second):
		t.Fatal("blocking flock did not get the lock after the unlock")
	}
	// A blocking request ends with EINTR when cancelled.
	ctx, cancel := context.WithCancel(root)
	go func() { got <- lockErr(a.Flock(ctx, f.Ino, 1, meta.LockRead, true)) }()
	cancel()
	wantErr(t, "cancelled blocking flock", <-got, syscall.EINTR)
	wantErr(t, "b unlock", lockErr(b.Flock(root, f.Ino, 1, meta.LockUnlock, false)), 0)

	// POSIX record locks.
	w := func(s, e uint64) meta.PosixLock {
		return meta.PosixLock{Start: s, End: e, Type: meta.LockWrite, Pid: 10}
	}
	r := func(s, e uint64) meta.PosixLock {
		return meta.PosixLock{Start: s, End: e, Type: meta.LockRead, Pid: 20}
	}
	u := func(s, e uint64) meta.PosixLock { return meta.PosixLock{Start: s, End: e, Type: meta.LockUnlock} }
	wantErr(t, "a W [0,99]", lockErr(a.SetLk(root, f.Ino, 7, w(0, 99), false)), 0)
	conflict, err := b.GetLk(root, f.Ino, 7, w(50, 60))
	wantErr(t, "b getlk", err, 0)
	if conflict.Type != meta.LockWrite || conflict.Start != 0 || conflict.End != 99 || conflict.Pid != 10 {
		t.Errorf("getlk reports %+v, want a's write lock [0,99] pid 10", conflict)
	}
	if none, _ := b.GetLk(root, f.Ino, 7, w(100, 200)); none.Type != meta.LockUnlock {
		t.Errorf("getlk past the lock reports %+v", none)
	}
	wantErr(t, "b R [100,200]", lockErr(b.SetLk(root, f.Ino, 7, r(100, 200), false)), 0)
	wantErr(t, "b W [90,110] overlapping a", lockErr(b.SetLk(root, f.Ino, 7, w(90, 110), false)), syscall.EAGAIN)
	wantErr(t, "a unlock [0,49]", lockErr(a.SetLk(root, f.Ino, 7, u(0, 49), false)), 0)
	wantErr(t, "b W [0,49] after unlock", lockErr(b.SetLk(root, f.Ino, 8, w(0, 49), false)), 0)
	wantErr(t, "a R [150,160] shares b's read", lockErr(a.SetLk(root, f.Ino, 7, r(150, 160), false)), 0)
	wantErr(t, "a release all", a.ReleaseLocks(root, f.Ino, 7), 0)
	wantErr(t, "b W [50,99] after a released", lockErr(b.SetLk(root, f.Ino, 9, w(50, 99), false)), 0)
	wantErr(t, "start past end", lockErr(b.SetLk(root, f.Ino, 9, w(10, 5), false)), syscall.EINVAL)

	// A lock taken returns the file as the lock's own transaction read
	// it, so what another client committed before is in it (the mount
	// revalidates its caches with it); an unlock returns nothing.
	id, err := b.NewSliceID(root)
	if err != nil {
		t.Fatal(err)
	}
	written, err := Write(root, b, f.Ino, 0, meta.Slice{Id: id, Size: 4000, Len: 4000})
	if err != nil {
		t.Fatal(err)
	}
	for _, lk := range []struct {
		name string
		lock func() (*meta.Attr, error)
	}{
		{"posix", func() (*meta.Attr, error) { return a.SetLk(root, f.Ino, 20, w(5000, 5000), false) }},
		{"flock", func() (*meta.Attr, error) { return a.Flock(root, f.Ino, 20, meta.LockWrite, false) }},
	} {
		got, err := lk.lock()
		if err != nil {
			t.Fatalf("%s lock: %v", lk.name, err)
		}
		if got == nil || got.Ino != f.Ino || meta.VersionOf(got) != meta.VersionOf(written) {
			t.Errorf("%s lock returns %+v, want the file as b's write left it (%+v)", lk.name, got, written)
		}
	}
	if got, err := a.SetLk(root, f.Ino, 20, u(5000, 5000), false); err != nil || got != nil {
		t.Errorf("posix unlock returns %+v, %v; want nothing", got, err)
	}
	if got, err := a.Flock(root, f.Ino, 20, meta.LockUnlock, false); err != nil || got != nil {
		t.Errorf("flock unlock returns %+v, %v; want nothing", got, err)
	}
}

// testStaleSession checks that a live client cleans up after a mount that
// stopped heartbeating: its locks go and its open-but-unlinked files are
// deleted.
func testStaleSession(t *testing.T, ns newStoreFunc) {
	st := openStore(t, ns)
	format(t, st, testFormat())
	dead := newClient(t, st, meta.Config{})
	later := func() time.Time { return time.Now().Add(time.Hour) }
	live := newClient(t, st, meta.Config{SessionTimeout: time.Minute, Now: later})
	f := mkfile(t, dead, meta.RootIno, "f")
	g := mkfile(t, dead, meta.RootIno, "g")
	wantErr(t, "flock", lockErr(dead.Flock(root, f.Ino, 1, meta.LockWrite, false)), 0)
	wantErr(t, "posix lock", lockErr(dead.SetLk(root, f.Ino, 1, meta.PosixLock{Start: 0, End: 10, Type: meta.LockWrite}, false)), 0)
	if _, err := dead.Open(root, g.Ino, syscall.O_RDONLY); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "unlink open file", dead.Unlink(root, meta.RootIno, []byte("g")), 0)

	wantErr(t, "live flock blocked", lockErr(live.Flock(root, f.Ino, 1, meta.LockWrite, false)), syscall.EAGAIN)
	if err := live.CleanStaleSessions(root); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "flock after cleanup", lockErr(live.Flock(root, f.Ino, 1, meta.LockWrite, false)), 0)
	wantErr(t, "posix lock after cleanup", lockErr(live.SetLk(root, f.Ino, 1, meta.PosixLock{Start: 0, End: 10, Type: meta.LockWrite}, false)), 0)
	collectOrphans(t, live) // g might have been open in live too
	_, err := live.GetAttr(root, g.Ino)
	wantErr(t, "unlinked open file of the dead session", err, syscall.ENOENT)
	sessions, err := meta.Sessions(root, st)
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != 1 {
		t.Errorf("%d sessions after cleanup, want only the live one", len(sessions))
	}
}

// testDeadProcessSession checks that a new client cleans up at once,
// before NewSession returns, after a session of this host whose process is
// gone, whatever its heartbeat, and leaves every other session alone. The
// dead mount is faked as a session of this process's pid with another
// start time: the pid of an exited process, taken again (here by this
// test). Sessions of another host, of another boot, and records written
// before sessions named their process, keep their locks.
func testDeadProcessSession(t *testing.T, ns newStoreFunc) {
	needBootID(t)
	st := openStore(t, ns)
	format(t, st, testFormat())
	exited := meta.SessionInfo{PID: os.Getpid(), ProcStart: 1} // started one tick after boot: not this test
	otherHost := exited
	otherHost.Host = "elsewhere"
	otherBoot := exited
	otherBoot.BootID, otherBoot.PIDNamespace = "00000000-0000-0000-0000-000000000000", "pid:[1]"
	// Each new client cleans up after the dead sessions registered
	// before it: the dead one comes last.
	live := newClient(t, st, meta.Config{})
	others := map[string]*meta.Session{
		"a live one":   live,
		"another host": newClient(t, st, meta.Config{SessionInfo: otherHost}),
		"another boot": newClient(t, st, meta.Config{SessionInfo: otherBoot}),
	}
	others["an old record"] = newClient(t, st, meta.Config{SessionInfo: exited})
	stripIdentity(t, st, others["an old record"].Sid())
	dead := newClient(t, st, meta.Config{SessionInfo: exited})

	f := mkfile(t, dead, meta.RootIno, "f")
	g := mkfile(t, dead, meta.RootIno, "g")
	wantErr(t, "flock", lockErr(dead.Flock(root, f.Ino, 1, meta.LockWrite, false)), 0)
	wantErr(t, "posix lock", lockErr(dead.SetLk(root, f.Ino, 1, meta.PosixLock{Start: 0, End: 10, Type: meta.LockWrite}, false)), 0)
	if _, err := dead.Open(root, g.Ino, syscall.O_RDONLY); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "unlink open file", dead.Unlink(root, meta.RootIno, []byte("g")), 0)
	held := map[string]meta.Ino{}
	for name, c := range others {
		h := mkfile(t, c, meta.RootIno, "h-"+strings.ReplaceAll(name, " ", "-"))
		wantErr(t, name+" posix lock", lockErr(c.SetLk(root, h.Ino, 1, meta.PosixLock{Start: 0, End: meta.LockEnd, Type: meta.LockWrite}, false)), 0)
		held[name] = h.Ino
	}
	wantErr(t, "live flock blocked", lockErr(live.Flock(root, f.Ino, 1, meta.LockWrite, false)), syscall.EAGAIN)

	fresh := newClient(t, st, meta.Config{})
	wantErr(t, "flock of the new client", lockErr(fresh.Flock(root, f.Ino, 1, meta.LockWrite, false)), 0)
	wantErr(t, "posix lock of the new client", lockErr(fresh.SetLk(root, f.Ino, 1, meta.PosixLock{Start: 0, End: 10, Type: meta.LockWrite}, false)), 0)
	d, err := meta.SessionDetails(root, st, dead.Sid(), meta.DetailOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.SustainedCount != 0 || d.LockCount != 0 {
		t.Errorf("the dead session still holds %d files and %d locks", d.SustainedCount, d.LockCount)
	}
	// The unlinked file is an orphan the live sessions have to answer for.
	collectOrphans(t, append([]*meta.Session{fresh}, slices.Collect(maps.Values(others))...)...)
	_, err = fresh.GetAttr(root, g.Ino)
	wantErr(t, "unlinked open file of the dead session", err, syscall.ENOENT)
	for name, ino := range held {
		wantErr(t, "lock held by "+name, lockErr(fresh.SetLk(root, ino, 1, meta.PosixLock{Start: 0, End: 0, Type: meta.LockRead}, false)), syscall.EAGAIN)
	}
	sessions, err := meta.Sessions(root, st)
	if err != nil {
		t.Fatal(err)
	}
	left := map[uint64]bool{}
	for _, s := range sessions {
		left[s.Sid] = true
	}
	if left[dead.Sid()] || len(left) != len(others)+1 {
		t.Errorf("sessions left: %v; want all but the dead one (%d) of %d", left, dead.Sid(), len(others)+2)
	}
}

// testCleanedLockWaiter checks that a blocking lock wait whose session is
// cleaned up meanwhile (the metadata server runs the waits of mounts, and
// goes on with one of a mount that died) fails with ENOLCK when the lock
// comes free, rather than take a lock that no session record leads to
// and nobody would ever release.
func testCleanedLockWaiter(t *testing.T, ns newStoreFunc) {
	needBootID(t)
	st := openStore(t, ns)
	format(t, st, testFormat())
	holder := newClient(t, st, meta.Config{})
	f := mkfile(t, holder, meta.RootIno, "f")
	for _, kind := range []string{"flock", "posix"} {
		t.Run(kind, func(t *testing.T) {
			lock := func(c *meta.Session, typ uint32, block bool) error {
				if kind == "flock" {
					return lockErr(c.Flock(root, f.Ino, 1, typ, block))
				}
				return lockErr(c.SetLk(root, f.Ino, 1, meta.PosixLock{Start: 0, End: meta.LockEnd, Type: typ}, block))
			}
			wantErr(t, "holder locks", lock(holder, meta.LockWrite, false), 0)
			// Registered as a process that is gone: the next client
			// cleans it up.
			waiter := newClient(t, st, meta.Config{SessionInfo: meta.SessionInfo{PID: os.Getpid(), ProcStart: 1}})
			done := make(chan error, 1)
			go func() { done <- lock(waiter, meta.LockWrite, true) }()
			time.Sleep(50 * time.Millisecond) // let it wait
			select {
			case err := <-done:
				t.Fatalf("the waiter did not wait: %v", err)
			default:
			}
			fresh := newClient(t, st, meta.Config{})
			wantErr(t, "holder unlocks", lock(holder, meta.LockUnlock, false), 0)
			select {
			case err := <-done:
				wantErr(t, "wait of the cleaned session", err, syscall.ENOLCK)
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter still waits 10 s after the lock came free")
			}
			d, err := meta.SessionDetails(root, st, waiter.Sid(), meta.DetailOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if d.LockCount != 0 {
				t.Errorf("the cleaned session holds %d locks", d.LockCount)
			}
			wantErr(t, "new client locks", lock(fresh, meta.LockWrite, false), 0)
			wantErr(t, "new client unlocks", lock(fresh, meta.LockUnlock, false), 0)
		})
	}
}

// stripIdentity rewrites the record of session sid as a client that did
// not record its process wrote it.
func stripIdentity(t *testing.T, st store.Store, sid uint64) {
	t.Helper()
	err := st.Update(root, func(tx store.Tx) error {
		ss, err := tx.Sessions()
		if err != nil {
			return err
		}
		for _, s := range ss {
			if s.Sid != sid {
				continue
			}
			var rec map[string]any
			if err := json.Unmarshal(s.Info, &rec); err != nil {
				return err
			}
			for _, k := range []string{"BootID", "PIDNamespace", "ProcStart"} {
				if _, ok := rec[k]; !ok {
					return fmt.Errorf("session %d records no %s: %s", sid, k, s.Info)
				}
				delete(rec, k)
			}
			if s.Info, err = json.Marshal(rec); err != nil {
				return err
			}
			tx.SetSession(s)
			return nil
		}
		return fmt.Errorf("no session %d", sid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// lockErr is the error of a lock call, whose attributes these tests ignore.
func lockErr(_ *meta.Attr, err error) error { return err }
