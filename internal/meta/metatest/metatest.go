// Package metatest is the POSIX-behaviour suite every metadata engine runs:
// it drives a meta.Client over a fresh store and checks the file system
// rules (errnos, link counts, permissions, rename edge cases, unlink of open
// files, truncation, the deletion queue) plus a randomized model test that
// compares the volume with a simple in-memory tree after every operation.
//
// An engine's test file is a few lines:
//
//	func TestSuite(t *testing.T) {
//		metatest.Run(t, func(t *testing.T) store.Store { return kvstore.New(mem.New(t.Name())) })
//	}
package metatest

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// newStoreFunc is the store constructor Run takes.
type newStoreFunc = func(t *testing.T) store.Store

// Run runs the whole suite as subtests of t. newStore must return a new,
// empty store each time it is called (a case may call it more than once);
// Run formats it and closes it when the subtest that asked for it ends.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	RunOptions(t, newStore, Options{})
}

// Options tune the suite for an engine.
type Options struct {
	// ModelOps is the number of random operations of the model test
	// (default 2000). Engines behind a network round trip per check use
	// fewer to keep the suite's time reasonable.
	ModelOps int
	// ContendDirWorkers is the number of goroutines per client of
	// ContendDir (default 8). An engine whose test double gives out
	// under that much contention in one directory runs it with fewer,
	// and says why.
	ContendDirWorkers int
}

// RunOptions is Run with options.
func RunOptions(t *testing.T, newStore func(t *testing.T) store.Store, opts Options) {
	if opts.ContendDirWorkers <= 0 {
		opts.ContendDirWorkers = contendWorkers
	}
	if opts.ModelOps <= 0 {
		opts.ModelOps = modelOps
	}
	cases := []struct {
		name string
		fn   func(t *testing.T, ns newStoreFunc)
	}{
		{"LookupGetAttr", testLookupGetAttr},
		{"MknodTypes", testMknodTypes},
		{"Names", testNames},
		{"NotDir", testNotDir},
		{"MkdirNlink", testMkdirNlink},
		{"Link", testLink},
		{"UnlinkRmdir", testUnlinkRmdir},
		{"Rename", testRename},
		{"RenameExchange", testRenameExchange},
		{"Permissions", testPermissions},
		{"Sticky", testSticky},
		{"Setgid", testSetgid},
		{"Ownership", testOwnership},
		{"Utimens", testUtimens},
		{"Truncate", testTruncate},
		{"Write", testWrite},
		{"Xattr", testXattr},
		{"XattrFlags", testXattrFlags},
		{"ReadDirPaging", testReadDirPaging},
		{"UnlinkOpen", testUnlinkOpen},
		{"OpenElsewhere", testOpenElsewhere},
		{"Tmpfile", testTmpfile},
		{"DeletionQueue", testDeletionQueue},
		{"StatFS", testStatFS},
		{"InodeLimit", testInodeLimit},
		{"ReadOnly", testReadOnly},
		{"FormatTwice", testFormatTwice},
		{"Fallocate", testFallocate},
		{"CopyFileRange", testCopyFileRange},
		{"LargestFile", testLargestFile},
		{"Locks", testLocks},
		{"ACL", testACL},
		{"ACLDisabled", testACLDisabled},
		{"StaleSession", testStaleSession},
		{"DeadProcessSession", testDeadProcessSession},
		{"CleanedLockWaiter", testCleanedLockWaiter},
		{"Check", testCheck},
		{"Trash", testTrash},
		{"TrashProtected", testTrashProtected},
		{"TrashLease", testTrashLease},
		{"DeletionPaths", testDeletionPaths},
		{"DeletionBacklog", testDeletionBacklog},
		{"DeleteWorkers", testDeleteWorkers},
		{"TruncateManyChunks", testTruncateManyChunks},
		{"FragmentedChunk", testFragmentedChunk},
		{"ClockStamps", testClockStamps},
		{"ClockRelatime", testClockRelatime},
		{"ClockSession", testClockSession},
		{"ContendFile", testContendFile},
		{"ContendDir", func(t *testing.T, ns newStoreFunc) { testContendDir(t, ns, opts.ContendDirWorkers) }},
		{"Model", func(t *testing.T, ns newStoreFunc) { testModelOps(t, ns, opts.ModelOps) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newStore) })
	}
}

