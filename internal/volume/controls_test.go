package volume_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/control"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/volume"
	"github.com/sluicefs/sluice/internal/volume/volumetest"
)

// The tool controls (info, summary, warmup, rmr) called as the control
// channel calls them, on a volume opened without a kernel; the e2e tests
// run them through real mounts and the commands.

// toolVolume is an open volume with a file system and a disk cache.
type toolVolume struct {
	t      *testing.T
	v      *volume.Volume
	bucket string
	ctx    context.Context
}

func openToolVolume(t *testing.T, change func(*meta.Format)) *toolVolume {
	t.Helper()
	tv := volumetest.New(t, change)
	opts := volume.Options{Level: volume.FileSystem}
	opts.Chunks.CacheDirs = []string{t.TempDir()}
	ctx := context.Background()
	v, err := volume.Open(ctx, tv.MetaURL, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := v.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &toolVolume{t: t, v: v, bucket: tv.Bucket, ctx: ctx}
}

// mkdir makes directory name in parent with mode.
func (tv *toolVolume) mkdir(parent meta.Ino, name string, mode uint16) meta.Ino {
	tv.t.Helper()
	a, err := tv.v.Client().Mknod(tv.ctx, parent, []byte(name), meta.NewNode{Type: store.TypeDir, Mode: mode})
	if err != nil {
		tv.t.Fatalf("mkdir %s: %v", name, err)
	}
	return a.Ino
}

// file writes a file of n bytes named name in parent through the VFS.
func (tv *toolVolume) file(parent meta.Ino, name string, n int) meta.Ino {
	tv.t.Helper()
	fs := tv.v.VFS()
	a, fh, err := fs.Create(tv.ctx, parent, []byte(name), 0o644, 0, uint32(os.O_RDWR))
	if err != nil {
		tv.t.Fatalf("create %s: %v", name, err)
	}
	if n > 0 {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i * 7)
		}
		err = fs.Write(tv.ctx, fh, 0, data)
	}
	if rerr := fs.Release(tv.ctx, fh, 0); err == nil {
		err = rerr
	}
	if err != nil {
		tv.t.Fatalf("write %s: %v", name, err)
	}
	return a.Ino
}

// call runs control op as the control channel does, as the caller in
// ctx, and decodes its result into res. It returns the progress reports.
func (tv *toolVolume) call(ctx context.Context, op string, ino meta.Ino, args, res any) ([]control.Progress, error) {
	tv.t.Helper()
	fn := tv.v.VFS().Config().Controls[op]
	if fn == nil {
		tv.t.Fatalf("no control %q", op)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		tv.t.Fatal(err)
	}
	var reports []control.Progress
	out, err := fn(ctx, control.Request{Op: op, Ino: ino, Args: raw}, func(p any) {
		reports = append(reports, p.(control.Progress))
	})
	if err != nil {
		return reports, err
	}
	b, err := json.Marshal(out)
	if err == nil {
		err = json.Unmarshal(b, res)
	}
	if err != nil {
		tv.t.Fatalf("%s result: %v", op, err)
	}
	return reports, nil
}

// asUser is a context with the credentials of an ordinary user.
func asUser(ctx context.Context) context.Context {
	return meta.WithCred(ctx, meta.Cred{Uid: 1000, Gid: 1000, Pid: 1})
}

const blockSize = meta.MinBlockSize // volumetest's

