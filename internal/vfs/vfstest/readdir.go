package vfstest

import (
	"fmt"
	"slices"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/vfs"
)

var readDirTests = []test{
	{"DotsAndAttrs", testReadDirDots},
	{"Pages", testReadDirPages},
	{"ChangesDuringStream", testReadDirChanges},
	{"PlusSwitchAfterRemoval", testReadDirPlusSwitch},
	{"SeekBack", testReadDirSeekBack},
	{"Rewind", testReadDirRewind},
	{"Released", testReadDirReleased},
}

// manyEntries is more than two of vfs's pages (1000 entries each).
const manyEntries = 2*1000 + 7

// fillDir makes n empty files named e00000, e00001, ... in dir.
func fillDir(fs *fsys, dir meta.Ino, n int) []string {
	fs.t.Helper()
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("e%05d", i)
		if _, err := fs.v.Mknod(asRoot(), dir, []byte(names[i]), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
			fs.t.Fatalf("mknod %s: %v", names[i], err)
		}
	}
	return names
}

// stream is an open directory read the way the kernel does: calls with a
// bounded buffer, each resuming at the offset of the last entry taken.
type stream struct {
	fs  *fsys
	fh  uint64
	off uint64
}

func (fs *fsys) openStream(dir meta.Ino) *stream {
	fs.t.Helper()
	fh, err := fs.v.OpenDir(asRoot(), dir)
	if err != nil {
		fs.t.Fatalf("opendir: %v", err)
	}
	fs.t.Cleanup(func() { fs.v.ReleaseDir(fh) })
	return &stream{fs: fs, fh: fh}
}

// next reads up to max entries (a kernel buffer's worth) from the stream's
// offset; plus asks for attributes. It returns nothing at the end.
func (s *stream) next(max int, plus bool) []vfs.DirEntry {
	s.fs.t.Helper()
	var out []vfs.DirEntry
	err := s.fs.v.ReadDir(asRoot(), s.fh, s.off, plus, func(e vfs.DirEntry) bool {
		if len(out) == max {
			return false
		}
		out = append(out, e)
		return true
	})
	if err != nil {
		s.fs.t.Fatalf("readdir at %d: %v", s.off, err)
	}
	if len(out) > 0 {
		s.off = out[len(out)-1].Off
	}
	return out
}

// rest reads the stream to its end in calls of max entries.
func (s *stream) rest(max int, plus bool) []vfs.DirEntry {
	var out []vfs.DirEntry
	for {
		es := s.next(max, plus)
		if len(es) == 0 {
			return out
		}
		out = append(out, es...)
	}
}

// namesOf returns the names of es other than . and ..
func namesOf(es []vfs.DirEntry) []string {
	var out []string
	for _, e := range es {
		if n := string(e.Name); n != "." && n != ".." {
			out = append(out, n)
		}
	}
	return out
}

// checkOffsets checks that offsets grow along a listing.
func checkOffsets(t *testing.T, es []vfs.DirEntry) {
	t.Helper()
	for i := 1; i < len(es); i++ {
		if es[i].Off <= es[i-1].Off {
			t.Fatalf("offset of %q (%d) does not follow that of %q (%d)", es[i].Name, es[i].Off, es[i-1].Name, es[i-1].Off)
		}
	}
}

// testReadDirDots: a listing starts with . and .. (the parent, or the
// root itself), and with plus carries each entry's attributes.
func testReadDirDots(t *testing.T, fs *fsys) {
	d := fs.mkdir(meta.RootIno, "d", 0o755)
	f := fs.create(d, "f", 0o640, []byte("abc"))
	sub := fs.mkdir(d, "sub", 0o700)
	root := []string{"d"}
	if !fs.v.Config().HideInternal {
		root = append(root, internalNames...)
	}
	for _, tc := range []struct {
		dir, parent meta.Ino
		names       []string
	}{
		{meta.RootIno, meta.RootIno, root},
		{d, meta.RootIno, []string{"f", "sub"}},
		{sub, d, nil},
	} {
		es := fs.openStream(tc.dir).rest(100, true)
		if len(es) < 2 || string(es[0].Name) != "." || es[0].Ino != tc.dir || string(es[1].Name) != ".." || es[1].Ino != tc.parent {
			t.Fatalf("listing of %d starts %+v, want . (%d) and .. (%d)", tc.dir, es[:min(2, len(es))], tc.dir, tc.parent)
		}
		if got := namesOf(es); !slices.Equal(got, tc.names) {
			t.Fatalf("listing of %d: %q, want %q", tc.dir, got, tc.names)
		}
		checkOffsets(t, es)
		if tc.dir != d {
			continue
		}
		for _, e := range es[2:] {
			if e.Attr == nil || e.Attr.Ino != e.Ino {
				t.Fatalf("entry %q has attributes %+v", e.Name, e.Attr)
			}
			switch e.Ino {
			case f:
				if e.Type != store.TypeFile || e.Attr.Length != 3 || e.Attr.Mode != 0o640 {
					t.Errorf("f listed as type %d length %d mode %o", e.Type, e.Attr.Length, e.Attr.Mode)
				}
			case sub:
				if e.Type != store.TypeDir || e.Attr.Mode != 0o700 {
					t.Errorf("sub listed as type %d mode %o", e.Type, e.Attr.Mode)
				}
			}
		}
	}
}