// testFormat returns the settings every case formats with.
func testFormat() *meta.Format {
	return &meta.Format{Name: "test", UUID: "6f1f4c1e-7c1a-4c39-9d57-2c0b0d2f1a01", Storage: "mem",
		Bucket: "x", BlockSize: 4096, TrashDays: 0}
}

// openStore returns a fresh store from ns, closed at the end of t.
func openStore(t *testing.T, ns newStoreFunc) store.Store {
	t.Helper()
	st := ns(t)
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st
}

// format formats st with f and fails t on error.
func format(t *testing.T, st store.Store, f *meta.Format) {
	t.Helper()
	created, err := meta.FormatVolume(context.Background(), st, f)
	if err != nil {
		t.Fatalf("format: %v", err)
	}
	if !created {
		t.Fatalf("format of an empty store reports an existing volume")
	}
}

// newClient opens a client on st, closed at the end of t.
func newClient(t *testing.T, st store.Store, conf meta.Config) *meta.Session {
	t.Helper()
	c, err := meta.NewSession(context.Background(), st, conf)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("close client: %v", err)
		}
	})
	return c
}

// collectOrphans runs the orphan rounds of clients, all the live clients
// of one volume, until files that lost their last name while others were
// live and that none of them holds open are deleted: two passes suffice.
func collectOrphans(t *testing.T, clients ...*meta.Session) {
	t.Helper()
	for range 2 {
		for _, c := range clients {
			if err := c.CollectOrphans(context.Background()); err != nil {
				t.Fatalf("collect orphans: %v", err)
			}
		}
	}
}

// setup formats a fresh store and opens a client with conf.
func setup(t *testing.T, ns newStoreFunc, conf meta.Config) *meta.Session {
	t.Helper()
	st := openStore(t, ns)
	format(t, st, testFormat())
	return newClient(t, st, conf)
}

// Credentials used by the permission cases.
var (
	root  = context.Background()
	user1 = meta.WithCred(context.Background(), meta.Cred{Uid: 1000, Gid: 1000})
	user2 = meta.WithCred(context.Background(), meta.Cred{Uid: 1001, Gid: 1001})
)

// mk creates name in parent with the given type and mode, failing t on error.
func mk(t *testing.T, ctx context.Context, c *meta.Session, parent meta.Ino, name string, typ uint8, mode uint16) *meta.Attr {
	t.Helper()
	nn := meta.NewNode{Type: typ, Mode: mode}
	if typ == store.TypeSymlink {
		nn.Target = []byte("target")
	}
	a, err := c.Mknod(ctx, parent, []byte(name), nn)
	if err != nil {
		t.Fatalf("mknod %q in %d: %v", name, parent, err)
	}
	return a
}

func mkfile(t *testing.T, c *meta.Session, parent meta.Ino, name string) *meta.Attr {
	t.Helper()
	return mk(t, root, c, parent, name, store.TypeFile, 0o644)
}

func mkdir(t *testing.T, c *meta.Session, parent meta.Ino, name string) *meta.Attr {
	t.Helper()
	return mk(t, root, c, parent, name, store.TypeDir, 0o755)
}

// wantErr fails t unless err wraps want (0 meaning success).
func wantErr(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	switch {
	case want == 0 && err != nil:
		t.Fatalf("%s: unexpected error %v", what, err)
	case want != 0 && !errors.Is(err, want):
		t.Fatalf("%s: got error %v, want %v (%s)", what, err, want, errnoName(want))
	}
}

func errnoName(e syscall.Errno) string {
	if e == 0 {
		return "success"
	}
	return fmt.Sprintf("errno %d", uint(e))
}

// lookup returns the attributes of name in parent, failing t on error.
func lookup(t *testing.T, c *meta.Session, parent meta.Ino, name string) *meta.Attr {
	t.Helper()
	a, err := c.Lookup(root, parent, []byte(name))
	if err != nil {
		t.Fatalf("lookup %q in %d: %v", name, parent, err)
	}
	return a
}

// getattr returns the attributes of ino, failing t on error.
func getattr(t *testing.T, c *meta.Session, ino meta.Ino) *meta.Attr {
	t.Helper()
	a, err := c.GetAttr(root, ino)
	if err != nil {
		t.Fatalf("getattr %d: %v", ino, err)
	}
	return a
}

