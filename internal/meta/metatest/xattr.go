package metatest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

func testXattr(t *testing.T, ns newStoreFunc) {
	c := setup(t, ns, meta.Config{})
	f := mkfile(t, c, meta.RootIno, "f")
	get := func(ino meta.Ino, name string, want string) {
		t.Helper()
		v, err := c.GetXattr(root, ino, name)
		if err != nil || string(v) != want {
			t.Fatalf("getxattr %s: %q, %v; want %q", name, v, err, want)
		}
	}
	wantErr(t, "setxattr", c.SetXattr(root, f.Ino, "user.a", []byte("1"), 0), 0)
	get(f.Ino, "user.a", "1")
	wantErr(t, "setxattr create existing", c.SetXattr(root, f.Ino, "user.a", []byte("x"), meta.XattrCreate), syscall.EEXIST)
	wantErr(t, "setxattr replace missing", c.SetXattr(root, f.Ino, "user.b", []byte("x"), meta.XattrReplace), syscall.ENODATA)
	wantErr(t, "setxattr replace", c.SetXattr(root, f.Ino, "user.a", []byte("2"), meta.XattrReplace), 0)
	get(f.Ino, "user.a", "2")
	wantErr(t, "setxattr create empty", c.SetXattr(root, f.Ino, "user.b", nil, meta.XattrCreate), 0)
	get(f.Ino, "user.b", "")
	wantErr(t, "setxattr trusted", c.SetXattr(root, f.Ino, "trusted.t", []byte("t"), 0), 0)
	names, err := c.ListXattr(root, f.Ino)
	if err != nil || !reflect.DeepEqual(names, []string{"trusted.t", "user.a", "user.b"}) {
		t.Fatalf("listxattr as root: %q, %v", names, err)
	}
	names, err = c.ListXattr(user1, f.Ino)
	if err != nil || !reflect.DeepEqual(names, []string{"user.a", "user.b"}) {
		t.Fatalf("listxattr as user: %q, %v (trusted.* must be hidden)", names, err)
	}
	_, err = c.GetXattr(root, f.Ino, "user.missing")
	wantErr(t, "getxattr missing", err, syscall.ENODATA)
	wantErr(t, "removexattr", c.RemoveXattr(root, f.Ino, "user.a"), 0)
	_, err = c.GetXattr(root, f.Ino, "user.a")
	wantErr(t, "getxattr removed", err, syscall.ENODATA)
	wantErr(t, "removexattr missing", c.RemoveXattr(root, f.Ino, "user.a"), syscall.ENODATA)
	names, _ = c.ListXattr(user1, f.Ino)
	if !reflect.DeepEqual(names, []string{"user.b"}) {
		t.Fatalf("listxattr after remove: %q", names)
	}

	// Namespaces and permissions.
	l := mk(t, root, c, meta.RootIno, "l", store.TypeSymlink, 0)
	wantErr(t, "user.* on a symlink", c.SetXattr(root, l.Ino, "user.a", []byte("1"), 0), syscall.EPERM)
	_, err = c.GetXattr(root, l.Ino, "user.a")
	wantErr(t, "get user.* of a symlink", err, syscall.ENODATA)
	wantErr(t, "trusted.* by non-root", c.SetXattr(user1, f.Ino, "trusted.x", nil, 0), syscall.EPERM)
	_, err = c.GetXattr(user1, f.Ino, "trusted.t")
	wantErr(t, "get trusted.* by non-root", err, syscall.EPERM)
	wantErr(t, "unknown namespace", c.SetXattr(root, f.Ino, "foo", nil, 0), syscall.EOPNOTSUPP)
	wantErr(t, "empty name", c.SetXattr(root, f.Ino, "", nil, 0), syscall.EINVAL)
	wantErr(t, "user.* without write access", c.SetXattr(user1, f.Ino, "user.c", nil, 0), syscall.EACCES)
	wantErr(t, "remove user.* without write access", c.RemoveXattr(user1, f.Ino, "user.b"), syscall.EACCES)
	wantErr(t, "value too big", c.SetXattr(root, f.Ino, "user.big", make([]byte, meta.MaxXattrValue+1), 0), syscall.E2BIG)
	wantErr(t, "name too long", c.SetXattr(root, f.Ino, "user."+string(bytes.Repeat([]byte{'n'}, 251)), nil, 0), syscall.ERANGE)
	big := bytes.Repeat([]byte{0xab}, meta.MaxXattrValue)
	wantErr(t, "largest value", c.SetXattr(root, f.Ino, "user.big", big, 0), 0)
	if v, err := c.GetXattr(root, f.Ino, "user.big"); err != nil || !bytes.Equal(v, big) {
		t.Fatalf("getxattr of largest value: %d bytes, %v", len(v), err)
	}
	d := mkdir(t, c, meta.RootIno, "d")
	wantErr(t, "user.* on a dir", c.SetXattr(root, d.Ino, "user.d", []byte("dir"), 0), 0)
	tmp := mk(t, root, c, meta.RootIno, "tmp", store.TypeDir, 0o1777)
	wantErr(t, "user.* on other's sticky dir", c.SetXattr(user1, tmp.Ino, "user.x", nil, 0), syscall.EPERM)
	wantErr(t, "user.* on own sticky dir", c.SetXattr(root, tmp.Ino, "user.x", nil, 0), 0)
	get(d.Ino, "user.d", "dir")
	_, err = c.GetXattr(root, f.Ino+1000, "user.a")
	wantErr(t, "getxattr of unknown inode", err, syscall.ENOENT)
	_, err = c.ListXattr(root, f.Ino+1000)
	wantErr(t, "listxattr of unknown inode", err, syscall.ENOENT)
}