func TestInfoControl(t *testing.T) {
	tv := openToolVolume(t, nil)
	f := tv.file(meta.RootIno, "f", 3*blockSize+5)
	var res control.InfoResult
	if _, err := tv.call(tv.ctx, control.OpInfo, f, control.InfoArgs{Raw: true}, &res); err != nil {
		t.Fatalf("info: %v", err)
	}
	if res.Type != "file" || res.Length != 3*blockSize+5 || res.Ino != f || res.Mode != 0o644 {
		t.Errorf("info = %+v, want a 0644 file of %d bytes", res, 3*blockSize+5)
	}
	if len(res.Chunks) != 1 || len(res.Chunks[0].Slices) != 1 {
		t.Fatalf("chunks = %+v, want one chunk of one slice", res.Chunks)
	}
	s := res.Chunks[0].Slices[0]
	if s.Len != 3*blockSize+5 || len(s.Blocks) != 4 || s.Blocks[3].Len != 5 {
		t.Fatalf("slice = %+v, want %d bytes in 4 blocks, the last of 5 bytes", s, 3*blockSize+5)
	}
	for _, b := range s.Blocks {
		if _, err := os.Stat(filepath.Join(tv.bucket, filepath.FromSlash(b.Key))); err != nil {
			t.Errorf("block %s is not in the bucket: %v", b.Key, err)
		}
	}

	d := tv.mkdir(meta.RootIno, "d", 0o755)
	sub := tv.mkdir(d, "sub", 0o755)
	tv.file(d, "a", 100)
	tv.file(sub, "b", 200)
	tv.file(sub, "c", 0)
	var dres control.InfoResult
	if _, err := tv.call(tv.ctx, control.OpInfo, d, control.InfoArgs{Recursive: true}, &dres); err != nil {
		t.Fatalf("info -r: %v", err)
	}
	want := control.Totals{Files: 3, Dirs: 2, Length: 300}
	if dres.Tree == nil || *dres.Tree != want || dres.Entries == nil || *dres.Entries != 2 {
		t.Errorf("info -r: tree %+v, entries %v; want %+v and 2 entries", dres.Tree, dres.Entries, want)
	}
}

