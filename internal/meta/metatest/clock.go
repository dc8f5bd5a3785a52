package metatest

import (
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// atimeOf, mtimeOf and ctimeOf return a node's times.
func atimeOf(a *meta.Attr) time.Time { return time.Unix(a.Atime, int64(a.Atimensec)) }
func mtimeOf(a *meta.Attr) time.Time { return time.Unix(a.Mtime, int64(a.Mtimensec)) }
func ctimeOf(a *meta.Attr) time.Time { return time.Unix(a.Ctime, int64(a.Ctimensec)) }

// testClockStamps: every change stamps exactly the times POSIX says,
// with the client's clock to the nanosecond, and leaves the others alone;
// a directory changed again within DirMtimeSkip keeps its times. With the
// real clock a test can only check that times moved, not which.
func testClockStamps(t *testing.T, ns newStoreFunc) {
	ctx := root
	clk := newClock()
	st := openStore(t, ns)
	format(t, st, testFormat())
	c := newClient(t, st, meta.Config{Now: clk.now})
	// An engine that misses phantoms has every change of a directory's
	// entries write its node (see store.Limits), so no skip window.
	missesPhantoms := store.LimitsOf(st).MissesPhantoms
	d := mkdir(t, c, meta.RootIno, "d")
	f := mkfile(t, c, d.Ino, "f")
	for _, a := range []*meta.Attr{d, f} {
		if now := clk.now(); !atimeOf(a).Equal(now) || !mtimeOf(a).Equal(now) || !ctimeOf(a).Equal(now) {
			t.Fatalf("inode %d created at %v has times %v %v %v", a.Ino, now, atimeOf(a), mtimeOf(a), ctimeOf(a))
		}
	}
	explicit := time.Date(2001, 2, 3, 4, 5, 6, 7, time.UTC)

	// which times of an inode a step stamps with the clock; the others
	// must keep their values.
	type stamped struct {
		ino     meta.Ino
		a, m, c bool
	}
	cases := []struct {
		name    string
		advance time.Duration // default: an hour and a few nanoseconds
		op      func() error
		want    []stamped  // inodes not listed keep all their times
		mtime   *time.Time // f's mtime when the step sets it explicitly
	}{
		{name: "write", op: func() error {
			id, err := c.NewSliceID(ctx)
			if err != nil {
				return err
			}
			_, err = Write(ctx, c, f.Ino, 0, meta.Slice{Id: id, Size: 10, Len: 10})
			return err
		}, want: []stamped{{ino: f.Ino, m: true, c: true}}},
		{name: "chmod", op: func() error {
			_, err := c.SetAttr(ctx, f.Ino, meta.SetMode, &meta.Attr{Mode: 0o600})
			return err
		}, want: []stamped{{ino: f.Ino, c: true}}},
		{name: "truncate", op: func() error {
			_, err := c.SetAttr(ctx, f.Ino, meta.SetSize, &meta.Attr{Length: 5})
			return err
		}, want: []stamped{{ino: f.Ino, m: true, c: true}}},
		{name: "utimes now", op: func() error {
			_, err := c.SetAttr(ctx, f.Ino, meta.SetAtimeNow|meta.SetMtimeNow, &meta.Attr{})
			return err
		}, want: []stamped{{ino: f.Ino, a: true, m: true, c: true}}},
		{name: "utimes explicit mtime", op: func() error {
			_, err := c.SetAttr(ctx, f.Ino, meta.SetMtime, &meta.Attr{Mtime: explicit.Unix(), Mtimensec: uint32(explicit.Nanosecond())})
			return err
		}, want: []stamped{{ino: f.Ino, c: true}}, mtime: &explicit},
		{name: "setxattr", op: func() error {
			return c.SetXattr(ctx, f.Ino, "user.k", []byte("v"), 0)
		}, want: []stamped{{ino: f.Ino, c: true}}},
		{name: "link into root", op: func() error {
			_, err := c.Link(ctx, f.Ino, meta.RootIno, []byte("g"))
			return err
		}, want: []stamped{{ino: f.Ino, c: true}, {ino: meta.RootIno, m: true, c: true}}},
		{name: "rename across directories", op: func() error {
			return c.Rename(ctx, meta.RootIno, []byte("g"), d.Ino, []byte("h"), 0)
		}, want: []stamped{{ino: f.Ino, c: true}, {ino: meta.RootIno, m: true, c: true}, {ino: d.Ino, m: true, c: true}}},
		{name: "unlink one of two links", op: func() error {
			return c.Unlink(ctx, d.Ino, []byte("h"))
		}, want: []stamped{{ino: f.Ino, c: true}, {ino: d.Ino, m: true, c: true}}},
		{name: "create in a directory stamped long ago", op: func() error {
			_, err := c.Mknod(ctx, d.Ino, []byte("e1"), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
			return err
		}, want: []stamped{{ino: d.Ino, m: true, c: true}}},
		{name: "create within DirMtimeSkip of the last stamp", advance: time.Millisecond, op: func() error {
			_, err := c.Mknod(ctx, d.Ino, []byte("e2"), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
			return err
		}, want: func() []stamped {
			if missesPhantoms {
				return []stamped{{ino: d.Ino, m: true, c: true}}
			}
			return nil
		}()},
	}
	watched := []meta.Ino{meta.RootIno, d.Ino, f.Ino}
	for i, tc := range cases {
		before := map[meta.Ino]*meta.Attr{}
		for _, ino := range watched {
			before[ino] = getattr(t, c, ino)
		}
		adv := tc.advance
		if adv == 0 {
			adv = time.Hour + time.Duration(i+1)
		}
		clk.add(adv)
		now := clk.now()
		if err := tc.op(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, ino := range watched {
			var w stamped
			for _, s := range tc.want {
				if s.ino == ino {
					w = s
				}
			}
			got, old := getattr(t, c, ino), before[ino]
			for _, tm := range []struct {
				which    string
				stamp    bool
				got, old time.Time
			}{
				{"atime", w.a, atimeOf(got), atimeOf(old)},
				{"mtime", w.m, mtimeOf(got), mtimeOf(old)},
				{"ctime", w.c, ctimeOf(got), ctimeOf(old)},
			} {
				want := tm.old
				if tm.stamp {
					want = now
				}
				if tm.which == "mtime" && ino == f.Ino && tc.mtime != nil {
					want = *tc.mtime
				}
				if !tm.got.Equal(want) {
					t.Errorf("%s: inode %d %s = %v, want %v", tc.name, ino, tm.which, tm.got.UTC(), want.UTC())
				}
			}
		}
	}
}

// testClockRelatime: the relatime rule (update atime when it is not newer
// than mtime or ctime, or over a day old) and the other modes, at times a
// test with the real clock cannot reach.
func testClockRelatime(t *testing.T, ns newStoreFunc) {
	ctx := root
	type step struct {
		advance time.Duration
		write   bool // change the file (mtime and ctime) before the read
		updated bool // whether the read must stamp atime
	}
	cases := []struct {
		mode  string
		steps []step
	}{
		{meta.AtimeRelative, []step{
			{advance: time.Minute, updated: true},              // atime equals mtime and ctime
			{advance: time.Minute, updated: false},             // newer than both, recent
			{advance: 23 * time.Hour, updated: false},          // under a day old
			{advance: time.Hour, updated: true},                // over a day old
			{advance: time.Second, write: true, updated: true}, // changed since
			{advance: 24 * time.Hour, updated: false},          // exactly a day old
			{advance: time.Nanosecond, updated: true},          // just over a day
			{advance: time.Second, updated: false},             // fresh again
		}},
		{meta.AtimeStrict, []step{
			{advance: time.Minute, updated: true},
			{advance: time.Nanosecond, updated: true},
		}},
		{meta.AtimeNone, []step{
			{advance: time.Minute, updated: false},
			{advance: 48 * time.Hour, write: true, updated: false},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			clk := newClock()
			c := setup(t, ns, meta.Config{Now: clk.now, AtimeMode: tc.mode})
			f := mkfile(t, c, meta.RootIno, "f")
			for i, s := range tc.steps {
				clk.add(s.advance)
				if s.write {
					if _, err := c.SetAttr(ctx, f.Ino, meta.SetMtimeNow, &meta.Attr{}); err != nil {
						t.Fatal(err)
					}
					clk.add(time.Nanosecond)
				}
				before := getattr(t, c, f.Ino)
				if err := c.TouchAtime(ctx, f.Ino, before); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				want := atimeOf(before)
				if s.updated {
					want = clk.now()
				}
				if got := atimeOf(getattr(t, c, f.Ino)); !got.Equal(want) {
					t.Errorf("step %d (+%v): atime %v, want %v", i, s.advance, got.UTC(), want.UTC())
				}
			}
		})
	}
}

// testClockSession: a session's start and heartbeat are stamped with the
// client's clock.
func testClockSession(t *testing.T, ns newStoreFunc) {
	ctx := root
	clk := newClock()
	st := openStore(t, ns)
	format(t, st, testFormat())
	newClient(t, st, meta.Config{Now: clk.now})

	ss, err := meta.Sessions(ctx, st)
	if err != nil || len(ss) != 1 {
		t.Fatalf("sessions: %v, %v", ss, err)
	}
	if want := clk.now().Unix(); ss[0].Heartbeat.Unix() != want || ss[0].Started != want {
		t.Errorf("session started %d, heartbeat %d; want both %d (the clock)", ss[0].Started, ss[0].Heartbeat.Unix(), want)
	}
}
