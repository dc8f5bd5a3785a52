package metatest

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// clock is a settable time source for meta.Config.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 3, 14, 15, 20, 0, 0, time.UTC)}
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// trashVolume formats a fresh store with a one-day trash and opens a client
// with clk and rec.
func trashVolume(t *testing.T, ns newStoreFunc, clk *clock, rec *deleteRecorder) (store.Store, *meta.Session) {
	t.Helper()
	st := openStore(t, ns)
	f := testFormat()
	f.TrashDays = 1
	format(t, st, f)
	return st, newClient(t, st, meta.Config{Now: clk.now, DeleteSlice: rec.delete})
}

// trashHour returns the hour directory of the trash for time tm.
func trashHour(t *testing.T, c *meta.Session, tm time.Time) *meta.Attr {
	t.Helper()
	return lookup(t, c, meta.TrashIno, tm.UTC().Format("2006-01-02-15"))
}

// trashName is the name a file removed as name from parent has in the trash.
func trashName(parent, ino meta.Ino, name string) string {
	return fmt.Sprintf("%d-%d-%s", parent, ino, name)
}

// names lists the entry names of dir.
func names(t *testing.T, c *meta.Session, dir meta.Ino) []string {
	t.Helper()
	var out []string
	for _, e := range listAll(t, c, dir, 100, false) {
		out = append(out, string(e.Name))
	}
	return out
}

// flushDeletions runs c's deletion queues once.
func flushDeletions(t *testing.T, c *meta.Session) {
	t.Helper()
	if err := c.FlushDeletions(root); err != nil {
		t.Fatalf("flush deletions: %v", err)
	}
}