func testReadDirPaging(t *testing.T, ns newStoreFunc) {
	c := setup(t, ns, meta.Config{})
	d := mkdir(t, c, meta.RootIno, "d")
	var want [][]byte
	for i := range 250 {
		want = append(want, fmt.Appendf(nil, "n%d", i)) // "n10" < "n9" in byte order
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(want), func(i, j int) { want[i], want[j] = want[j], want[i] })
	inos := map[string]meta.Ino{}
	for i, name := range want {
		typ := uint8(store.TypeFile)
		if i%10 == 0 {
			typ = store.TypeDir
		}
		inos[string(name)] = mk(t, root, c, d.Ino, string(name), typ, 0o755).Ino
	}
	slices.SortFunc(want, bytes.Compare)
	for _, plus := range []bool{false, true} {
		es := listAll(t, c, d.Ino, 100, plus)
		if len(es) != len(want) {
			t.Fatalf("plus=%v: %d entries, want %d", plus, len(es), len(want))
		}
		for i, e := range es {
			if !bytes.Equal(e.Name, want[i]) || e.Ino != inos[string(e.Name)] {
				t.Fatalf("plus=%v: entry %d is %q ino %d, want %q ino %d", plus, i, e.Name, e.Ino, want[i], inos[string(want[i])])
			}
			switch {
			case !plus && e.Attr != nil:
				t.Fatalf("entry %q has attributes without plus", e.Name)
			case plus && (e.Attr == nil || e.Attr.Ino != e.Ino || e.Attr.Type != e.Type):
				t.Fatalf("plus entry %q: attr %+v, type %d", e.Name, e.Attr, e.Type)
			}
		}
	}
	// A page ends exactly at the last entry, and after the last name
	// nothing is left.
	es, err := c.ReadDir(root, d.Ino, want[149], 100, false)
	if err != nil || len(es) != 100 || !bytes.Equal(es[99].Name, want[249]) {
		t.Fatalf("page after %q: %d entries, %v", want[149], len(es), err)
	}
	es, err = c.ReadDir(root, d.Ino, want[249], 100, true)
	if err != nil || len(es) != 0 {
		t.Fatalf("page after the last name: %d entries, %v", len(es), err)
	}
	// "after" need not exist.
	es, err = c.ReadDir(root, d.Ino, []byte("n1\xff"), 1, false)
	if err != nil || len(es) != 1 || string(es[0].Name) != "n2" {
		t.Fatalf("page after a missing name: %+v, %v", es, err)
	}
	if es := listAll(t, c, meta.RootIno, 100, true); len(es) != 1 || string(es[0].Name) != "d" {
		t.Fatalf("root lists %+v", es)
	}
}

