package metatest

import (
	"encoding/binary"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// aclXattr builds the kernel's xattr form of an ACL from (tag, perm, id)
// triples.
func aclXattr(entries ...[3]uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, uint16(e[0]))
		b = binary.LittleEndian.AppendUint16(b, uint16(e[1]))
		b = binary.LittleEndian.AppendUint32(b, e[2])
	}
	return b
}

const (
	tagUserObj  = 0x01
	tagUser     = 0x02
	tagGroupObj = 0x04
	tagGroup    = 0x08
	tagMask     = 0x10
	tagOther    = 0x20
)

// setupACL returns a fresh volume formatted with ACLs enabled, and a
// client of it.
func setupACL(t *testing.T, ns newStoreFunc) (store.Store, *meta.Session) {
	t.Helper()
	st := openStore(t, ns)
	f := testFormat()
	f.EnableACL = true
	format(t, st, f)
	return st, newClient(t, st, meta.Config{})
}

// testACL checks POSIX ACLs on a volume formatted with them: the access
// check, the mode kept in step, and default ACL inheritance.
func testACL(t *testing.T, ns newStoreFunc) {
	_, c := setupACL(t, ns)
	alice := meta.WithCred(root, meta.Cred{Uid: 1001, Gid: 1001})
	bob := meta.WithCred(root, meta.Cred{Uid: 1002, Gid: 1002})
	carol := meta.WithCred(root, meta.Cred{Uid: 1003, Gid: 1003, Gids: []uint32{2000}})

	file := mk(t, root, c, meta.RootIno, "f", 1, 0o600) // owned by root
	wantErr(t, "alice reads 0600 file", c.Access(alice, file.Ino, meta.MayRead), syscall.EACCES)
	acl := aclXattr([3]uint32{tagUserObj, 6, 0}, [3]uint32{tagUser, 6, 1001}, [3]uint32{tagGroupObj, 0, 0},
		[3]uint32{tagGroup, 4, 2000}, [3]uint32{tagMask, 6, 0}, [3]uint32{tagOther, 0, 0})
	wantErr(t, "alice sets an ACL on root's file", c.SetXattr(alice, file.Ino, meta.XattrACLAccess, acl, 0), syscall.EPERM)
	wantErr(t, "root sets the ACL", c.SetXattr(root, file.Ino, meta.XattrACLAccess, acl, 0), 0)
	if a := getattr(t, c, file.Ino); a.Mode&0o777 != 0o660 {
		t.Errorf("mode after ACL: %o, want 660 (group bits from the mask)", a.Mode&0o777)
	}
	wantErr(t, "alice (named user) reads", c.Access(alice, file.Ino, meta.MayRead|meta.MayWrite), 0)
	wantErr(t, "bob (other) reads", c.Access(bob, file.Ino, meta.MayRead), syscall.EACCES)
	wantErr(t, "carol (named group) reads", c.Access(carol, file.Ino, meta.MayRead), 0)
	wantErr(t, "carol (named group) writes", c.Access(carol, file.Ino, meta.MayWrite), syscall.EACCES)
	if _, err := c.Open(alice, file.Ino, syscall.O_RDWR); err != nil {
		t.Errorf("alice opens for writing through the ACL: %v", err)
	} else {
		c.Release(alice, file.Ino)
	}
	got, err := c.GetXattr(bob, file.Ino, meta.XattrACLAccess)
	wantErr(t, "anyone reads the ACL", err, 0)
	if len(got) != len(acl) {
		t.Errorf("ACL read back has %d bytes, want %d", len(got), len(acl))
	}
	// chmod narrows the mask: the named user loses write.
	if _, err := c.SetAttr(root, file.Ino, meta.SetMode, &meta.Attr{Mode: 0o640}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "alice writes after chmod 640", c.Access(alice, file.Ino, meta.MayWrite), syscall.EACCES)
	wantErr(t, "alice still reads", c.Access(alice, file.Ino, meta.MayRead), 0)
	// Removing the ACL leaves the mode.
	wantErr(t, "remove ACL", c.RemoveXattr(root, file.Ino, meta.XattrACLAccess), 0)
	wantErr(t, "alice after removal", c.Access(alice, file.Ino, meta.MayRead), syscall.EACCES)
	_, err = c.GetXattr(root, file.Ino, meta.XattrACLAccess)
	wantErr(t, "no ACL after removal", err, syscall.ENODATA)
	// A minimal ACL only sets the mode.
	wantErr(t, "minimal ACL", c.SetXattr(root, file.Ino, meta.XattrACLAccess,
		aclXattr([3]uint32{tagUserObj, 7, 0}, [3]uint32{tagGroupObj, 5, 0}, [3]uint32{tagOther, 1, 0}), 0), 0)
	if a := getattr(t, c, file.Ino); a.Mode&0o777 != 0o751 {
		t.Errorf("mode after minimal ACL %o, want 751", a.Mode&0o777)
	}
	wantErr(t, "malformed ACL", c.SetXattr(root, file.Ino, meta.XattrACLAccess, []byte{1, 2, 3}, 0), syscall.EINVAL)
	wantErr(t, "ACL without mask", c.SetXattr(root, file.Ino, meta.XattrACLAccess,
		aclXattr([3]uint32{tagUserObj, 7, 0}, [3]uint32{tagUser, 7, 5}, [3]uint32{tagGroupObj, 5, 0}, [3]uint32{tagOther, 1, 0}), 0), syscall.EINVAL)
	wantErr(t, "default ACL on a file", c.SetXattr(root, file.Ino, meta.XattrACLDefault, acl, 0), syscall.EACCES)

	// Default ACLs: children inherit, the create mode limits, no umask.
	dir := mk(t, root, c, meta.RootIno, "d", 2, 0o755)
	def := aclXattr([3]uint32{tagUserObj, 7, 0}, [3]uint32{tagUser, 7, 1001}, [3]uint32{tagGroupObj, 5, 0},
		[3]uint32{tagMask, 7, 0}, [3]uint32{tagOther, 5, 0})
	wantErr(t, "set default ACL", c.SetXattr(root, dir.Ino, meta.XattrACLDefault, def, 0), 0)
	child, err := c.Mknod(root, dir.Ino, []byte("child"), meta.NewNode{Type: 1, Mode: 0o640, Umask: 0o077})
	if err != nil {
		t.Fatal(err)
	}
	if child.Mode&0o777 != 0o640 {
		t.Errorf("child mode %o, want 640 (create mode limits the ACL; umask ignored)", child.Mode&0o777)
	}
	wantErr(t, "alice reads the child through the inherited ACL", c.Access(alice, child.Ino, meta.MayRead), 0)
	wantErr(t, "alice writes the child (mask limited to r by the create mode)", c.Access(alice, child.Ino, meta.MayWrite), syscall.EACCES)
	sub, err := c.Mknod(root, dir.Ino, []byte("sub"), meta.NewNode{Type: 2, Mode: 0o777, Umask: 0o022})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetXattr(root, sub.Ino, meta.XattrACLDefault); err != nil {
		t.Errorf("subdirectory did not inherit the default ACL: %v", err)
	}
	plain, err := c.Mknod(root, meta.RootIno, []byte("plain"), meta.NewNode{Type: 1, Mode: 0o666, Umask: 0o022})
	if err != nil || plain.Mode&0o777 != 0o644 {
		t.Errorf("without a default ACL the umask applies: mode %o, %v", plain.Mode&0o777, err)
	}
}

// testACLDisabled checks that a volume without ACLs refuses them.
func testACLDisabled(t *testing.T, ns newStoreFunc) {
	c := setup(t, ns, meta.Config{})
	f := mkfile(t, c, meta.RootIno, "f")
	acl := aclXattr([3]uint32{tagUserObj, 7, 0}, [3]uint32{tagGroupObj, 5, 0}, [3]uint32{tagOther, 1, 0})
	wantErr(t, "set ACL without ACLs enabled", c.SetXattr(root, f.Ino, meta.XattrACLAccess, acl, 0), syscall.EOPNOTSUPP)
}