func testTrash(t *testing.T, ns newStoreFunc) {
	clk := newClock()
	rec := &deleteRecorder{ids: map[uint64]uint32{}}
	_, c := trashVolume(t, ns, clk, rec)
	used := func() (uint64, uint64) {
		s := statfs(t, c)
		return s.TotalSpace - s.AvailSpace, s.UsedInodes
	}
	space0, inodes0 := used()

	tr := lookup(t, c, meta.RootIno, meta.TrashName)
	if tr.Ino != meta.TrashIno || tr.Type != store.TypeDir || tr.Mode != 0o555 || tr.Uid != 0 || tr.Parent != meta.RootIno {
		t.Fatalf(".trash: %+v", tr)
	}
	if got := names(t, c, meta.RootIno); len(got) != 1 || got[0] != meta.TrashName {
		t.Fatalf("root of a new volume lists %q, want only %s", got, meta.TrashName)
	}
	wantNlink(t, c, meta.RootIno, 3)

	// Unlink moves the file, data and all, to the hour's directory.
	d := mkdir(t, c, meta.RootIno, "d")
	f := mkfile(t, c, d.Ino, "f")
	fs := newSlice(t, c, 0, 5000)
	write(t, c, f.Ino, 0, fs)
	space1, inodes1 := used()
	wantErr(t, "unlink d/f", c.Unlink(root, d.Ino, []byte("f")), 0)
	wantGone(t, c, d.Ino, "f")
	hourName := clk.now().UTC().Format("2006-01-02-15")
	hour := trashHour(t, c, clk.now())
	if hour.Ino == 0 || hour.Parent != meta.TrashIno || hour.Mode != 0o555 {
		t.Fatalf("hour directory: %+v", hour)
	}
	fname := trashName(d.Ino, f.Ino, "f")
	got := lookup(t, c, hour.Ino, fname)
	if got.Ino != f.Ino || got.Nlink != 1 || got.Length != 5000 || got.Parent != hour.Ino {
		t.Fatalf("trashed file: %+v", got)
	}
	wantChunk(t, c, f.Ino, 0, fs)
	flushDeletions(t, c)
	if rec.has(fs.Id) {
		t.Fatalf("data of a trashed file was deleted")
	}
	if s, i := used(); s != space1 || i != inodes1 {
		t.Fatalf("usage after trashing: %d bytes %d inodes, want %d %d (trash counts as used)", s, i, space1, inodes1)
	}

	// Root restores it by renaming it out.
	rename(t, c, hour.Ino, fname, d.Ino, "f", 0, 0)
	if got := lookup(t, c, d.Ino, "f"); got.Ino != f.Ino || got.Parent != d.Ino || got.Length != 5000 {
		t.Fatalf("restored file: %+v", got)
	}
	wantChunk(t, c, f.Ino, 0, fs)
	if got := names(t, c, hour.Ino); len(got) != 0 {
		t.Fatalf("hour directory after restore: %q", got)
	}

	// Unlink in the trash deletes for good.
	wantErr(t, "unlink d/f again", c.Unlink(root, d.Ino, []byte("f")), 0)
	wantErr(t, "unlink from the trash", c.Unlink(root, hour.Ino, []byte(fname)), 0)
	_, err := c.GetAttr(root, f.Ino)
	wantErr(t, "getattr of a file removed from the trash", err, syscall.ENOENT)
	flushDeletions(t, c)
	if !rec.has(fs.Id) {
		t.Fatalf("data of a file removed from the trash was not deleted")
	}

	// A hard-linked file just loses a name.
	h := mkfile(t, c, d.Ino, "h")
	if _, err := c.Link(root, h.Ino, meta.RootIno, []byte("h2")); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "unlink one of two names", c.Unlink(root, d.Ino, []byte("h")), 0)
	wantNlink(t, c, h.Ino, 1)
	if got := names(t, c, hour.Ino); len(got) != 0 {
		t.Fatalf("unlink of a hard link trashed something: %q", got)
	}
	wantErr(t, "unlink the last name", c.Unlink(root, meta.RootIno, []byte("h2")), 0)
	lookup(t, c, hour.Ino, trashName(meta.RootIno, h.Ino, "h2"))

	// Rename over a file trashes the file replaced.
	a := mkfile(t, c, d.Ino, "a")
	b := mkfile(t, c, d.Ino, "b")
	bs := newSlice(t, c, 0, 100)
	write(t, c, b.Ino, 0, bs)
	rename(t, c, d.Ino, "a", d.Ino, "b", 0, 0)
	if got := lookup(t, c, d.Ino, "b"); got.Ino != a.Ino {
		t.Fatalf("d/b after rename over it: %+v", got)
	}
	if got := lookup(t, c, hour.Ino, trashName(d.Ino, b.Ino, "b")); got.Ino != b.Ino || got.Nlink != 1 {
		t.Fatalf("replaced file in the trash: %+v", got)
	}
	wantChunk(t, c, b.Ino, 0, bs)

	// A long name is cut to 255 bytes in the trash.
	long := make([]byte, 255)
	for i := range long {
		long[i] = 'x'
	}
	l := mkfile(t, c, d.Ino, string(long))
	wantErr(t, "unlink a 255-byte name", c.Unlink(root, d.Ino, long), 0)
	want := trashName(d.Ino, l.Ino, string(long))[:255]
	if got := lookup(t, c, hour.Ino, want); got.Ino != l.Ino {
		t.Fatalf("trashed long name: %+v", got)
	}

	// A file unlinked while open moves to the trash at once and stays
	// readable; closing it deletes nothing.
	o := mkfile(t, c, d.Ino, "o")
	osl := newSlice(t, c, 0, 10)
	write(t, c, o.Ino, 0, osl)
	c.Created(o.Ino)
	wantErr(t, "unlink open file", c.Unlink(root, d.Ino, []byte("o")), 0)
	if got := getattr(t, c, o.Ino); got.Nlink != 1 || got.Parent != hour.Ino {
		t.Fatalf("open file unlinked into the trash: %+v", got)
	}
	wantErr(t, "release o", c.Release(root, o.Ino), 0)
	flushDeletions(t, c)
	if rec.has(osl.Id) || getattr(t, c, o.Ino).Nlink != 1 {
		t.Fatalf("release of a trashed file deleted it")
	}

	// A later hour gets its own directory.
	clk.add(time.Hour)
	e := mkfile(t, c, d.Ino, "e")
	wantErr(t, "unlink e an hour later", c.Unlink(root, d.Ino, []byte("e")), 0)
	hour2 := trashHour(t, c, clk.now())
	if hour2.Ino == hour.Ino {
		t.Fatalf("two hours share trash directory %d", hour.Ino)
	}
	lookup(t, c, hour2.Ino, trashName(d.Ino, e.Ino, "e"))
	wantNlink(t, c, meta.TrashIno, 4)

	// Expiry: nothing goes before its hour is a day old; a file still
	// open here stays readable until closed.
	k := lookup(t, c, hour.Ino, trashName(d.Ino, b.Ino, "b"))
	if _, err := c.Open(root, k.Ino, syscall.O_RDONLY); err != nil {
		t.Fatal(err)
	}
	clk.add(23 * time.Hour) // hour's end + 23h
	wantErr(t, "clean trash early", c.CleanTrash(root), 0)
	lookup(t, c, meta.TrashIno, hourName)
	clk.add(time.Hour) // hour's end + 24h: hour expires, hour2 not yet
	wantErr(t, "clean trash", c.CleanTrash(root), 0)
	wantGone(t, c, meta.TrashIno, hourName)
	lookup(t, c, hour2.Ino, trashName(d.Ino, e.Ino, "e"))
	for _, ino := range []meta.Ino{h.Ino, l.Ino, o.Ino} {
		_, err := c.GetAttr(root, ino)
		wantErr(t, fmt.Sprintf("getattr of expired inode %d", ino), err, syscall.ENOENT)
	}
	if got := getattr(t, c, k.Ino); got.Nlink != 0 {
		t.Fatalf("open file after expiry: %+v", got)
	}
	flushDeletions(t, c)
	if !rec.has(osl.Id) || rec.has(bs.Id) {
		t.Fatalf("after expiry: deleted %v; want %d deleted and %d (open) kept", rec.deleted(), osl.Id, bs.Id)
	}
	wantErr(t, "release expired open file", c.Release(root, k.Ino), 0)
	flushDeletions(t, c)
	if !rec.has(bs.Id) {
		t.Fatalf("data of an expired file was not deleted at its last close")
	}
	clk.add(time.Hour)
	wantErr(t, "clean trash an hour later", c.CleanTrash(root), 0)
	if got := names(t, c, meta.TrashIno); len(got) != 0 {
		t.Fatalf("trash after everything expired: %q", got)
	}
	wantNlink(t, c, meta.TrashIno, 2)
	wantErr(t, "unlink d/b", c.Unlink(root, d.Ino, []byte("b")), 0)
	clk.add(26 * time.Hour)
	wantErr(t, "clean trash", c.CleanTrash(root), 0)
	wantErr(t, "rmdir d", c.Rmdir(root, meta.RootIno, []byte("d")), 0)
	if s, i := used(); s != space0 || i != inodes0 {
		t.Fatalf("usage after the trash emptied: %d bytes %d inodes, want %d %d", s, i, space0, inodes0)
	}
}