// testReadDirPages lists a directory of several pages with kernel buffers
// of various sizes, with and without attributes: every entry once, in
// order.
func testReadDirPages(t *testing.T, fs *fsys) {
	d := fs.mkdir(meta.RootIno, "d", 0o755)
	names := fillDir(fs, d, manyEntries)
	for _, max := range []int{1, 7, 999, 1000, 1001, 5000} {
		for _, plus := range []bool{false, true} {
			es := fs.openStream(d).rest(max, plus)
			if got := namesOf(es); !slices.Equal(got, names) {
				t.Fatalf("buffer of %d, plus %v: %d names, want %d (first difference at %d)", max, plus, len(got), len(names), firstDiffStrings(got, names))
			}
			checkOffsets(t, es)
		}
	}
}

func firstDiffStrings(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// testReadDirChanges adds and removes entries while a stream is read, on
// both sides of its position and in pages not read yet. POSIX leaves
// open whether the changed names show; every name that did not change
// must show exactly once.
func testReadDirChanges(t *testing.T, fs *fsys) {
	ctx := asRoot()
	d := fs.mkdir(meta.RootIno, "d", 0o755)
	names := fillDir(fs, d, manyEntries)
	s := fs.openStream(d)
	first := s.next(2+1500, false) // into the second page
	changed := map[string]bool{}
	for _, i := range []int{3, 1499, 1500, 1501, 1998, 2000, 2006} {
		if err := fs.v.Unlink(ctx, d, []byte(names[i])); err != nil {
			t.Fatalf("unlink: %v", err)
		}
		changed[names[i]] = true
	}
	for _, n := range []string{"a-before", "e01499x", "e01500x", "e01999x", "z-after"} {
		if _, err := fs.v.Mknod(ctx, d, []byte(n), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
			t.Fatalf("mknod: %v", err)
		}
		changed[n] = true
	}
	all := append(first, s.rest(333, false)...)
	checkOffsets(t, all)
	seen := map[string]int{}
	for _, n := range namesOf(all) {
		seen[n]++
		if seen[n] > 1 {
			t.Errorf("%s listed twice", n)
		}
		if _, ok := slices.BinarySearch(names, n); !ok && !changed[n] {
			t.Errorf("%s listed, but never existed", n)
		}
	}
	for _, n := range names {
		if !changed[n] && seen[n] != 1 {
			t.Errorf("unchanged %s listed %d times", n, seen[n])
		}
	}
}

// testReadDirPlusSwitch: the kernel may switch between READDIR and
// READDIRPLUS within one stream; a switch after entries before the
// position were removed must neither skip nor repeat the entries after
// it.
func testReadDirPlusSwitch(t *testing.T, fs *fsys) {
	ctx := asRoot()
	d := fs.mkdir(meta.RootIno, "d", 0o755)
	names := fillDir(fs, d, 50)
	for _, plusFirst := range []bool{false, true} {
		s := fs.openStream(d)
		first := namesOf(s.next(2+20, plusFirst))
		for _, n := range names[:5] { // already listed
			if err := fs.v.Unlink(ctx, d, []byte(n)); err != nil {
				t.Fatalf("unlink: %v", err)
			}
		}
		rest := namesOf(s.rest(10, !plusFirst))
		if got := append(first, rest...); !slices.Equal(got, names) {
			t.Fatalf("plus %v then %v, with listed entries removed: %q, want %q", plusFirst, !plusFirst, got, names)
		}
		for _, n := range names[:5] {
			if _, err := fs.v.Mknod(ctx, d, []byte(n), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
				t.Fatalf("mknod: %v", err)
			}
		}
	}
}

// testReadDirSeekBack: seekdir(3) to an offset telldir(3) returned
// earlier, in an earlier page, resumes the listing there.
func testReadDirSeekBack(t *testing.T, fs *fsys) {
	d := fs.mkdir(meta.RootIno, "d", 0o755)
	names := fillDir(fs, d, manyEntries)
	s := fs.openStream(d)
	head := s.next(2+10, false)
	mark := head[len(head)-1].Off // telldir after names[9]
	s.rest(500, true)             // to the end, past several pages
	s.off = mark
	if got := namesOf(s.rest(400, false)); !slices.Equal(got, names[10:]) {
		t.Fatalf("after seeking back: %d names, want %d (first difference at %d)", len(got), len(names)-10, firstDiffStrings(got, names[10:]))
	}
}

// testReadDirRewind: rewinddir(3) (offset 0) lists the directory afresh.
func testReadDirRewind(t *testing.T, fs *fsys) {
	d := fs.mkdir(meta.RootIno, "d", 0o755)
	fillDir(fs, d, 3)
	s := fs.openStream(d)
	s.rest(100, false)
	if _, err := fs.v.Mknod(asRoot(), d, []byte("new"), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	s.off = 0
	if got := namesOf(s.rest(100, false)); !slices.Equal(got, []string{"e00000", "e00001", "e00002", "new"}) {
		t.Fatalf("after rewind: %q", got)
	}
}

// testReadDirReleased: a released directory handle is bad.
func testReadDirReleased(t *testing.T, fs *fsys) {
	d := fs.mkdir(meta.RootIno, "d", 0o755)
	fh, err := fs.v.OpenDir(asRoot(), d)
	if err != nil {
		t.Fatal(err)
	}
	fs.v.ReleaseDir(fh)
	err = fs.v.ReadDir(asRoot(), fh, 0, false, func(vfs.DirEntry) bool { return true })
	wantErrno(t, "readdir of a released handle", err, syscall.EBADF)
}