// wantGone fails t unless name is missing from parent.
func wantGone(t *testing.T, c *meta.Session, parent meta.Ino, name string) {
	t.Helper()
	_, err := c.Lookup(root, parent, []byte(name))
	wantErr(t, "lookup "+name, err, syscall.ENOENT)
}

// wantNlink fails t unless ino has n links.
func wantNlink(t *testing.T, c *meta.Session, ino meta.Ino, n uint32) {
	t.Helper()
	if got := getattr(t, c, ino).Nlink; got != n {
		t.Fatalf("inode %d: nlink %d, want %d", ino, got, n)
	}
}

// listAll reads every entry of dir in pages of limit.
func listAll(t *testing.T, c *meta.Session, dir meta.Ino, limit int, plus bool) []meta.Entry {
	t.Helper()
	var out []meta.Entry
	var after []byte
	for range 100000 {
		es, err := c.ReadDir(root, dir, after, limit, plus)
		if err != nil {
			t.Fatalf("readdir %d after %q: %v", dir, after, err)
		}
		out = append(out, es...)
		if len(es) < limit {
			return out
		}
		after = es[len(es)-1].Name
	}
	t.Fatalf("readdir %d does not end", dir)
	return nil
}

func testLookupGetAttr(t *testing.T, ns newStoreFunc) {
	c := setup(t, ns, meta.Config{})
	r := getattr(t, c, meta.RootIno)
	if r.Type != store.TypeDir || r.Nlink != 2 || r.Ino != meta.RootIno {
		t.Fatalf("root: %+v", r)
	}
	for _, name := range []string{".", ".."} {
		if a := lookup(t, c, meta.RootIno, name); a.Ino != meta.RootIno {
			t.Fatalf("lookup %q in root: inode %d", name, a.Ino)
		}
	}
	d := mkdir(t, c, meta.RootIno, "d")
	f := mkfile(t, c, d.Ino, "f")
	if a := lookup(t, c, d.Ino, "f"); a.Ino != f.Ino || a.Type != store.TypeFile {
		t.Fatalf("lookup f: %+v, created %+v", a, f)
	}
	if a := lookup(t, c, d.Ino, ".."); a.Ino != meta.RootIno {
		t.Fatalf("lookup .. of d: inode %d", a.Ino)
	}
	if a := lookup(t, c, d.Ino, "."); a.Ino != d.Ino {
		t.Fatalf("lookup . of d: inode %d", a.Ino)
	}
	_, err := c.Lookup(root, d.Ino, []byte("missing"))
	wantErr(t, "lookup missing", err, syscall.ENOENT)
	_, err = c.GetAttr(root, f.Ino+1000)
	wantErr(t, "getattr unknown inode", err, syscall.ENOENT)
	_, err = c.Lookup(root, f.Ino+1000, []byte("x"))
	wantErr(t, "lookup in unknown inode", err, syscall.ENOENT)
	if err := c.Access(user1, f.Ino, meta.MayRead); err != nil {
		t.Fatalf("access read of 0644 file: %v", err)
	}
	wantErr(t, "access write of other's 0644 file", c.Access(user1, f.Ino, meta.MayWrite), syscall.EACCES)
	wantErr(t, "root may execute no file without an x bit", c.Access(root, f.Ino, meta.MayExec), syscall.EACCES)
	wantErr(t, "root may search any dir", c.Access(root, d.Ino, meta.MayExec|meta.MayWrite|meta.MayRead), 0)
	wantErr(t, "existence check", c.Access(user2, f.Ino, 0), 0)
}

