package vfstest

import (
	"bytes"
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/control"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/vfs"
)

var internalTests = []test{
	{"Names", testInternalNames},
	{"Listing", testInternalListing},
	{"Permissions", testInternalPermissions},
	{"AccessLog", testInternalAccessLog},
	{"ControlErrors", testInternalControlErrors},
}

// internalNames are the internal files at the root, in listing order.
var internalNames = []string{vfs.AccessLogName, vfs.ConfigName, control.FileName, vfs.StatsName}

// testInternalNames: the internal files are found at the root only, are
// root's regular files, and cannot be created, removed, renamed, linked
// or given attributes.
func testInternalNames(t *testing.T, fs *fsys) {
	ctx := asRoot()
	d := fs.mkdir(meta.RootIno, "d", 0o755)
	for _, name := range internalNames {
		a := fs.lookup(meta.RootIno, name)
		if !vfs.IsInternal(a.Ino) || a.Type != store.TypeFile || a.Uid != 0 || a.Nlink != 1 {
			t.Fatalf("lookup %s: %+v, want an internal regular file of root", name, a)
		}
		if b, err := fs.v.GetAttr(ctx, a.Ino); err != nil || b.Ino != a.Ino || b.Mode != a.Mode {
			t.Fatalf("getattr %s: %+v, %v; lookup said %+v", name, b, err, a)
		}
		_, err := fs.v.Lookup(ctx, d, []byte(name))
		wantErrno(t, name+" in a subdirectory", err, syscall.ENOENT)
		_, err = fs.v.Mknod(ctx, meta.RootIno, []byte(name), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
		wantErrno(t, "mknod "+name, err, syscall.EEXIST)
		_, _, err = fs.v.Create(ctx, meta.RootIno, []byte(name), 0o644, 0, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL)
		wantErrno(t, "create "+name+" exclusively", err, syscall.EEXIST)
		_, err = fs.v.Mknod(ctx, meta.RootIno, []byte(name), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
		wantErrno(t, "mkdir "+name, err, syscall.EEXIST)
		wantErrno(t, "unlink "+name, fs.v.Unlink(ctx, meta.RootIno, []byte(name)), syscall.EPERM)
		wantErrno(t, "rename "+name, fs.v.Rename(ctx, meta.RootIno, []byte(name), d, []byte("x"), 0), syscall.EPERM)
		wantErrno(t, "setxattr "+name, fs.v.SetXattr(ctx, a.Ino, "user.a", []byte("1"), 0), syscall.EPERM)
		_, err = fs.v.Link(ctx, a.Ino, d, []byte("x"))
		wantErrno(t, "link "+name, err, syscall.EPERM)
		_, err = fs.v.SetAttr(ctx, a.Ino, meta.SetMode, &meta.Attr{Mode: 0o777})
		wantErrno(t, "chmod "+name, err, syscall.EPERM)
	}
	// A file renamed over an internal name would vanish behind it.
	fs.create(d, "f", 0o644, nil)
	wantErrno(t, "rename onto .stats", fs.v.Rename(ctx, d, []byte("f"), meta.RootIno, []byte(vfs.StatsName), 0), syscall.EPERM)
}

// testInternalListing: the root lists the internal files after its own
// entries, with attributes, unless they are hidden.
func testInternalListing(t *testing.T, fs *fsys) {
	fs.create(meta.RootIno, "a", 0o644, nil)
	for _, plus := range []bool{false, true} {
		es := fs.openStream(meta.RootIno).rest(2, plus)
		want := []string{"a"}
		if !fs.v.Config().HideInternal {
			want = append(want, internalNames...)
		}
		if got := namesOf(es); !slices.Equal(got, want) {
			t.Fatalf("listing of the root (plus %v): %q, want %q", plus, got, want)
		}
		checkOffsets(t, es)
		for _, e := range es[2:] {
			if plus && (e.Attr == nil || e.Attr.Ino != e.Ino) {
				t.Fatalf("entry %q has attributes %+v", e.Name, e.Attr)
			}
		}
	}
}

// testInternalPermissions: any user may talk to .control and read
// .stats; only root may read .accesslog and .config.
func testInternalPermissions(t *testing.T, fs *fsys) {
	user := asUser(uidA)
	for _, tc := range []struct {
		name  string
		flags uint32
		want  syscall.Errno
	}{
		{control.FileName, syscall.O_RDWR, 0},
		{vfs.StatsName, syscall.O_RDONLY, 0},
		{vfs.StatsName, syscall.O_WRONLY, syscall.EACCES},
		{vfs.AccessLogName, syscall.O_RDONLY, syscall.EACCES},
		{vfs.ConfigName, syscall.O_RDONLY, syscall.EACCES},
	} {
		a := fs.lookup(meta.RootIno, tc.name)
		fh, err := fs.openAs(user, a.Ino, tc.flags)
		wantErrno(t, "open "+tc.name+" as a user", err, tc.want)
		if err != nil {
			continue
		}
		if !fs.v.DirectIO(fh) {
			t.Fatalf("%s: not direct I/O", tc.name)
		}
		if err := fs.v.Release(user, fh, 0); err != nil {
			t.Fatalf("release %s: %v", tc.name, err)
		}
	}
}

// testInternalAccessLog: a reader of .accesslog gets the lines logged
// while it has the file open, whole, and waits for more up to a quiet
// second; without readers the log is not active.
func testInternalAccessLog(t *testing.T, fs *fsys) {
	log := fs.v.AccessLog()
	if log.Active() {
		t.Fatal("the access log is active with no reader")
	}
	log.Log([]byte("before\n")) // nobody gets it
	fh := fs.open(vfs.AccessLogIno, syscall.O_RDONLY)
	if !log.Active() {
		t.Fatal("the access log is not active with a reader")
	}
	log.Log([]byte("one\n"))
	log.Log([]byte("two\n"))
	if got := fs.read(fh, 0, 6); string(got) != "one\n" {
		t.Fatalf("read 6 bytes: %q, want the whole first line", got)
	}
	if got := fs.read(fh, 0, 100); string(got) != "two\n" {
		t.Fatalf("read: %q, want the second line", got)
	}
	// A read waits for the next line, and is interrupted by its context.
	ctx, cancel := context.WithTimeout(asRoot(), 50*time.Millisecond)
	defer cancel()
	_, err := fs.v.Read(ctx, fh, 0, make([]byte, 100))
	wantErrno(t, "read with nothing logged", err, syscall.EINTR)
	go func() {
		time.Sleep(20 * time.Millisecond)
		log.Log([]byte("three\n"))
	}()
	if got := fs.read(fh, 0, 100); string(got) != "three\n" {
		t.Fatalf("read: %q, want the line logged while waiting", got)
	}
	// A quiet second ends the file, so that programs reading every file
	// of the mount finish.
	start := time.Now()
	if got := fs.read(fh, 0, 100); len(got) != 0 || time.Since(start) < 900*time.Millisecond {
		t.Fatalf("read on a quiet log: %q after %v, want end of file after a second", got, time.Since(start))
	}
	fs.close(fh)
	if log.Active() {
		t.Fatal("the access log is active after its reader closed it")
	}
}

// testInternalControlErrors: .control refuses a request that is not
// JSON or names no operation the mount has, and a second request on one
// open; reading before any request returns nothing.
func testInternalControlErrors(t *testing.T, fs *fsys) {
	ctx := asRoot()
	fh := fs.open(vfs.ControlIno, syscall.O_RDWR)
	defer fs.close(fh)
	if got := fs.read(fh, 0, 100); len(got) != 0 {
		t.Fatalf("read before a request: %q", got)
	}
	wantErrno(t, "not JSON", fs.v.Write(ctx, fh, 0, []byte("hello\n")), syscall.EINVAL)
	wantErrno(t, "unknown operation", fs.v.Write(ctx, fh, 0, []byte(`{"op":"no-such-op"}`+"\n")), syscall.EINVAL)
	wantErrno(t, "too long", fs.v.Write(ctx, fh, 0, bytes.Repeat([]byte("x"), control.MaxRequest+1)), syscall.E2BIG)
}
