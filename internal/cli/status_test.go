package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/all"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/volume/volumetest"
)

// TestStatusMore: status prints no space figures by default, and with
// --more the Space object of a small volume with an overwrite and a
// deleted file.
func TestStatusMore(t *testing.T) {
	ctx := context.Background()
	tv := volumetest.New(t, nil)
	st, err := all.Open(ctx, tv.MetaURL, false)
	if err != nil {
		t.Fatal(err)
	}
	c, err := meta.NewSession(ctx, st, meta.Config{})
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, slices ...meta.Slice) {
		t.Helper()
		a, err := c.Mknod(ctx, meta.RootIno, []byte(name), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range slices {
			if s.Id, err = c.NewSliceID(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := metatest.Write(ctx, c, a.Ino, 0, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	// f: 100 KiB, its middle 40 KiB overwritten; g: 10 KiB, deleted, so
	// its slice waits in the deletion queue (the client deletes no
	// blocks).
	write("f", meta.Slice{Size: 100 << 10, Len: 100 << 10}, meta.Slice{Pos: 30 << 10, Size: 40 << 10, Len: 40 << 10})
	write("g", meta.Slice{Size: 10 << 10, Len: 10 << 10})
	if err := c.Unlink(ctx, meta.RootIno, []byte("g")); err != nil {
		t.Fatal(err)
	}
	if err := c.FlushDeletions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()

	status := func(args ...string) map[string]json.RawMessage {
		t.Helper()
		root := NewRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(append([]string{"status", tv.MetaURL}, args...))
		if err := root.Execute(); err != nil {
			t.Fatalf("status %v: %v", args, err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out.Bytes(), &m); err != nil {
			t.Fatalf("status %v printed no JSON object: %v\n%s", args, err, out.String())
		}
		return m
	}
	if m := status(); m["Space"] != nil || m["Setting"] == nil {
		t.Errorf("status without --more: keys %v, want Setting and Sessions only", keys(m))
	}
	m := status("--more")
	var got spaceStatus
	if err := json.Unmarshal(m["Space"], &got); err != nil {
		t.Fatalf("status --more: Space %s: %v", m["Space"], err)
	}
	want := spaceStatus{Files: 1, Chunks: 1, SliceEntries: 2, Slices: 2,
		ReferencedBytes: 140 << 10, VisibleBytes: 100 << 10, AmplificationBytes: 40 << 10, AmplificationRatio: 1.4,
		Backlog: spaceBacklog{Slices: 1, SliceBytes: 10 << 10}}
	if got != want {
		t.Errorf("status --more: Space = %+v\nwant %+v", got, want)
	}
}

// TestStatusSessions: a live session's sustained file and locks are
// counted by status and listed with their paths by status --more, which
// also adds the trash and the deletions waiting.
func TestStatusSessions(t *testing.T) {
	ctx := context.Background()
	tv := volumetest.New(t, func(f *meta.Format) { f.TrashDays = 1 })
	st, err := all.Open(ctx, tv.MetaURL, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	c, err := meta.NewSession(ctx, st, meta.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(ctx) })
	d, err := c.Mknod(ctx, meta.RootIno, []byte("d"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	mkfile := func(parent meta.Ino, name string, length uint64, open bool) meta.Ino {
		t.Helper()
		a, err := c.Mknod(ctx, parent, []byte(name), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.SetAttr(ctx, a.Ino, meta.SetSize, &meta.Attr{Length: length}); err != nil {
			t.Fatal(err)
		}
		if open {
			if _, err := c.Open(ctx, a.Ino, syscall.O_RDWR); err != nil {
				t.Fatal(err)
			}
		}
		return a.Ino
	}
	f := mkfile(d.Ino, "f", 300, true)
	if _, err := c.Flock(ctx, f, 5, meta.LockWrite, false); err != nil {
		t.Fatal(err)
	}
	g := mkfile(meta.RootIno, "g", 10, true)
	if _, err := c.SetLk(ctx, g, 6, meta.PosixLock{Start: 2, End: 3, Type: meta.LockRead, Pid: 77}, false); err != nil {
		t.Fatal(err)
	}
	mkfile(meta.RootIno, "trashed", 77, false)
	h := mkfile(meta.RootIno, "h", 55, true)
	for _, name := range []string{"trashed", "h"} {
		if err := c.Unlink(ctx, meta.RootIno, []byte(name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Unlink(ctx, meta.TrashHourIno(now), fmt.Appendf(nil, "%d-%d-h", meta.RootIno, h)); err != nil {
		t.Fatal(err)
	}

	type output struct {
		Sessions []sessionStatus
		Trash    *trashStatus
		Deletion *deletionStatus
	}
	status := func(args ...string) output {
		t.Helper()
		root := NewRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(append([]string{"status", tv.MetaURL}, args...))
		if err := root.Execute(); err != nil {
			t.Fatalf("status %v: %v", args, err)
		}
		var o output
		if err := json.Unmarshal(out.Bytes(), &o); err != nil {
			t.Fatalf("status %v: %v\n%s", args, err, out.String())
		}
		if len(o.Sessions) != 1 {
			t.Fatalf("status %v: sessions %+v, want one", args, o.Sessions)
		}
		return o
	}
	o := status()
	if s := o.Sessions[0]; s.SustainedCount != 1 || s.LockCount != 2 || s.Sustained != nil || s.Locks != nil || o.Trash != nil || o.Deletion != nil {
		t.Errorf("status: %+v, trash %v, deletion %v; want 1 sustained file and 2 locks counted, nothing listed", s, o.Trash, o.Deletion)
	}
	o = status("--more")
	s := o.Sessions[0]
	if want := []sustainedFile{{Inode: h, Length: 55}}; !reflect.DeepEqual(s.Sustained, want) {
		t.Errorf("status --more: Sustained %+v, want %+v", s.Sustained, want)
	}
	wantLocks := []lockStatus{
		{Inode: f, Kind: "flock", Type: "write", Owner: 5, Path: "/d/f"},
		{Inode: g, Kind: "posix", Type: "read", Owner: 6, Range: &lockRange{Start: 2, End: 3, Pid: 77}, Path: "/g"},
	}
	if !reflect.DeepEqual(s.Locks, wantLocks) {
		t.Errorf("status --more: Locks %+v, want %+v", s.Locks, wantLocks)
	}
	if want := (trashStatus{Files: 1, Bytes: 77, Dirs: 1}); o.Trash == nil || *o.Trash != want {
		t.Errorf("status --more: Trash %+v, want %+v", o.Trash, want)
	}
	if o.Deletion == nil || o.Deletion.SustainedFiles != 1 || o.Deletion.SustainedBytes != 55 || o.Deletion.Orphans != 0 {
		t.Errorf("status --more: Deletion %+v, want 1 sustained file of 55 bytes, no orphans", o.Deletion)
	}
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestGCPrintsSpace: gc's report carries the space figures of the same
// scan.
func TestGCPrintsSpace(t *testing.T) {
	tv := volumetest.New(t, nil)
	volumetest.WriteFile(t, tv.MetaURL, "f", bytes.Repeat([]byte("x"), 100<<10))
	root := NewRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"gc", tv.MetaURL})
	if err := root.Execute(); err != nil {
		t.Fatalf("gc: %v", err)
	}
	for _, want := range []string{
		"metadata:          1 files, 1 chunks, 1 slice entries\n",
		"  referenced:      1 slices (100.0 KiB)\n",
		"  visible:         100.0 KiB\n",
		"  amplification:   0 B (ratio 1.00)\n",
		"deletion backlog:\n  slices:          0 (0 B)\n",
	} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Errorf("gc report lacks %q:\n%s", want, out.String())
		}
	}
}