func testMknodTypes(t *testing.T, ns newStoreFunc) {
	c := setup(t, ns, meta.Config{})
	cases := []struct {
		name     string
		nn       meta.NewNode
		wantMode uint16
		nlink    uint32
		length   uint64
	}{
		{"file", meta.NewNode{Type: store.TypeFile, Mode: 0o666, Umask: 0o022}, 0o644, 1, 0},
		{"dir", meta.NewNode{Type: store.TypeDir, Mode: 0o777, Umask: 0o027}, 0o750, 2, 4096},
		{"symlink", meta.NewNode{Type: store.TypeSymlink, Mode: 0o600, Target: []byte("../some/where")}, 0o777, 1, 13},
		{"fifo", meta.NewNode{Type: store.TypeFIFO, Mode: 0o640}, 0o640, 1, 0},
		{"socket", meta.NewNode{Type: store.TypeSocket, Mode: 0o755}, 0o755, 1, 0},
		{"chardev", meta.NewNode{Type: store.TypeCharDev, Mode: 0o600, Rdev: 1<<8 | 3}, 0o600, 1, 0},
		{"blockdev", meta.NewNode{Type: store.TypeBlockDev, Mode: 0o660, Rdev: 8<<8 | 1}, 0o660, 1, 0},
		{"sticky-dir", meta.NewNode{Type: store.TypeDir, Mode: 0o1777}, 0o1777, 2, 4096},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := c.Mknod(user1, meta.RootIno, []byte(tc.name), tc.nn)
			if err != nil {
				t.Fatalf("mknod: %v", err)
			}
			got := lookup(t, c, meta.RootIno, tc.name)
			for _, x := range []*meta.Attr{a, got} {
				if x.Ino != a.Ino || x.Type != tc.nn.Type || x.Mode != tc.wantMode || x.Nlink != tc.nlink ||
					x.Length != tc.length || x.Rdev != tc.nn.Rdev || x.Uid != 1000 || x.Gid != 1000 {
					t.Fatalf("attributes %+v; want type %d mode %o nlink %d length %d rdev %d uid/gid 1000",
						x, tc.nn.Type, tc.wantMode, tc.nlink, tc.length, tc.nn.Rdev)
				}
			}
			if x := getattr(t, c, a.Ino); *x != *got {
				t.Fatalf("getattr %+v differs from lookup %+v", x, got)
			}
			target, err := c.ReadLink(root, a.Ino)
			if tc.nn.Type == store.TypeSymlink {
				if err != nil || string(target) != string(tc.nn.Target) {
					t.Fatalf("readlink: %q, %v", target, err)
				}
			} else {
				wantErr(t, "readlink of non-symlink", err, syscall.EINVAL)
			}
			_, err = c.Mknod(root, meta.RootIno, []byte(tc.name), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
			wantErr(t, "mknod over existing "+tc.name, err, syscall.EEXIST)
		})
	}
	es := listAll(t, c, meta.RootIno, 100, false)
	if len(es) != len(cases) {
		t.Fatalf("root lists %d entries, want %d", len(es), len(cases))
	}
	for _, e := range es {
		if a := lookup(t, c, meta.RootIno, string(e.Name)); a.Type != e.Type || a.Ino != e.Ino {
			t.Fatalf("entry %q: type %d ino %d, node type %d ino %d", e.Name, e.Type, e.Ino, a.Type, a.Ino)
		}
	}
	_, err := c.Mknod(root, meta.RootIno, []byte("."), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
	wantErr(t, "mkdir .", err, syscall.EEXIST)
	for _, typ := range []uint8{0, store.TypeSocket + 1, 0xff} {
		_, err = c.Mknod(root, meta.RootIno, []byte("bad-type"), meta.NewNode{Type: typ, Mode: 0o644})
		wantErr(t, fmt.Sprintf("mknod of type %d", typ), err, syscall.EINVAL)
	}
	_, err = c.Mknod(root, meta.RootIno, []byte("empty-link"), meta.NewNode{Type: store.TypeSymlink})
	wantErr(t, "symlink to empty target", err, syscall.ENOENT)
	_, err = c.Mknod(root, meta.RootIno, []byte("long-link"),
		meta.NewNode{Type: store.TypeSymlink, Target: make([]byte, meta.MaxSymlink+1)})
	wantErr(t, "symlink to over-long target", err, syscall.ENAMETOOLONG)
}