func TestSummaryControl(t *testing.T) {
	tv := openToolVolume(t, nil)
	top := tv.mkdir(meta.RootIno, "top", 0o755)
	a := tv.mkdir(top, "a", 0o755)
	b := tv.mkdir(top, "b", 0o755)
	aa := tv.mkdir(a, "aa", 0o755)
	tv.file(top, "big", 1000)
	tv.file(a, "x", 100)
	tv.file(aa, "y", 200)
	tv.file(b, "z", 50)
	tests := []struct {
		depth, entries int
		want           string // path:length:files:dirs, in order
	}{
		{0, 10, ":1350:4:4"},
		{1, 10, ":1350:4:4 big:1000:1:0 a:300:2:2 b:50:1:1"},
		{1, 2, ":1350:4:4 big:1000:1:0 a:300:2:2 ...:50:1:1"},
		{2, 1, ":1350:4:4 big:1000:1:0 ...:350:3:3"},
		{3, 10, ":1350:4:4 big:1000:1:0 a:300:2:2 a/aa:200:1:1 a/aa/y:200:1:0 a/x:100:1:0 b:50:1:1 b/z:50:1:0"},
	}
	for _, tt := range tests {
		var res control.SummaryResult
		if _, err := tv.call(tv.ctx, control.OpSummary, top, control.SummaryArgs{Depth: tt.depth, Entries: tt.entries}, &res); err != nil {
			t.Fatalf("summary: %v", err)
		}
		var got []string
		var walk func(n *control.SummaryNode)
		walk = func(n *control.SummaryNode) {
			got = append(got, strings.Join([]string{n.Path, itoa(n.Length), itoa(n.Files), itoa(n.Dirs)}, ":"))
			for _, c := range n.Children {
				walk(c)
			}
		}
		walk(res.Tree)
		if g := strings.ReplaceAll(strings.Join(got, " "), "top/", ""); g != tt.want {
			t.Errorf("summary depth %d entries %d:\n got %s\nwant %s", tt.depth, tt.entries, g, tt.want)
		}
	}
	var res control.SummaryResult
	_, err := tv.call(tv.ctx, control.OpSummary, top, control.SummaryArgs{Depth: 1, Entries: 0}, &res)
	if !errors.Is(err, syscall.EINVAL) {
		t.Errorf("summary with 0 entries: %v, want EINVAL", err)
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestWarmupControl checks, fetches, checks and evicts the blocks of a
// tree in a mount's disk cache (a file bucket: written blocks are not
// cached, so fresh data starts uncached).
func TestWarmupControl(t *testing.T) {
	tv := openToolVolume(t, nil)
	d := tv.mkdir(meta.RootIno, "d", 0o755)
	tv.file(d, "a", 2*blockSize+1)
	tv.file(d, "b", 10)
	f := tv.file(meta.RootIno, "f", blockSize)
	args := control.WarmupArgs{Inos: []meta.Ino{d, f}, Paths: []string{"d", "f"}}
	run := func(mode string, wantCached int64) control.WarmupResult {
		t.Helper()
		a := args
		a.Mode = mode
		var res control.WarmupResult
		if _, err := tv.call(tv.ctx, control.OpWarmup, meta.RootIno, a, &res); err != nil {
			t.Fatalf("warmup %s: %v", mode, err)
		}
		want := control.WarmupTotals{Files: 3, Blocks: 5, Bytes: 3*blockSize + 11, Cached: wantCached}
		if res.Total != want || len(res.Paths) != 2 || res.Paths[1].Bytes != blockSize || res.Paths[0].Path != "d" {
			t.Errorf("warmup %s: %+v, want total %+v", mode, res, want)
		}
		return res
	}
	run(control.WarmupCheck, 0)
	if res := run(control.WarmupFetch, 3*blockSize+11); res.Fetched != 3*blockSize+11 {
		t.Errorf("warmup fetched %d bytes, want %d", res.Fetched, 3*blockSize+11)
	}
	run(control.WarmupCheck, 3*blockSize+11)
	if res := run(control.WarmupFetch, 3*blockSize+11); res.Fetched != 0 {
		t.Errorf("a second warmup fetched %d bytes, want none", res.Fetched)
	}
	run(control.WarmupEvict, 3*blockSize+11)
	run(control.WarmupCheck, 0)

	// A file the caller may not read is reported, the others warmed.
	secret := tv.file(meta.RootIno, "secret", 100)
	mode := &meta.Attr{Mode: 0o600}
	if _, err := tv.v.Client().SetAttr(tv.ctx, secret, meta.SetMode, mode); err != nil {
		t.Fatal(err)
	}
	var res control.WarmupResult
	a := control.WarmupArgs{Inos: []meta.Ino{secret, f}, Paths: []string{"secret", "f"}}
	if _, err := tv.call(asUser(tv.ctx), control.OpWarmup, meta.RootIno, a, &res); err != nil {
		t.Fatalf("warmup as a user: %v", err)
	}
	if res.Failed != 1 || res.Failures[0].Path != "secret" || res.Failures[0].Errno != syscall.EACCES || res.Total.Files != 1 {
		t.Errorf("warmup of an unreadable file as a user: %+v, want one EACCES failure for secret and f warmed", res)
	}
	// A block lost from the bucket fails its file; a removed file is
	// skipped.
	lost := tv.file(meta.RootIno, "lost", 100)
	var info control.InfoResult
	if _, err := tv.call(tv.ctx, control.OpInfo, lost, control.InfoArgs{Raw: true}, &info); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(tv.bucket, filepath.FromSlash(info.Chunks[0].Slices[0].Blocks[0].Key))); err != nil {
		t.Fatal(err)
	}
	gone := tv.file(meta.RootIno, "gone", 100)
	if err := tv.v.Client().Unlink(tv.ctx, meta.RootIno, []byte("gone")); err != nil {
		t.Fatal(err)
	}
	a = control.WarmupArgs{Inos: []meta.Ino{lost, gone, f}, Paths: []string{"lost", "gone", "f"}}
	res = control.WarmupResult{}
	if _, err := tv.call(tv.ctx, control.OpWarmup, meta.RootIno, a, &res); err != nil {
		t.Fatalf("warmup with a lost block: %v", err)
	}
	if res.Failed != 1 || res.Failures[0].Path != "lost" || !strings.Contains(res.Failures[0].Err, "not found") ||
		res.Paths[0].Cached != 0 || res.Paths[2].Cached != blockSize {
		t.Errorf("warmup with a lost block and a removed file: %+v, want one failure for lost", res)
	}
	if _, err := tv.call(tv.ctx, control.OpWarmup, 0, control.WarmupArgs{Mode: "nonsense"}, &res); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("warmup in an unknown mode: %v, want EINVAL", err)
	}
}

