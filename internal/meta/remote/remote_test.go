package remote_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/sluice"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/remote"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/meta/subtree"
	"github.com/sluicefs/sluice/internal/metaserver"
	"github.com/sluicefs/sluice/internal/vfs"
	"github.com/sluicefs/sluice/internal/vfs/vfstest"
)

// server runs a metadata server on loopback over a fresh directory.
type server struct {
	srv *metaserver.Server
	url string
}

func startServer(t testing.TB) *server {
	t.Helper()
	srv, err := metaserver.Open(metaserver.Options{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close server: %v", err)
		}
	})
	return &server{srv: srv, url: "sluice://" + l.Addr().String() + "/test"}
}

func openDB(t testing.TB, url string) *sluice.DB {
	t.Helper()
	db, err := sluice.Open(context.Background(), url, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// vfsOptions returns vfstest options for a volume on a fresh server
// whose operations run there, with the rest of o; query is added to the
// URL.
func vfsOptions(t *testing.T, o vfstest.Options, query string, anyCalls *atomic.Uint64, subdir bool) vfstest.Options {
	srv := startServer(t)
	t.Cleanup(func() { anyCalls.Add(answeredByAny(t, srv.srv)) })
	db := openDB(t, srv.url+query)
	o.Store = func(t *testing.T) store.Store { return kvstore.New(db) }
	o.OnClient = func(t *testing.T, c *meta.Session) vfs.Meta {
		rc, err := remote.New(context.Background(), db, c, remote.Options{AtimeMode: o.Meta.AtimeMode, DirAttrReuse: o.Meta.DirAttrReuse})
		if err != nil {
			t.Fatal(err)
		}
		if !subdir {
			return rc
		}
		d, err := rc.Mknod(meta.WithCred(context.Background(), meta.Cred{}), meta.RootIno, []byte("subdir"), meta.NewNode{Type: store.TypeDir, Mode: 0o777})
		if err != nil {
			t.Fatal(err)
		}
		return subtree.New(rc, d.Ino)
	}
	return o
}

// TestVFS runs the VFS suite with every operation on the server: as it
// is, and with the kernel's caches, writeback and the statahead, which
// must forget what the server changes for this session.
func TestVFS(t *testing.T) {
	configs := []struct {
		name   string
		opts   vfstest.Options
		query  string
		subdir bool
	}{
		{"plain", vfstest.Options{}, "", false},
		{"kernel-caches+writeback+statahead", vfstest.Options{
			Chunk: chunk.Config{Writeback: true, MaxReadahead: 4 * vfstest.BlockSize, Prefetch: 2},
			VFS:   vfs.Config{AttrTimeout: time.Second, EntryTimeout: time.Second, DirEntryTimeout: time.Second},
			Meta:  meta.Config{Statahead: time.Second, DirAttrReuse: 100 * time.Millisecond, AtimeMode: meta.AtimeRelative},
		}, "", false},
		// The reads any member answers, answered by the server's reader
		// (the POSIX core of no session) rather than the session's.
		{"read=follower", vfstest.Options{Meta: meta.Config{AtimeMode: meta.AtimeRelative}}, "?read=follower&staleness=10s", false},
		// One directory as the root (mount --subdir): the wrapper must
		// pass on exactly the capabilities the client has.
		{"subdir", vfstest.Options{}, "", true},
	}
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			var anyCalls atomic.Uint64
			vfstest.Run(t, func(t *testing.T) *vfs.VFS {
				o := c.opts
				if o.Chunk.Writeback {
					o.Chunk.CacheDirs = []string{t.TempDir()}
				}
				return vfstest.New(t, vfsOptions(t, o, c.query, &anyCalls, c.subdir))
			})
			if n := anyCalls.Load(); (n > 0) != strings.Contains(c.query, "read=follower") {
				t.Errorf("%d calls answered as reads of any member", n)
			}
		})
	}
}

