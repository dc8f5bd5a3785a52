package metaserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/sluice"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/remote"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// readAfterChangeForTest is how long a reader's reads stay with the
// leader after it saw a new index (package sluice's readAfterChange).
const readAfterChangeForTest = 20 * time.Millisecond

// mountOn opens a session of the volume at url whose operations run on
// the group (package remote), as a mount's do.
func mountOn(t testing.TB, url string) *remote.Client {
	t.Helper()
	ctx := context.Background()
	db, err := sluice.Open(ctx, url, false)
	if err != nil {
		t.Fatal(err)
	}
	local, err := meta.NewSession(ctx, kvstore.New(db), meta.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := remote.New(ctx, db, local, remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rc.Close(ctx)
		local.Close(ctx)
		db.Close()
	})
	return rc
}

// answered returns how many calls of method m served as reads of any
// member (OpReadCall).
func answered(t *testing.T, m *member, method string) uint64 {
	t.Helper()
	fams, err := m.s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "sluice_metaserver_op_seconds" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == "any_"+method {
					return s.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// TestReadsFromFollowers checks read=follower on a group of three: the
// reads go to a follower, a mount reads its own changes at once, a
// follower cut off from the group is never read past the bound (the
// leader answers), and one that is down costs no error.
func TestReadsFromFollowers(t *testing.T) {
	ms := startGroup(t, 3, func(ro *RaftOptions) { ro.net = &netFaults{} })
	l := leader(t, ms)
	var addrs []string
	for _, m := range ms {
		addrs = append(addrs, m.client)
	}
	base := "sluice://" + strings.Join(addrs, ",") + "/vol?timeout=20s"
	const staleness = 300 * time.Millisecond
	ctx := context.Background()
	func() {
		db, err := sluice.Open(ctx, base, true)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		f := &meta.Format{Name: "vol", UUID: "vol-uuid", Storage: "mem", Bucket: "b", BlockSize: 4096}
		if _, err := meta.FormatVolume(ctx, kvstore.New(db), f); err != nil {
			t.Fatal(err)
		}
	}()
	file := meta.NewNode{Type: store.TypeFile, Mode: 0o644}
	writer := mountOn(t, base)
	reader := mountOn(t, base+fmt.Sprintf("&read=follower&staleness=%v", staleness))

	// Its own changes, read at once, whoever answers.
	for i := range 50 {
		name := []byte(fmt.Sprint("own", i))
		a, err := reader.Mknod(ctx, meta.RootIno, name, file)
		if err != nil {
			t.Fatal(err)
		}
		got, err := reader.Lookup(ctx, meta.RootIno, name)
		if err != nil || got.Ino != a.Ino {
			t.Fatalf("lookup of %s just made: %v, %v (want inode %d)", name, got, err, a.Ino)
		}
	}
	// Reads alone go to a follower once the leader's index is known.
	var from *member
	deadline := time.Now().Add(10 * time.Second)
	for from == nil {
		if time.Now().After(deadline) {
			t.Fatal("no follower answered a lookup in 10s")
		}
		if _, err := reader.Lookup(ctx, meta.RootIno, []byte("own0")); err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m != l && answered(t, m, "lookup") > 0 {
				from = m
			}
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The follower read from is cut off from the group: it keeps
	// answering its clients, from records that no longer move. What
	// another mount changed before the bound is seen all the same.
	// The reader reads all along, so that what it knows of the leader
	// stays fresh and its reads keep going to the follower.
	readFor := func(d time.Duration) {
		t.Helper()
		for end := time.Now().Add(d); time.Now().Before(end); {
			if _, err := reader.GetAttr(ctx, meta.RootIno); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	from.s.opts.Raft.net.setCut(true)
	for i := range 3 {
		name := []byte(fmt.Sprint("other", i))
		a, err := writer.Mknod(ctx, meta.RootIno, name, file)
		if err != nil {
			t.Fatal(err)
		}
		readFor(staleness + 50*time.Millisecond)
		got, err := reader.Lookup(ctx, meta.RootIno, name)
		if err != nil || got.Ino != a.Ino {
			t.Fatalf("lookup %v after another mount made %s: %v, %v (want inode %d)", staleness, name, got, err, a.Ino)
		}
		name = []byte(fmt.Sprint("own-cut", i))
		if a, err = reader.Mknod(ctx, meta.RootIno, name, file); err != nil {
			t.Fatal(err)
		}
		readFor(2 * readAfterChangeForTest)
		got, err = reader.Lookup(ctx, meta.RootIno, name)
		if err != nil || got.Ino != a.Ino {
			t.Fatalf("lookup of %s made before: %v, %v (want inode %d)", name, got, err, a.Ino)
		}
	}
	from.s.opts.Raft.net.setCut(false)

	// Healed, it catches up and answers again after the pause.
	before := answered(t, from, "getattr")
	deadline = time.Now().Add(10 * time.Second)
	for answered(t, from, "getattr") == before {
		if time.Now().After(deadline) {
			t.Fatal("the healed follower answers no read in 10s")
		}
		if _, err := reader.GetAttr(ctx, meta.RootIno); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Down, it costs no error: the reads go elsewhere.
	if err := from.s.Close(); err != nil {
		t.Fatal(err)
	}
	from.s = nil
	for i := range 20 {
		if _, err := reader.Lookup(ctx, meta.RootIno, []byte(fmt.Sprint("own", i))); err != nil {
			t.Fatalf("lookup with the follower down: %v", err)
		}
	}
	if _, err := reader.Lookup(ctx, meta.RootIno, []byte("none")); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("lookup of a missing name: %v, want ENOENT", err)
	}
}

// BenchmarkGroupReads runs the metadata benchmarks through a mount's
// path (package remote) on a group of three members on this host, with
// every read from the leader and with read=follower, to compare what
// each read costs and how far reads scale.
func BenchmarkGroupReads(b *testing.B) {
	for _, read := range []string{"leader", "follower"} {
		b.Run("read="+read, func(b *testing.B) {
			metatest.BenchOps(b, func(tb testing.TB) metatest.Ops {
				ms := startGroup(tb, 3)
				leader(tb, ms)
				var addrs []string
				for _, m := range ms {
					addrs = append(addrs, m.client)
				}
				url := "sluice://" + strings.Join(addrs, ",") + "/vol?timeout=20s"
				ctx := context.Background()
				db, err := sluice.Open(ctx, url, true)
				if err != nil {
					tb.Fatal(err)
				}
				defer db.Close()
				if _, err := meta.FormatVolume(ctx, kvstore.New(db), metatest.BenchFormat()); err != nil {
					tb.Fatal(err)
				}
				return mountOn(tb, url+"&read="+read)
			})
		})
	}
}