// testTrashProtected checks that the trash's own names are managed by
// Sluice: no creating, linking or renaming into it, no removing or moving
// .trash or its hour directories, and only root may take files out.
func testTrashProtected(t *testing.T, ns newStoreFunc) {
	clk := newClock()
	rec := &deleteRecorder{ids: map[uint64]uint32{}}
	_, c := trashVolume(t, ns, clk, rec)
	d := mk(t, root, c, meta.RootIno, "d", store.TypeDir, 0o777)
	f := mk(t, user1, c, d.Ino, "f", store.TypeFile, 0o644)
	g := mkfile(t, c, d.Ino, "g")
	wantErr(t, "unlink f", c.Unlink(user1, d.Ino, []byte("f")), 0)
	hour := trashHour(t, c, clk.now())
	fname := trashName(d.Ino, f.Ino, "f")

	newFile := meta.NewNode{Type: store.TypeFile, Mode: 0o644}
	for _, x := range []struct {
		what string
		err  error
	}{
		{"create .trash in root", func() error { _, err := c.Mknod(root, meta.RootIno, []byte(meta.TrashName), newFile); return err }()},
		{"mkdir in .trash", func() error {
			_, err := c.Mknod(root, meta.TrashIno, []byte("x"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
			return err
		}()},
		{"create in an hour directory", func() error { _, err := c.Mknod(root, hour.Ino, []byte("x"), newFile); return err }()},
		{"link into an hour directory", func() error { _, err := c.Link(root, g.Ino, hour.Ino, []byte("x")); return err }()},
		{"link named .trash in root", func() error { _, err := c.Link(root, g.Ino, meta.RootIno, []byte(meta.TrashName)); return err }()},
		{"rename into the trash", c.Rename(root, d.Ino, []byte("g"), hour.Ino, []byte("g"), 0)},
		{"rename over .trash", c.Rename(root, d.Ino, []byte("g"), meta.RootIno, []byte(meta.TrashName), 0)},
		{"rename .trash", c.Rename(root, meta.RootIno, []byte(meta.TrashName), meta.RootIno, []byte("t"), 0)},
		{"rename an hour directory", c.Rename(root, meta.TrashIno, []byte(clk.now().UTC().Format("2006-01-02-15")), meta.RootIno, []byte("t"), 0)},
		{"exchange with a trashed file", c.Rename(root, d.Ino, []byte("g"), hour.Ino, []byte(fname), meta.RenameExchange)},
		{"rename within the trash", c.Rename(root, hour.Ino, []byte(fname), hour.Ino, []byte("y"), 0)},
		{"rmdir .trash", c.Rmdir(root, meta.RootIno, []byte(meta.TrashName))},
		{"unlink .trash", c.Unlink(root, meta.RootIno, []byte(meta.TrashName))},
		{"chmod .trash", func() error {
			_, err := c.SetAttr(root, meta.TrashIno, meta.SetMode, &meta.Attr{Mode: 0o777})
			return err
		}()},
	} {
		wantErr(t, x.what, x.err, syscall.EPERM)
	}
	// A volume without a trash still keeps the name free.
	c0 := setup(t, ns, meta.Config{})
	_, err := c0.Mknod(root, meta.RootIno, []byte(meta.TrashName), newFile)
	wantErr(t, "create .trash on a volume without trash", err, syscall.EPERM)
	_, err = c0.Lookup(root, meta.RootIno, []byte(meta.TrashName))
	wantErr(t, "lookup .trash on a volume without trash", err, syscall.ENOENT)

	// Users may look, but only root may take files out.
	if got := lookup(t, c, hour.Ino, fname); got.Uid != 1000 {
		t.Fatalf("trashed file: %+v", got)
	}
	wantErr(t, "user restores", c.Rename(user1, hour.Ino, []byte(fname), d.Ino, []byte("f"), 0), syscall.EACCES)
	wantErr(t, "user deletes from the trash", c.Unlink(user1, hour.Ino, []byte(fname)), syscall.EACCES)
	wantErr(t, "user removes an hour directory", c.Rmdir(user1, meta.TrashIno, []byte(clk.now().UTC().Format("2006-01-02-15"))), syscall.EACCES)
	wantErr(t, "root removes a non-empty hour directory", c.Rmdir(root, meta.TrashIno, []byte(clk.now().UTC().Format("2006-01-02-15"))), syscall.ENOTEMPTY)
	rename(t, c, hour.Ino, fname, d.Ino, "f", 0, 0)
	wantErr(t, "root removes an empty hour directory", c.Rmdir(root, meta.TrashIno, []byte(clk.now().UTC().Format("2006-01-02-15"))), 0)
	wantNlink(t, c, meta.TrashIno, 2)
	// The hour directory comes back with the next deletion.
	wantErr(t, "unlink g", c.Unlink(root, d.Ino, []byte("g")), 0)
	lookup(t, c, trashHour(t, c, clk.now()).Ino, trashName(d.Ino, g.Ino, "g"))
}

// testTrashLease checks that of several clients of a volume one expires
// the trash per interval.
func testTrashLease(t *testing.T, ns newStoreFunc) {
	clk := newClock()
	rec := &deleteRecorder{ids: map[uint64]uint32{}}
	st, c1 := trashVolume(t, ns, clk, rec)
	c2 := newClient(t, st, meta.Config{Now: clk.now, DeleteSlice: rec.delete})
	f := mkfile(t, c1, meta.RootIno, "f")
	wantErr(t, "unlink f", c1.Unlink(root, meta.RootIno, []byte("f")), 0)
	expire := func(c *meta.Session, want bool) {
		t.Helper()
		ran, err := c.ExpireTrash(root)
		if err != nil || ran != want {
			t.Fatalf("expire trash: ran %v, %v; want ran %v", ran, err, want)
		}
	}
	expire(c1, true)
	expire(c2, false)
	expire(c1, false)
	lookup(t, c2, trashHour(t, c2, clk.now()).Ino, trashName(meta.RootIno, f.Ino, "f"))
	clk.add(59 * time.Minute)
	expire(c2, false)
	clk.add(26 * time.Hour)
	expire(c2, true)
	expire(c1, false)
	collectOrphans(t, c1, c2) // f might have been open in c1
	_, err := c1.GetAttr(root, f.Ino)
	wantErr(t, "getattr of an expired file", err, syscall.ENOENT)
	if got := names(t, c1, meta.TrashIno); len(got) != 0 {
		t.Fatalf("trash after expiry: %q", got)
	}

	// A re-format turning the trash off reaches live clients with their
	// next expiry round.
	off := testFormat()
	if _, err := meta.FormatVolume(root, st, off); err != nil {
		t.Fatal(err)
	}
	expire(c1, false)
	g := mkfile(t, c1, meta.RootIno, "g")
	wantErr(t, "unlink g without trash", c1.Unlink(root, meta.RootIno, []byte("g")), 0)
	collectOrphans(t, c1, c2)
	_, err = c1.GetAttr(root, g.Ino)
	wantErr(t, "getattr of a file deleted without trash", err, syscall.ENOENT)
	if got := names(t, c1, meta.TrashIno); len(got) != 0 {
		t.Fatalf("trash after a deletion with the trash off: %q", got)
	}
}