// answeredByAny returns how many calls srv answered as reads of any
// member (OpReadCall).
func answeredByAny(t *testing.T, srv *metaserver.Server) uint64 {
	t.Helper()
	fams, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range fams {
		if f.GetName() != "sluice_metaserver_op_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && strings.HasPrefix(l.GetValue(), "any_") {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return n
}

// volume is a formatted volume on a server, with a session's own client
// and the remote client of its operations.
type volume struct {
	db    *sluice.DB
	local *meta.Session
	rc    *remote.Client
}

func newVolume(t *testing.T, url string) *volume { return newVolumeWith(t, url, meta.Config{}) }

func newVolumeWith(t *testing.T, url string, conf meta.Config) *volume {
	t.Helper()
	ctx := context.Background()
	db := openDB(t, url)
	st := kvstore.New(db)
	f := &meta.Format{Name: "test", UUID: "test-uuid", Storage: "mem", Bucket: "b", BlockSize: 4096}
	if _, err := meta.FormatVolume(ctx, st, f); err != nil {
		t.Fatal(err)
	}
	local, err := meta.NewSession(ctx, st, conf)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := remote.New(ctx, db, local, remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rc.Close(ctx); err != nil {
			t.Errorf("close remote: %v", err)
		}
		if err := local.Close(ctx); err != nil {
			t.Errorf("close client: %v", err)
		}
	})
	return &volume{db: db, local: local, rc: rc}
}