// TestRmrControl removes a tree, refuses bad names, reports entries a
// user may not remove with their paths, and sends files to the trash.
func TestRmrControl(t *testing.T) {
	for _, trash := range []bool{false, true} {
		tv := openToolVolume(t, func(f *meta.Format) {
			if trash {
				f.TrashDays = 1
			}
		})
		top := tv.mkdir(meta.RootIno, "top", 0o755)
		n := int64(1) // top
		for i := range 3 {
			d := tv.mkdir(top, "d"+itoa(int64(i)), 0o755)
			n++
			for j := range 40 {
				tv.file(d, "f"+itoa(int64(j)), j)
				n++
			}
		}
		var res control.RmrResult
		reports, err := tv.call(tv.ctx, control.OpRmr, meta.RootIno, control.RmrArgs{Name: "top"}, &res)
		if err != nil {
			t.Fatalf("rmr: %v", err)
		}
		if res.Removed != n || res.Failed != 0 {
			t.Errorf("rmr: %+v, want %d entries removed", res, n)
		}
		for _, p := range reports {
			if p.Removed > n {
				t.Errorf("progress reports %d removed of %d", p.Removed, n)
			}
		}
		if _, err := tv.v.Client().Lookup(tv.ctx, meta.RootIno, []byte("top")); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("lookup after rmr: %v, want ENOENT", err)
		}
		inTrash := 0
		if hours, err := tv.v.Client().ReadDir(tv.ctx, meta.TrashIno, nil, 100, false); err == nil {
			for _, h := range hours {
				es, err := tv.v.Client().ReadDir(tv.ctx, h.Ino, nil, 1000, false)
				if err != nil {
					t.Fatal(err)
				}
				inTrash += len(es)
			}
		}
		if want := map[bool]int{false: 0, true: 120}[trash]; inTrash != want {
			t.Errorf("trash %v: %d files in the trash, want %d", trash, inTrash, want)
		}
	}

	tv := openToolVolume(t, nil)
	for _, name := range []string{"", ".", "..", "a/b"} {
		var res control.RmrResult
		if _, err := tv.call(tv.ctx, control.OpRmr, meta.RootIno, control.RmrArgs{Name: name}, &res); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("rmr %q: %v, want EINVAL", name, err)
		}
	}
	// A user's tree holding a directory of root's: everything else goes.
	pub := tv.mkdir(meta.RootIno, "pub", 0o777)
	user := asUser(tv.ctx)
	mine, err := tv.v.Client().Mknod(user, pub, []byte("mine"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	locked := tv.mkdir(mine.Ino, "locked", 0o755)
	tv.file(locked, "f", 1)
	free, err := tv.v.Client().Mknod(user, mine.Ino, []byte("free"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tv.v.Client().Mknod(user, free.Ino, []byte("g"), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	var res control.RmrResult
	if _, err := tv.call(user, control.OpRmr, pub, control.RmrArgs{Name: "mine"}, &res); err != nil {
		t.Fatalf("rmr as a user: %v", err)
	}
	if res.Removed != 2 || res.Failed != 1 || res.Failures[0].Path != "mine/locked/f" || res.Failures[0].Errno != syscall.EACCES {
		t.Errorf("rmr as a user: %+v, want free and free/g removed and mine/locked/f refused with EACCES", res)
	}
	if _, err := tv.v.Client().Lookup(tv.ctx, mine.Ino, []byte("free")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("the user's own directory free: %v, want it removed", err)
	}
}

// TestControlsCheckReach: a user may not reach an inode below a
// directory they cannot search, even by its number.
func TestControlsCheckReach(t *testing.T) {
	tv := openToolVolume(t, nil)
	private := tv.mkdir(meta.RootIno, "private", 0o700)
	f := tv.file(private, "f", 10)
	d := tv.mkdir(private, "d", 0o777)
	user := asUser(tv.ctx)
	calls := []struct {
		op   string
		ino  meta.Ino
		args any
		res  any
	}{
		{control.OpInfo, f, control.InfoArgs{}, &control.InfoResult{}},
		{control.OpSummary, d, control.SummaryArgs{Depth: 1, Entries: 1}, &control.SummaryResult{}},
		{control.OpRmr, d, control.RmrArgs{Name: "x"}, &control.RmrResult{}},
	}
	for _, c := range calls {
		if _, err := tv.call(user, c.op, c.ino, c.args, c.res); !errors.Is(err, syscall.EACCES) {
			t.Errorf("%s of an inode below a 0700 directory of root, as a user: %v, want EACCES", c.op, err)
		}
		if _, err := tv.call(tv.ctx, c.op, c.ino, c.args, c.res); err != nil && !errors.Is(err, syscall.ENOENT) {
			t.Errorf("%s as root: %v", c.op, err)
		}
	}
	var res control.WarmupResult
	if _, err := tv.call(user, control.OpWarmup, 0, control.WarmupArgs{Inos: []meta.Ino{f}}, &res); err != nil ||
		res.Failed != 1 || res.Failures[0].Errno != syscall.EACCES || res.Total.Files != 0 {
		t.Errorf("warmup as a user of a file below a 0700 directory: %+v, %v; want an EACCES failure", res, err)
	}
}
