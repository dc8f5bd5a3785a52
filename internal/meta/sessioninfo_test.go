package meta_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/engine/sqlite"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// detailEngines are the engines the session-detail tests run on: the
// key-value layout (over mem) and the SQL one (over SQLite).
var detailEngines = []struct {
	name string
	open func(t *testing.T) store.Store
}{
	{"mem", func(t *testing.T) store.Store { return kvstore.New(mem.New(t.Name())) }},
	{"sqlite", func(t *testing.T) store.Store {
		t.Helper()
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "meta.db"), true)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}},
}

// detailVolume formats a volume with a trash on st and opens a client
// on it, closed when the test ends.
func detailVolume(t *testing.T, st store.Store, now func() time.Time) (*meta.Session, uint64) {
	t.Helper()
	ctx := context.Background()
	if _, err := meta.FormatVolume(ctx, st, &meta.Format{Name: "detail", UUID: "u", Storage: "mem", Bucket: "b",
		BlockSize: 4096, TrashDays: 1}); err != nil {
		t.Fatal(err)
	}
	return detailClient(t, st, now, "/first")
}

// detailClient opens a client whose session names mountPoint, closed
// when the test ends, and returns it with its session id.
func detailClient(t *testing.T, st store.Store, now func() time.Time, mountPoint string) (*meta.Session, uint64) {
	t.Helper()
	ctx := context.Background()
	c, err := meta.NewSession(ctx, st, meta.Config{Now: now, SessionInfo: meta.SessionInfo{MountPoint: mountPoint}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(ctx) })
	ss, err := meta.Sessions(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if s.MountPoint == mountPoint {
			return c, s.Sid
		}
	}
	t.Fatalf("no session of %s among %+v", mountPoint, ss)
	return nil, 0
}