// testXattrFlags checks that nodes flag their extended attributes (meta.FlagXattrs)
// on volumes of the current metadata version, so that NoXattrs answers for
// a node without a read, and that the flag means nothing on a volume
// formatted before it existed.
func testXattrFlags(t *testing.T, ns newStoreFunc) {
	st, c := setupACL(t, ns)
	file := mkfile(t, c, meta.RootIno, "f")
	dir := mk(t, root, c, meta.RootIno, "d", store.TypeDir, 0o755)
	none := func(what string, ino meta.Ino, want bool) {
		t.Helper()
		a := getattr(t, c, ino)
		if got := c.NoXattrs(a); got != want {
			t.Errorf("%s: NoXattrs = %v (flags %#x), want %v", what, got, a.Flags, want)
		}
		names, err := c.ListXattr(root, ino)
		if err != nil || (len(names) == 0) != want {
			t.Errorf("%s: listxattr %q, %v; NoXattrs must agree with it", what, names, err)
		}
	}
	none("a new file", file.Ino, true)
	none("a new directory", dir.Ino, true)
	wantErr(t, "setxattr", c.SetXattr(root, file.Ino, "user.a", []byte("1"), 0), 0)
	wantErr(t, "setxattr", c.SetXattr(root, file.Ino, "trusted.b", []byte("2"), 0), 0)
	none("with two attributes", file.Ino, false)
	if a := getattr(t, c, file.Ino); a.Flags&meta.FlagXattrs == 0 {
		t.Errorf("flags %#x after setxattr, want FlagXattrs", a.Flags)
	}
	// chattr keeps the flag, which is not the user's.
	if _, err := c.SetAttr(root, file.Ino, meta.SetFlags, &meta.Attr{Flags: 0}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "removexattr", c.RemoveXattr(root, file.Ino, "user.a"), 0)
	none("with one attribute left, after a chattr", file.Ino, false)
	wantErr(t, "removexattr", c.RemoveXattr(root, file.Ino, "trusted.b"), 0)
	none("with none left", file.Ino, true)
	// ACLs have flags of their own; the last other attribute going
	// leaves them listed.
	acl := aclXattr([3]uint32{tagUserObj, 7, 0}, [3]uint32{tagUser, 5, 1001}, [3]uint32{tagGroupObj, 5, 0},
		[3]uint32{tagMask, 5, 0}, [3]uint32{tagOther, 5, 0})
	wantErr(t, "set a default ACL", c.SetXattr(root, dir.Ino, meta.XattrACLDefault, acl, 0), 0)
	wantErr(t, "setxattr", c.SetXattr(root, dir.Ino, "user.c", nil, 0), 0)
	wantErr(t, "removexattr", c.RemoveXattr(root, dir.Ino, "user.c"), 0)
	none("a directory with a default ACL", dir.Ino, false)
	inherits := mkfile(t, c, dir.Ino, "inherits")
	none("a file with an inherited ACL", inherits.Ino, false)
	// Unlinking a file with attributes deletes them all.
	wantErr(t, "setxattr", c.SetXattr(root, file.Ino, "user.z", []byte("z"), 0), 0)
	wantErr(t, "unlink", c.Unlink(root, meta.RootIno, []byte("f")), 0)
	if err := st.View(root, func(tx store.Tx) error {
		names, err := tx.XattrNames(file.Ino)
		if err == nil && len(names) > 0 {
			return fmt.Errorf("attributes %q left behind by the unlinked file", names)
		}
		return err
	}); err != nil {
		t.Error(err)
	}

	// A volume of metadata version 1 has no such flags: NoXattrs never
	// answers for it, whatever the node's flags.
	old := openStore(t, ns)
	format(t, old, testFormat())
	if err := old.Update(root, func(tx store.Tx) error {
		b, err := tx.Setting()
		if err != nil {
			return err
		}
		b = bytes.Replace(b, fmt.Appendf(nil, `"MetaVersion":%d`, meta.MetaVersion), []byte(`"MetaVersion":1`), 1)
		tx.SetSetting(b)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c1 := newClient(t, old, meta.Config{})
	if v := c1.Format().MetaVersion; v != 1 {
		t.Fatalf("metadata version %d after rewriting the settings, want 1", v)
	}
	g := mkfile(t, c1, meta.RootIno, "g")
	if c1.NoXattrs(getattr(t, c1, g.Ino)) {
		t.Error("NoXattrs answers on a volume of metadata version 1")
	}
	wantErr(t, "setxattr", c1.SetXattr(root, g.Ino, "user.a", []byte("1"), 0), 0)
	if names, err := c1.ListXattr(root, g.Ino); err != nil || len(names) != 1 {
		t.Errorf("listxattr on a version 1 volume: %q, %v", names, err)
	}
	// Formatting it again keeps its version: its nodes were not flagged.
	again := testFormat()
	again.TrashDays = 2
	if _, err := meta.FormatVolume(root, old, again); err != nil {
		t.Fatal(err)
	}
	if f, err := meta.Load(root, old); err != nil || f.MetaVersion != 1 {
		t.Errorf("after formatting again: metadata version %v, %v; want 1 kept", f, err)
	}
}