func testNames(t *testing.T, ns newStoreFunc) {
	c := setup(t, ns, meta.Config{})
	long := make([]byte, 256)
	for i := range long {
		long[i] = 'a' + byte(i%26)
	}
	_, err := c.Mknod(root, meta.RootIno, long, meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	wantErr(t, "mknod 256-byte name", err, syscall.ENAMETOOLONG)
	_, err = c.Lookup(root, meta.RootIno, long)
	wantErr(t, "lookup 256-byte name", err, syscall.ENAMETOOLONG)
	wantErr(t, "unlink 256-byte name", c.Unlink(root, meta.RootIno, long), syscall.ENAMETOOLONG)

	// Any bytes but '/' and NUL make a name, UTF-8 or not.
	odd := make([]byte, 255)
	for i := range odd {
		odd[i] = byte(0x80 + i%0x7f) // continuation bytes and 0xff: invalid UTF-8
	}
	odd[0], odd[1] = 0xff, 0xfe
	a, err := c.Mknod(root, meta.RootIno, odd, meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	if err != nil {
		t.Fatalf("mknod 255-byte non-UTF-8 name: %v", err)
	}
	if got, err := c.Lookup(root, meta.RootIno, odd); err != nil || got.Ino != a.Ino {
		t.Fatalf("lookup non-UTF-8 name: %+v, %v", got, err)
	}
	es := listAll(t, c, meta.RootIno, 10, false)
	if len(es) != 1 || string(es[0].Name) != string(odd) {
		t.Fatalf("readdir: %+v, want the non-UTF-8 name", es)
	}
	for _, bad := range []string{"a/b", "nul\x00"} {
		_, err = c.Mknod(root, meta.RootIno, []byte(bad), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
		wantErr(t, fmt.Sprintf("mknod %q", bad), err, syscall.EINVAL)
	}
	_, err = c.Mknod(root, meta.RootIno, nil, meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	wantErr(t, "mknod empty name", err, syscall.ENOENT)
}

func testNotDir(t *testing.T, ns newStoreFunc) {
	c := setup(t, ns, meta.Config{})
	f := mkfile(t, c, meta.RootIno, "f")
	_, err := c.Mknod(root, f.Ino, []byte("x"), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	wantErr(t, "mknod in a file", err, syscall.ENOTDIR)
	_, err = c.Lookup(root, f.Ino, []byte("x"))
	wantErr(t, "lookup in a file", err, syscall.ENOTDIR)
	_, err = c.Link(root, f.Ino, f.Ino, []byte("x"))
	wantErr(t, "link into a file", err, syscall.ENOTDIR)
	wantErr(t, "unlink in a file", c.Unlink(root, f.Ino, []byte("x")), syscall.ENOTDIR)
	wantErr(t, "rmdir of a file", c.Rmdir(root, meta.RootIno, []byte("f")), syscall.ENOTDIR)
	wantErr(t, "rename into a file", c.Rename(root, meta.RootIno, []byte("f"), f.Ino, []byte("x"), 0), syscall.ENOTDIR)
	_, err = c.OpenDir(root, f.Ino)
	wantErr(t, "opendir of a file", err, syscall.ENOTDIR)
}

func testMkdirNlink(t *testing.T, ns newStoreFunc) {
	c := setup(t, ns, meta.Config{})
	a := mkdir(t, c, meta.RootIno, "a")
	wantNlink(t, c, meta.RootIno, 3)
	wantNlink(t, c, a.Ino, 2)
	mkdir(t, c, a.Ino, "b")
	mkdir(t, c, a.Ino, "c")
	mkfile(t, c, a.Ino, "f") // files do not count
	wantNlink(t, c, a.Ino, 4)
	wantNlink(t, c, meta.RootIno, 3)
	wantErr(t, "rmdir a/b", c.Rmdir(root, a.Ino, []byte("b")), 0)
	wantNlink(t, c, a.Ino, 3)
	if a2 := lookup(t, c, meta.RootIno, "a"); a2.Mtime < a.Mtime {
		t.Fatalf("mtime of a went back: %d < %d", a2.Mtime, a.Mtime)
	}
}

func testLink(t *testing.T, ns newStoreFunc) {
	c := setup(t, ns, meta.Config{})
	d := mkdir(t, c, meta.RootIno, "d")
	f := mkfile(t, c, meta.RootIno, "f")
	l, err := c.Link(root, f.Ino, d.Ino, []byte("g"))
	wantErr(t, "link f d/g", err, 0)
	if l.Ino != f.Ino || l.Nlink != 2 {
		t.Fatalf("link returns %+v", l)
	}
	if g := lookup(t, c, d.Ino, "g"); g.Ino != f.Ino || g.Nlink != 2 {
		t.Fatalf("d/g: %+v", g)
	}
	wantNlink(t, c, d.Ino, 2) // a file link adds no directory link
	_, err = c.Link(root, f.Ino, d.Ino, []byte("g"))
	wantErr(t, "link over existing name", err, syscall.EEXIST)
	_, err = c.Link(root, d.Ino, meta.RootIno, []byte("d2"))
	wantErr(t, "link of a directory", err, syscall.EPERM)
	_, err = c.Link(root, f.Ino+1000, meta.RootIno, []byte("x"))
	wantErr(t, "link of unknown inode", err, syscall.ENOENT)
	_, err = c.Link(user1, f.Ino, meta.RootIno, []byte("h"))
	wantErr(t, "link into writable root by other user", err, 0)
	wantNlink(t, c, f.Ino, 3)
	wantErr(t, "unlink f", c.Unlink(root, meta.RootIno, []byte("f")), 0)
	wantNlink(t, c, f.Ino, 2)
	wantErr(t, "unlink h", c.Unlink(root, meta.RootIno, []byte("h")), 0)
	wantNlink(t, c, f.Ino, 1)
	wantErr(t, "unlink d/g", c.Unlink(root, d.Ino, []byte("g")), 0)
	_, err = c.GetAttr(root, f.Ino)
	wantErr(t, "getattr after last unlink", err, syscall.ENOENT)
}

func testUnlinkRmdir(t *testing.T, ns newStoreFunc) {
	c := setup(t, ns, meta.Config{})
	d := mkdir(t, c, meta.RootIno, "d")
	f := mkfile(t, c, d.Ino, "f")
	mk(t, root, c, d.Ino, "s", store.TypeSymlink, 0)
	wantErr(t, "unlink of a dir", c.Unlink(root, meta.RootIno, []byte("d")), syscall.EISDIR)
	wantErr(t, "rmdir non-empty", c.Rmdir(root, meta.RootIno, []byte("d")), syscall.ENOTEMPTY)
	wantErr(t, "rmdir of a file", c.Rmdir(root, d.Ino, []byte("f")), syscall.ENOTDIR)
	wantErr(t, "rmdir .", c.Rmdir(root, d.Ino, []byte(".")), syscall.EINVAL)
	wantErr(t, "rmdir ..", c.Rmdir(root, d.Ino, []byte("..")), syscall.ENOTEMPTY)
	wantErr(t, "unlink missing", c.Unlink(root, d.Ino, []byte("missing")), syscall.ENOENT)
	wantErr(t, "rmdir missing", c.Rmdir(root, d.Ino, []byte("missing")), syscall.ENOENT)
	wantErr(t, "unlink f", c.Unlink(root, d.Ino, []byte("f")), 0)
	wantErr(t, "unlink s", c.Unlink(root, d.Ino, []byte("s")), 0)
	wantGone(t, c, d.Ino, "f")
	_, err := c.GetAttr(root, f.Ino)
	wantErr(t, "getattr of unlinked file", err, syscall.ENOENT)
	wantErr(t, "rmdir d", c.Rmdir(root, meta.RootIno, []byte("d")), 0)
	wantGone(t, c, meta.RootIno, "d")
	wantNlink(t, c, meta.RootIno, 2)
	_, err = c.GetAttr(root, d.Ino)
	wantErr(t, "getattr of removed dir", err, syscall.ENOENT)
	_, err = c.Mknod(root, d.Ino, []byte("x"), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	wantErr(t, "mknod in removed dir", err, syscall.ENOENT)
}

// Write commits slice s, whose blocks are taken as stored, to chunk idx
// of file ino through c, as a mount's writer does (WriteSliceAttr with no
// held changes), and returns the file's attributes after.
func Write(ctx context.Context, c meta.Ops, ino meta.Ino, idx uint32, s meta.Slice) (*meta.Attr, error) {
	_, a, err := c.WriteSliceAttr(ctx, ino, idx, s, nil, false)
	return a, err
}

// Committer is a session as the committer of a chunk writer
// (chunk.Committer), for tests that write files without a VFS: its
// slices commit with no held attribute changes.
type Committer struct{ *meta.Session }

// Commit commits slice s to chunk idx of ino.
func (c Committer) Commit(ctx context.Context, ino meta.Ino, idx uint32, s meta.Slice, unsynced bool) (*meta.Attr, error) {
	_, a, err := c.WriteSliceAttr(ctx, ino, idx, s, nil, unsynced)
	return a, err
}