// mkfile creates name in parent with the given length.
func mkfile(t *testing.T, c *meta.Session, parent meta.Ino, name string, length uint64) meta.Ino {
	t.Helper()
	ctx := context.Background()
	a, err := c.Mknod(ctx, parent, []byte(name), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	if length > 0 {
		if _, err := c.SetAttr(ctx, a.Ino, meta.SetSize, &meta.Attr{Length: length}); err != nil {
			t.Fatalf("truncate %s: %v", name, err)
		}
	}
	return a.Ino
}

// TestSessionDetails: two sessions open files, lock them (flock and
// POSIX ranges), remove files into the trash and one for good while it
// is open; each session's details list its own locks and sustained file
// with their paths, the trash counts what was removed, and the pending
// deletions count the sustained file, which is also an orphan.
func TestSessionDetails(t *testing.T) {
	for _, e := range detailEngines {
		t.Run(e.name, func(t *testing.T) {
			ctx := context.Background()
			st := e.open(t)
			t.Cleanup(func() { st.Close() })
			now := time.Date(2024, 5, 6, 7, 30, 0, 0, time.UTC)
			clock := func() time.Time { return now }
			c, sid := detailVolume(t, st, clock)
			other, otherSid := detailClient(t, st, clock, "/other")

			d, err := c.Mknod(ctx, meta.RootIno, []byte("d"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
			if err != nil {
				t.Fatal(err)
			}
			flocked := mkfile(t, c, d.Ino, "flocked", 10)
			plocked := mkfile(t, c, meta.RootIno, "plocked", 20)
			theirs := mkfile(t, c, d.Ino, "theirs", 30)
			for _, ino := range []meta.Ino{flocked, plocked} {
				if _, err := c.Open(ctx, ino, syscall.O_RDWR); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.Flock(ctx, flocked, 7, meta.LockWrite, false); err != nil {
				t.Fatal(err)
			}
			for _, lk := range []meta.PosixLock{
				{Start: 0, End: 9, Type: meta.LockWrite, Pid: 42},
				{Start: 100, End: meta.LockEnd, Type: meta.LockRead, Pid: 42},
			} {
				if _, err := c.SetLk(ctx, plocked, 8, lk, false); err != nil {
					t.Fatal(err)
				}
			}
			// The other session's lock is not this session's, and a
			// lock taken and dropped leaves nothing.
			if _, err := other.Flock(ctx, theirs, 9, meta.LockRead, false); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Flock(ctx, theirs, 10, meta.LockRead, false); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Flock(ctx, theirs, 10, meta.LockUnlock, false); err != nil {
				t.Fatal(err)
			}

			// Two files into the trash; a third, held open, into the
			// trash and then out of it for good: sustained.
			mkfile(t, c, d.Ino, "gone1", 1000)
			mkfile(t, c, meta.RootIno, "gone2", 24)
			held := mkfile(t, c, meta.RootIno, "held", 500)
			if _, err := c.Open(ctx, held, syscall.O_RDONLY); err != nil {
				t.Fatal(err)
			}
			for _, rm := range []struct {
				dir  meta.Ino
				name string
			}{{d.Ino, "gone1"}, {meta.RootIno, "gone2"}, {meta.RootIno, "held"}} {
				if err := c.Unlink(ctx, rm.dir, []byte(rm.name)); err != nil {
					t.Fatalf("unlink %s: %v", rm.name, err)
				}
			}
			hour := meta.TrashHourIno(now)
			if err := c.Unlink(ctx, hour, fmt.Appendf(nil, "%d-%d-held", meta.RootIno, held)); err != nil {
				t.Fatalf("unlink held from the trash: %v", err)
			}

			got, err := meta.SessionDetails(ctx, st, sid, meta.DetailOptions{Limit: 10, Paths: true})
			if err != nil {
				t.Fatal(err)
			}
			want := &meta.SessionDetail{Sid: sid,
				SustainedCount: 1, Sustained: []meta.SessionFile{{Ino: held, Length: 500}},
				LockCount: 3, Locks: []meta.HeldLock{
					{Ino: flocked, Kind: meta.LockKindFlock, Type: "write", Owner: 7, Path: "/d/flocked"},
					{Ino: plocked, Kind: meta.LockKindPosix, Type: "write", Owner: 8, Start: 0, End: 9, Pid: 42, Path: "/plocked"},
					{Ino: plocked, Kind: meta.LockKindPosix, Type: "read", Owner: 8, Start: 100, End: meta.LockEnd, Pid: 42, Path: "/plocked"},
				}}
			if flocked > plocked { // listed by inode
				want.Locks = append(want.Locks[1:], want.Locks[0])
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("details of session %d:\n got %+v\nwant %+v", sid, got, want)
			}

			theirsWant := &meta.SessionDetail{Sid: otherSid, LockCount: 1, Locks: []meta.HeldLock{
				{Ino: theirs, Kind: meta.LockKindFlock, Type: "read", Owner: 9, Path: "/d/theirs"}}}
			if got, err := meta.SessionDetails(ctx, st, otherSid, meta.DetailOptions{Limit: 10, Paths: true}); err != nil || !reflect.DeepEqual(got, theirsWant) {
				t.Errorf("details of session %d: %+v, %v\nwant %+v", otherSid, got, err, theirsWant)
			}

			// A limit cuts the lists, not the counts; no paths unless asked.
			got, err = meta.SessionDetails(ctx, st, sid, meta.DetailOptions{Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if got.SustainedCount != 1 || got.LockCount != 3 || len(got.Sustained) != 1 || len(got.Locks) != 1 || got.Locks[0].Path != "" {
				t.Errorf("details with limit 1 and no paths: %+v", got)
			}
			if got, err := meta.SessionDetails(ctx, st, sid, meta.DetailOptions{}); err != nil || got.Sustained != nil || got.Locks != nil || got.LockCount != 3 {
				t.Errorf("details with limit 0: %+v, %v; want counts only", got, err)
			}

			trash, err := meta.TrashUsage(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			if want := (meta.TrashReport{Dirs: 1, Files: 2, Bytes: 1024}); *trash != want {
				t.Errorf("trash = %+v, want %+v", *trash, want)
			}

			// held lost its last name while another session was live:
			// sustained, and an orphan until the sessions' background
			// round has seen that this one holds it (orphan.go).
			pending, err := meta.PendingDeletions(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			if pending.Sustained != 1 || pending.SustainedBytes != 500 || pending.Orphans > 1 || pending.Truncations != 0 {
				t.Errorf("pending deletions = %+v, want 1 sustained file of 500 bytes", *pending)
			}
		})
	}
}

// TestPaths resolves paths through nested directories, the trash and a
// directory of more than one page, and leaves out inodes without one.
func TestPaths(t *testing.T) {
	ctx := context.Background()
	st := kvstore.New(mem.New(t.Name()))
	t.Cleanup(func() { st.Close() })
	now := time.Date(2024, 5, 6, 7, 30, 0, 0, time.UTC)
	c, _ := detailVolume(t, st, func() time.Time { return now })
	dir := meta.RootIno
	for _, name := range []string{"a", "b", "c"} {
		a, err := c.Mknod(ctx, dir, []byte(name), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
		if err != nil {
			t.Fatal(err)
		}
		dir = a.Ino
	}
	var many []meta.Ino
	for i := range 1200 { // more than one page of entries
		many = append(many, mkfile(t, c, dir, fmt.Sprintf("f%04d", i), 0))
	}
	deep, last := many[3], many[len(many)-1]
	trashed := mkfile(t, c, meta.RootIno, "trashed", 1)
	if err := c.Unlink(ctx, meta.RootIno, []byte("trashed")); err != nil {
		t.Fatal(err)
	}
	got, err := meta.Paths(ctx, st, []meta.Ino{deep, last, trashed, meta.RootIno, 999_999})
	if err != nil {
		t.Fatal(err)
	}
	want := map[meta.Ino]string{
		deep:         "/a/b/c/f0003",
		last:         "/a/b/c/f1199",
		trashed:      fmt.Sprintf("/.trash/%s/%d-%d-trashed", now.Format("2006-01-02-15"), meta.RootIno, trashed),
		meta.RootIno: "/",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("paths:\n got %v\nwant %v", got, want)
	}
}

// TestPendingDeletions counts orphans, files sessions sustain (once each)
// and unfinished truncations from records written straight to the store.
func TestPendingDeletions(t *testing.T) {
	ctx := context.Background()
	st := spaceStore(t, func(tx store.Tx) {
		for ino, length := range map[meta.Ino]uint64{10: 100, 11: 20, 12: 3} {
			tx.SetNode(&store.Node{Ino: ino, Type: store.TypeFile, Mode: 0o644, Length: length})
		}
		tx.SetSession(store.Session{Sid: 1, Heartbeat: spaceNow.Unix(), Info: []byte("{}")})
		tx.SetSession(store.Session{Sid: 2, Heartbeat: spaceNow.Unix(), Info: []byte("{}")})
		tx.SetSustained(0, 10, true) // an orphan...
		tx.SetSustained(1, 10, true) // ...a session said it holds
		tx.SetSustained(0, 13, true) // an orphan whose node is gone
		tx.SetSustained(1, 11, true) // held by two sessions
		tx.SetSustained(2, 11, true)
		tx.SetSustained(2, 12, true)
		tx.SetTruncation(store.Truncation{Ino: 12, From: 3}, true)
	})
	got, err := meta.PendingDeletions(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	want := meta.PendingReport{Orphans: 2, OrphanBytes: 100, Sustained: 3, SustainedBytes: 123, Truncations: 1}
	if *got != want {
		t.Errorf("pending deletions = %+v, want %+v", *got, want)
	}
}