// TestCallsRunOnServer checks that the operations reach the server as
// calls, one request each.
func TestCallsRunOnServer(t *testing.T) {
	s := startServer(t)
	v := newVolume(t, s.url)
	ctx := meta.WithCred(context.Background(), meta.Cred{})
	before := v.rc.Seq()
	a, err := v.rc.Create(ctx, meta.RootIno, []byte("f"), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.rc.Lookup(ctx, meta.RootIno, []byte("f")); err != nil {
		t.Fatal(err)
	}
	if err := v.rc.Release(ctx, a.Ino); err != nil {
		t.Fatal(err)
	}
	if err := v.rc.Unlink(ctx, meta.RootIno, []byte("f")); err != nil {
		t.Fatal(err)
	}
	if got := v.rc.Seq() - before; got != 4 {
		t.Fatalf("4 operations made %d calls", got)
	}
	if got := callCount(t, s.srv, "call_create") + callCount(t, s.srv, "call_unlink"); got != 2 {
		t.Fatalf("server counted %d create and unlink calls, want 2", got)
	}
	if _, err := v.rc.GetAttr(ctx, a.Ino); err != meta.ErrNoInode {
		t.Fatalf("getattr of the unlinked file: %v, want meta.ErrNoInode", err)
	}
	if _, err := v.rc.Lookup(ctx, meta.RootIno, []byte("f")); meta.Errno(err) != syscall.ENOENT {
		t.Fatalf("lookup of the unlinked name: %v, want ENOENT", err)
	}
}

// callCount returns how many requests of op the server observed.
func callCount(t *testing.T, srv *metaserver.Server, op string) uint64 {
	t.Helper()
	mfs, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_metaserver_op_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == op {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// TestCallSentAgainRunsOnce sends one create twice with the same call
// number, as a client does when the connection broke before the reply:
// the second gets the first's answer, not EEXIST or a second file.
func TestCallSentAgainRunsOnce(t *testing.T) {
	v := newVolume(t, startServer(t).url)
	ctx := meta.WithCred(context.Background(), meta.Cred{})
	seq := v.rc.Seq() + 1000
	a1, err := v.rc.CreateAs(ctx, seq, meta.RootIno, []byte("once"))
	if err != nil {
		t.Fatal(err)
	}
	a2, err := v.rc.CreateAs(ctx, seq, meta.RootIno, []byte("once"))
	if err != nil {
		t.Fatalf("create sent again: %v", err)
	}
	if a1.Ino != a2.Ino {
		t.Fatalf("create sent again made inode %d after %d", a2.Ino, a1.Ino)
	}
	if _, err := v.rc.CreateAs(ctx, seq+1, meta.RootIno, []byte("once")); meta.Errno(err) != syscall.EEXIST {
		t.Fatalf("a new create of the name: %v, want EEXIST", err)
	}
}

// TestAttachAgainAfterRestart restarts the server under a session that
// holds a file open after unlinking it: the session is attached again
// with the handle, so the file lives until its release and goes then.
func TestAttachAgainAfterRestart(t *testing.T) {
	url, restart := restartableServer(t)
	v := newVolume(t, url)
	ctx := meta.WithCred(context.Background(), meta.Cred{})
	a, err := v.rc.Create(ctx, meta.RootIno, []byte("kept"), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.rc.Open(ctx, a.Ino, syscall.O_RDONLY); err != nil {
		t.Fatal(err)
	}
	if err := v.rc.Unlink(ctx, meta.RootIno, []byte("kept")); err != nil {
		t.Fatal(err)
	}

	restart()
	for i := 0; i < 2; i++ {
		if _, err := v.rc.GetAttr(ctx, a.Ino); err != nil {
			t.Fatalf("getattr of the open unlinked file after the restart: %v", err)
		}
		if err := v.rc.Release(ctx, a.Ino); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.rc.GetAttr(ctx, a.Ino); err != meta.ErrNoInode {
		t.Fatalf("getattr after the last release: %v, want meta.ErrNoInode", err)
	}
}

// restartableServer starts a server in a directory of its own and
// returns its URL and a function that closes it and starts it again on
// the same address, as a restart after a crash would (the log and
// checkpoints are what it comes back from).
func restartableServer(t *testing.T) (url string, restart func()) {
	t.Helper()
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	srv, err := metaserver.Open(metaserver.Options{Dir: dir, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() }) // after the volume's
	return "sluice://" + addr + "/test?timeout=20s", func() {
		t.Helper()
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
		if srv, err = metaserver.Open(metaserver.Options{Dir: dir, Logger: logger}); err != nil {
			t.Fatal(err)
		}
		if l, err = net.Listen("tcp", addr); err != nil {
			t.Fatal(err)
		}
		go srv.Serve(l)
	}
}

// writtenBeforeRestart makes file f on a restartable server, writes
// slice sl at its start with call number seq, and restarts the server, as
// if it died before the write's reply went out.
func writtenBeforeRestart(t *testing.T) (v *volume, ctx context.Context, ino meta.Ino, sl meta.Slice, seq uint64) {
	t.Helper()
	url, restart := restartableServer(t)
	v = newVolume(t, url)
	ctx = meta.WithCred(context.Background(), meta.Cred{})
	a, err := v.rc.Create(ctx, meta.RootIno, []byte("f"), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	id, err := v.rc.NewSliceID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sl = meta.Slice{Id: id, Size: 40, Len: 40}
	seq = v.rc.Seq() + 1000
	if err := v.rc.WriteSliceAs(ctx, seq, false, a.Ino, sl); err != nil {
		t.Fatal(err)
	}
	restart()
	return v, ctx, a.Ino, sl, seq
}

// TestCallSentAgainAfterRestartRunsOnce sends a call again to a server
// restarted after it ran the call, as a mount does when the server died
// before its reply went out: the server has forgotten the call, so it
// runs it again, and the write must not apply twice (a slice named twice
// in its chunk, with one reference). The same slice written by a call
// not sent again is a new write (as copy_file_range's would be).
func TestCallSentAgainAfterRestartRunsOnce(t *testing.T) {
	v, ctx, ino, sl, seq := writtenBeforeRestart(t)
	if err := v.rc.WriteSliceAs(ctx, seq, true, ino, sl); err != nil {
		t.Fatalf("the write sent again after the restart: %v", err)
	}
	got, err := v.rc.ReadChunk(ctx, ino, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Id != sl.Id {
		t.Fatalf("chunk 0 after the write sent again: %+v, want slice %d once", got, sl.Id)
	}
	// A new call goes on from there.
	if err := v.rc.WriteSliceAs(ctx, seq+1, false, ino, sl); err != nil {
		t.Fatal(err)
	}
	if got, err := v.rc.ReadChunk(ctx, ino, 0); err != nil || len(got) != 2 {
		t.Fatalf("chunk 0 after a new write: %+v, %v; want two slices", got, err)
	}
}

// TestWriteSentAgainAfterCompaction sends a slice write again to a
// restarted server after a compaction replaced the slice it wrote: the
// chunk no longer names the slice, yet the write was applied, and must
// not be applied again (the chunk would name a slice the compaction
// released).
func TestWriteSentAgainAfterCompaction(t *testing.T) {
	v, ctx, ino, sl, seq := writtenBeforeRestart(t)
	id2, err := v.local.NewSliceID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	repl := meta.Slice{Id: id2, Size: 40, Len: 40}
	if _, err := v.local.CompactChunk(ctx, ino, 0, []meta.Slice{sl}, []meta.Slice{repl}); err != nil {
		t.Fatal(err)
	}
	if err := v.rc.WriteSliceAs(ctx, seq, true, ino, sl); err != nil {
		t.Fatalf("the write sent again after the restart: %v", err)
	}
	got, err := v.rc.ReadChunk(ctx, ino, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Id != id2 {
		t.Fatalf("chunk 0 after the write sent again: %+v, want the compacted slice %d alone", got, id2)
	}
}

// TestCopySentAgainAfterRestart sends a copy_file_range again to a
// server restarted after it applied the copy. Copies are not in the call
// table: the server runs it again. The second run names the source's
// slices in the destination once more; that must leave the same bytes and
// the same reply, and reference counts that agree with the chunks, so
// that neither file's deletion frees a slice the other still names.
func TestCopySentAgainAfterRestart(t *testing.T) {
	url, restart := restartableServer(t)
	v := newVolume(t, url)
	ctx := meta.WithCred(context.Background(), meta.Cred{})
	newFile := func(name string) meta.Ino {
		t.Helper()
		a, err := v.rc.Create(ctx, meta.RootIno, []byte(name), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		return a.Ino
	}
	src, dst := newFile("src"), newFile("dst")
	id, err := v.rc.NewSliceID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sl := meta.Slice{Id: id, Size: 40, Len: 40}
	seq := v.rc.Seq() + 1000
	if err := v.rc.WriteSliceAs(ctx, seq, false, src, sl); err != nil {
		t.Fatal(err)
	}
	if n, err := v.rc.CopyFileRangeAs(ctx, seq+1, false, src, 0, dst, 0, 100); err != nil || n != 40 {
		t.Fatalf("copy: %d, %v; want 40 bytes", n, err)
	}
	restart()
	if n, err := v.rc.CopyFileRangeAs(ctx, seq+1, true, src, 0, dst, 0, 100); err != nil || n != 40 {
		t.Fatalf("copy sent again after the restart: %d, %v; want 40 bytes", n, err)
	}
	chunk, err := v.rc.ReadChunk(ctx, dst, 0)
	if err != nil {
		t.Fatal(err)
	}
	if segs := meta.Visible(chunk, 0, 40); len(segs) != 1 || segs[0].Slice == nil || segs[0].Slice.Id != id || segs[0].SliceOff() != 0 {
		t.Fatalf("destination's bytes after the copy sent again: %+v, want slice %d from its start", segs, id)
	}
	if a, err := v.rc.GetAttr(ctx, dst); err != nil || a.Length != 40 {
		t.Fatalf("destination after the copy sent again: %+v, %v; want length 40", a, err)
	}
	checkClean := func(when string) {
		t.Helper()
		var damage []string
		if _, err := meta.Check(ctx, kvstore.New(v.db), meta.CheckOptions{OnDamage: func(d meta.Damage) {
			damage = append(damage, d.String())
		}}); err != nil {
			t.Fatal(err)
		}
		if len(damage) > 0 {
			t.Fatalf("check %s: %q", when, damage)
		}
	}
	checkClean("after the copy sent again")
	// Deleting the destination releases what its chunk names; the source
	// still reads its slice, and the counts still agree.
	if err := v.rc.Unlink(ctx, meta.RootIno, []byte("dst")); err != nil {
		t.Fatal(err)
	}
	if err := v.rc.Release(ctx, dst); err != nil {
		t.Fatal(err)
	}
	checkClean("after the destination was deleted")
	pending, err := meta.PendingSlices(ctx, kvstore.New(v.db))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pending {
		if p.Id == id {
			t.Fatalf("slice %d is to be deleted while the source names it", id)
		}
	}
}

// TestCallAppliedBeforeRestartAnswered sends calls again to a server
// restarted after it applied them, as a mount does when the server died
// before the replies went out. Each must be answered as the first run
// would have been, not run again: a mkdir or a create sent again used
// to fail with EEXIST, an unlink with ENOENT, a rename with ENOENT, an
// xattr set with XATTR_CREATE with EEXIST. A call the server never saw,
// flagged as sent again, runs.
func TestCallAppliedBeforeRestartAnswered(t *testing.T) {
	url, restart := restartableServer(t)
	v := newVolume(t, url)
	ctx := meta.WithCred(context.Background(), meta.Cred{})
	seq := v.rc.Seq() + 1000
	d, err := v.rc.MknodAs(ctx, seq, false, false, meta.RootIno, []byte("d"), store.TypeDir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := v.rc.MknodAs(ctx, seq+1, false, true, d.Ino, []byte("f"), store.TypeFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.rc.RenameAs(ctx, seq+2, false, d.Ino, []byte("f"), d.Ino, []byte("g")); err != nil {
		t.Fatal(err)
	}
	const xattrCreate = 1
	if err := v.rc.SetXattrAs(ctx, seq+3, false, d.Ino, "user.a", []byte("1"), xattrCreate); err != nil {
		t.Fatal(err)
	}
	restart()
	if a, err := v.rc.MknodAs(ctx, seq, true, false, meta.RootIno, []byte("d"), store.TypeDir); err != nil || a.Ino != d.Ino {
		t.Fatalf("mkdir sent again after the restart: %+v, %v; want inode %d", a, err, d.Ino)
	}
	// The create's answer is the node its name holds now: the file was
	// renamed since, so the name is gone.
	if _, err := v.rc.MknodAs(ctx, seq+1, true, true, d.Ino, []byte("f"), store.TypeFile); meta.Errno(err) != syscall.ENOENT {
		t.Fatalf("create sent again after its file was renamed: %v, want ENOENT", err)
	}
	if err := v.rc.RenameAs(ctx, seq+2, true, d.Ino, []byte("f"), d.Ino, []byte("g")); err != nil {
		t.Fatalf("rename sent again after the restart: %v", err)
	}
	if err := v.rc.SetXattrAs(ctx, seq+3, true, d.Ino, "user.a", []byte("1"), xattrCreate); err != nil {
		t.Fatalf("setxattr sent again after the restart: %v", err)
	}
	g, err := v.rc.MknodAs(ctx, seq+4, false, true, d.Ino, []byte("h"), store.TypeFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.rc.UnlinkAs(ctx, seq+5, false, d.Ino, []byte("g")); err != nil {
		t.Fatal(err)
	}
	restart()
	if a, err := v.rc.MknodAs(ctx, seq+4, true, true, d.Ino, []byte("h"), store.TypeFile); err != nil || a.Ino != g.Ino {
		t.Fatalf("create sent again after the restart: %+v, %v; want inode %d", a, err, g.Ino)
	}
	if err := v.rc.UnlinkAs(ctx, seq+5, true, d.Ino, []byte("g")); err != nil {
		t.Fatalf("unlink sent again after the restart: %v", err)
	}
	// Never seen, yet flagged: it runs.
	if _, err := v.rc.MknodAs(ctx, seq+6, true, false, d.Ino, []byte("e"), store.TypeDir); err != nil {
		t.Fatalf("a first mkdir flagged as sent again: %v", err)
	}
	es, err := v.rc.ReadDir(ctx, d.Ino, nil, 100, false)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, string(e.Name))
	}
	if want := []string{"e", "h"}; !slices.Equal(names, want) {
		t.Fatalf("d holds %q, want %q", names, want)
	}
	if _, err := v.rc.Lookup(ctx, d.Ino, []byte("g")); meta.Errno(err) != syscall.ENOENT {
		t.Fatalf("lookup of the unlinked file: %v", err)
	}
	if f.Ino == g.Ino {
		t.Fatalf("two creates made inode %d", f.Ino)
	}
	// The first create of a session reserves inode numbers in a commit
	// of its own, before it finds its name taken: that commit must not
	// say the call was applied.
	restart()
	if _, err := v.rc.MknodAs(ctx, seq+7, false, false, meta.RootIno, []byte("d"), store.TypeDir); meta.Errno(err) != syscall.EEXIST {
		t.Fatalf("mkdir of a name taken: %v, want EEXIST", err)
	}
	restart()
	if _, err := v.rc.MknodAs(ctx, seq+7, true, false, meta.RootIno, []byte("d"), store.TypeDir); meta.Errno(err) != syscall.EEXIST {
		t.Fatalf("a failed mkdir sent again after a restart: %v, want EEXIST", err)
	}
}

// BenchmarkMeta is metatest's meta-API benchmark with the operations run
// on the server, one request each (compare engine sluice's BenchmarkMeta,
// which runs them in the client over transactions).
func BenchmarkMeta(b *testing.B) {
	metatest.BenchOps(b, func(tb testing.TB) metatest.Ops {
		ctx := context.Background()
		db := openDB(tb, startServer(tb).url)
		st := kvstore.New(db)
		if _, err := meta.FormatVolume(ctx, st, metatest.BenchFormat()); err != nil {
			tb.Fatal(err)
		}
		local, err := meta.NewSession(ctx, st, meta.Config{})
		if err != nil {
			tb.Fatal(err)
		}
		rc, err := remote.New(ctx, db, local, remote.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() {
			rc.Close(ctx)
			local.Close(ctx)
		})
		return rc
	})
}

// TestStataheadForgetsServerChanges walks a directory until the
// session's statahead lists it, then changes names and attributes
// through the server: the next lookups answer the change, not the
// listing.
func TestStataheadForgetsServerChanges(t *testing.T) {
	v := newVolumeWith(t, startServer(t).url, meta.Config{Statahead: time.Minute})
	ctx := meta.WithCred(context.Background(), meta.Cred{})
	dir, err := v.rc.Mknod(ctx, meta.RootIno, []byte("d"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"a", "b", "c", "d", "e", "f"}
	for _, n := range names {
		if _, err := v.rc.Mknod(ctx, dir.Ino, []byte(n), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
	}
	walk := func() {
		t.Helper()
		for _, n := range names[:4] {
			if _, _, err := v.rc.LookupAhead(ctx, dir.Ino, []byte(n)); err != nil {
				t.Fatal(err)
			}
		}
		if _, age, err := v.rc.LookupAhead(ctx, dir.Ino, []byte("a")); err != nil || age == 0 {
			t.Fatalf("lookup after a walk: age %v, %v; want an answer from the listing", age, err)
		}
	}
	walk()
	if err := v.rc.Unlink(ctx, dir.Ino, []byte("e")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.rc.LookupAhead(ctx, dir.Ino, []byte("e")); meta.Errno(err) != syscall.ENOENT {
		t.Fatalf("lookup of a name unlinked through the server: %v, want ENOENT", err)
	}
	walk()
	f, _, err := v.rc.LookupAhead(ctx, dir.Ino, []byte("f"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.rc.SetAttr(ctx, f.Ino, meta.SetMode, &meta.Attr{Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	if a, _, err := v.rc.LookupAhead(ctx, dir.Ino, []byte("f")); err != nil || a.Mode&0o777 != 0o600 {
		t.Fatalf("lookup after a chmod through the server: %v, %v; want mode 0600", a, err)
	}
	walk()
	if err := v.rc.Rename(ctx, dir.Ino, []byte("b"), dir.Ino, []byte("g"), 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.rc.LookupAhead(ctx, dir.Ino, []byte("b")); meta.Errno(err) != syscall.ENOENT {
		t.Fatalf("lookup of a name renamed away through the server: %v, want ENOENT", err)
	}
}

// TestDirAttrsOfOwnChanges: with DirAttrReuse, a getattr of a directory
// whose entries the session just changed is answered with the attributes
// the server committed, without a call; a chmod of it is not.
func TestDirAttrsOfOwnChanges(t *testing.T) {
	ctx := meta.WithCred(context.Background(), meta.Cred{})
	db := openDB(t, startServer(t).url)
	st := kvstore.New(db)
	if _, err := meta.FormatVolume(ctx, st, metatest.BenchFormat()); err != nil {
		t.Fatal(err)
	}
	conf := meta.Config{DirAttrReuse: time.Minute}
	local, err := meta.NewSession(ctx, st, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close(ctx)
	rc, err := remote.New(ctx, db, local, remote.Options{DirAttrReuse: conf.DirAttrReuse})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close(ctx)
	dir, err := rc.Mknod(ctx, meta.RootIno, []byte("d"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := rc.Mknod(ctx, dir.Ino, []byte("sub"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	seq := rc.Seq()
	a, err := rc.GetAttr(ctx, dir.Ino)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Seq() != seq {
		t.Fatalf("getattr of a directory just changed made a call")
	}
	if a.Nlink != 3 || !(a.Mtime > dir.Mtime || a.Mtime == dir.Mtime && a.Mtimensec >= dir.Mtimensec) {
		t.Fatalf("directory after a mkdir in it: nlink %d, mtime %d.%09d (was %d.%09d)", a.Nlink, a.Mtime, a.Mtimensec, dir.Mtime, dir.Mtimensec)
	}
	if _, err := rc.SetAttr(ctx, dir.Ino, meta.SetMode, &meta.Attr{Mode: 0o700}); err != nil {
		t.Fatal(err)
	}
	if a, err = rc.GetAttr(ctx, dir.Ino); err != nil || a.Mode&0o777 != 0o700 {
		t.Fatalf("getattr after a chmod: %+v, %v", a, err)
	}
	if err := rc.Rmdir(ctx, dir.Ino, []byte("sub")); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.GetAttr(ctx, sub.Ino); err != meta.ErrNoInode {
		t.Fatalf("getattr of a removed directory: %v, want meta.ErrNoInode", err)
	}
}

// TestWritersOfOneFile is issue 51 on the server: the calls of one
// session run there concurrently, on one attached client, and sixteen
// writers committing slices to one file made thousands of conflicts, of
// which some commits gave up after 50 attempts (EIO). The attached
// client has them take turns: no commit fails, none even conflicts.
func TestWritersOfOneFile(t *testing.T) {
	s := startServer(t)
	v := newVolume(t, s.url)
	ctx := meta.WithCred(context.Background(), meta.Cred{})
	a, err := v.rc.Create(ctx, meta.RootIno, []byte("f"), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each, page = 16, 100, 8192
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				id, err := v.local.NewSliceID(ctx)
				if err != nil {
					errs <- err
					return
				}
				s := meta.Slice{Id: id, Size: page, Len: page, Pos: uint32((w*each + i) % 16 * page)}
				if _, _, err := v.rc.WriteSliceAttr(ctx, a.Ino, uint32(i%2), s, nil, false); err != nil {
					errs <- fmt.Errorf("writer %d, commit %d: %w", w, i, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := counterValue(t, s.srv, "sluice_metaserver_conflicts_total"); n != 0 {
		t.Errorf("%d commits of one session's writers of one file made %v conflicts, want none", writers*each, n)
	}
}

// counterValue returns the value of the server's counter name.
func counterValue(t *testing.T, srv *metaserver.Server, name string) float64 {
	t.Helper()
	mfs, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}
