package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// POSIX ACLs are kept as the extended attributes Linux uses for them, in
// the xattr format of the kernel (version 2: a 4-byte header, then 8-byte
// entries of tag, permissions and id). A node with an access ACL has
// FlagACL set and one with a default ACL FlagDefaultACL, so permission
// checks and creates read the ACL only when there is one. ACLs are
// honoured only on volumes formatted with them enabled.
const (
	XattrACLAccess  = "system.posix_acl_access"
	XattrACLDefault = "system.posix_acl_default"

	// FlagACL marks a node with an access ACL beyond its mode bits.
	FlagACL = 0x40
	// FlagDefaultACL marks a directory with a default ACL.
	FlagDefaultACL = 0x80
)

// ACL entry tags.
const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclGroup    = 0x08
	aclMask     = 0x10
	aclOther    = 0x20
	aclVersion  = 2
)

type aclEntry struct {
	tag  uint16
	perm uint16
	id   uint32
}

// acl is a valid ACL, entries sorted by tag then id.
type acl []aclEntry

// parseACL decodes and validates the xattr form of an ACL.
func parseACL(b []byte) (acl, error) {
	if len(b) < 4 || (len(b)-4)%8 != 0 || binary.LittleEndian.Uint32(b) != aclVersion {
		return nil, syscall.EINVAL
	}
	var a acl
	for p := b[4:]; len(p) > 0; p = p[8:] {
		e := aclEntry{tag: binary.LittleEndian.Uint16(p), perm: binary.LittleEndian.Uint16(p[2:]), id: binary.LittleEndian.Uint32(p[4:])}
		if e.perm&^7 != 0 {
			return nil, syscall.EINVAL
		}
		if e.tag != aclUser && e.tag != aclGroup {
			e.id = 0
		}
		a = append(a, e)
	}
	slices.SortFunc(a, func(x, y aclEntry) int {
		if x.tag != y.tag {
			return int(x.tag) - int(y.tag)
		}
		return int(int64(x.id) - int64(y.id))
	})
	count := map[uint16]int{}
	for i, e := range a {
		switch e.tag {
		case aclUserObj, aclGroupObj, aclOther, aclMask, aclUser, aclGroup:
		default:
			return nil, syscall.EINVAL
		}
		if i > 0 && a[i-1].tag == e.tag && a[i-1].id == e.id {
			return nil, syscall.EINVAL
		}
		count[e.tag]++
	}
	if len(a) == 0 {
		return a, nil // an empty default ACL removes it
	}
	if count[aclUserObj] != 1 || count[aclGroupObj] != 1 || count[aclOther] != 1 || count[aclMask] > 1 ||
		(count[aclUser]+count[aclGroup] > 0 && count[aclMask] == 0) {
		return nil, syscall.EINVAL
	}
	return a, nil
}

func (a acl) encode() []byte {
	b := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+8*len(a)), aclVersion)
	for _, e := range a {
		id := e.id
		if e.tag != aclUser && e.tag != aclGroup {
			id = 0xffffffff // ACL_UNDEFINED_ID, as the kernel writes it
		}
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, id)
	}
	return b
}

func (a acl) find(tag uint16) *aclEntry {
	for i := range a {
		if a[i].tag == tag {
			return &a[i]
		}
	}
	return nil
}

// minimal reports whether the ACL says no more than mode bits can.
func (a acl) minimal() bool { return len(a) == 3 }

// mode returns the permission bits the ACL implies: the group class is the
// mask when there is one.
func (a acl) mode() uint16 {
	group := a.find(aclGroupObj)
	if m := a.find(aclMask); m != nil {
		group = m
	}
	return a.find(aclUserObj).perm<<6 | group.perm<<3 | a.find(aclOther).perm
}

// withMode returns the ACL with its owner, group-class and other
// permissions set from mode, as chmod(2) does.
func (a acl) withMode(mode uint16) acl {
	b := slices.Clone(a)
	b.find(aclUserObj).perm = mode >> 6 & 7
	group := b.find(aclGroupObj)
	if m := b.find(aclMask); m != nil {
		group = m
	}
	group.perm = mode >> 3 & 7
	b.find(aclOther).perm = mode & 7
	return b
}

// permits applies the POSIX ACL access check algorithm.
func (a acl) permits(c Cred, n *Attr, mask uint32) bool {
	want := uint16(mask)
	if c.Uid == n.Uid {
		return a.find(aclUserObj).perm&want == want
	}
	maskPerm := uint16(7)
	if m := a.find(aclMask); m != nil {
		maskPerm = m.perm
	}
	for _, e := range a {
		if e.tag == aclUser && e.id == c.Uid {
			return e.perm&maskPerm&want == want
		}
	}
	inGroup := false
	for _, e := range a {
		var match bool
		switch e.tag {
		case aclGroupObj:
			match = c.InGroup(n.Gid)
		case aclGroup:
			match = c.InGroup(e.id)
		}
		if match {
			inGroup = true
			if e.perm&maskPerm&want == want {
				return true
			}
		}
	}
	if inGroup {
		return false
	}
	return a.find(aclOther).perm&want == want
}

// loadACL reads the ACL stored under name for n.
func loadACL(tx store.Tx, n *Attr, name string) (acl, error) {
	b, err := tx.Xattr(n.Ino, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseACL(b)
}

// setACL stores (or, for nil, removes) the ACL under name for n and keeps
// n's flags in step; the caller stores n.
func setACL(tx store.Tx, n *Attr, name string, a acl) {
	flag := uint8(FlagACL)
	if name == XattrACLDefault {
		flag = FlagDefaultACL
	}
	if a == nil {
		tx.DeleteXattr(n.Ino, name)
		n.Flags &^= flag
		return
	}
	tx.SetXattr(n.Ino, name, a.encode())
	n.Flags |= flag
}

// setACLXattr handles a write of an ACL extended attribute: an access ACL
// also sets the mode's permission bits; one that says no more than the mode
// is not kept.
func setACLXattr(tx store.Tx, cred Cred, n *Attr, name string, value []byte) error {
	a, err := parseACL(value)
	if err != nil {
		return err
	}
	if name == XattrACLDefault {
		if n.Type != store.TypeDir {
			return syscall.EACCES
		}
		if len(a) == 0 {
			a = nil
		}
		setACL(tx, n, name, a)
		return nil
	}
	if len(a) == 0 {
		return syscall.EINVAL
	}
	n.Mode = n.Mode&^0o777 | a.mode()
	if !cred.IsRoot() && !cred.InGroup(n.Gid) {
		n.Mode &^= modeSetgid
	}
	if a.minimal() {
		a = nil
	}
	setACL(tx, n, name, a)
	return nil
}

// inheritACL applies the parent's default ACL to a new node n created with
// the requested mode: the new node's ACL is the default one limited by
// mode, and a directory inherits the default ACL too. Without a default
// ACL the umask applies instead.
func inheritACL(tx store.Tx, parent, n *Attr, mode, umask uint16) error {
	if parent.Flags&FlagDefaultACL == 0 || n.Type == store.TypeSymlink {
		n.Mode = mode &^ umask & 0o7777
		return nil
	}
	def, err := loadACL(tx, parent, XattrACLDefault)
	if err != nil || def == nil {
		n.Mode = mode &^ umask & 0o7777
		return err
	}
	if n.Type == store.TypeDir {
		setACL(tx, n, XattrACLDefault, def)
	}
	access := slices.Clone(def)
	access.find(aclUserObj).perm &= mode >> 6 & 7
	group := access.find(aclGroupObj)
	if m := access.find(aclMask); m != nil {
		group = m
	}
	group.perm &= mode >> 3 & 7
	access.find(aclOther).perm &= mode & 7
	n.Mode = mode&0o7000 | access.mode()
	if !access.minimal() {
		setACL(tx, n, XattrACLAccess, access)
	}
	return nil
}

// ACLNoMask is the Mask of an ACLRule without a mask entry.
const ACLNoMask = 0xFFFF

// ACLRule is an ACL by class, the form other systems exchange it in (the
// dump format): the permissions (0..7) of the owner, the owning group,
// others and the mask (ACLNoMask when there is none), and of named users
// and groups.
type ACLRule struct {
	Owner, Group, Other, Mask uint16
	Users, Groups             []ACLEntry
}

// ACLEntry is the permission of one named user or group.
type ACLEntry struct {
	ID   uint32
	Perm uint16
}

// DecodeACL decodes and checks the xattr form of an ACL.
func DecodeACL(b []byte) (*ACLRule, error) {
	a, err := parseACL(b)
	if err != nil || len(a) == 0 {
		return nil, fmt.Errorf("corrupt ACL (%d bytes)", len(b))
	}
	r := &ACLRule{Mask: ACLNoMask}
	for _, e := range a {
		switch e.tag {
		case aclUserObj:
			r.Owner = e.perm
		case aclGroupObj:
			r.Group = e.perm
		case aclOther:
			r.Other = e.perm
		case aclMask:
			r.Mask = e.perm
		case aclUser:
			r.Users = append(r.Users, ACLEntry{e.id, e.perm})
		case aclGroup:
			r.Groups = append(r.Groups, ACLEntry{e.id, e.perm})
		}
	}
	return r, nil
}

// Encode returns the xattr form of r, as SetXattr stores it, after the
// checks SetXattr makes (each permission 0..7, a mask when there are
// named entries, no name twice).
func (r *ACLRule) Encode() ([]byte, error) {
	a := acl{{tag: aclUserObj, perm: r.Owner}, {tag: aclGroupObj, perm: r.Group}, {tag: aclOther, perm: r.Other}}
	if r.Mask != ACLNoMask {
		a = append(a, aclEntry{tag: aclMask, perm: r.Mask})
	}
	for _, u := range r.Users {
		a = append(a, aclEntry{tag: aclUser, perm: u.Perm, id: u.ID})
	}
	for _, g := range r.Groups {
		a = append(a, aclEntry{tag: aclGroup, perm: g.Perm, id: g.ID})
	}
	checked, err := parseACL(a.encode())
	if err != nil {
		return nil, errors.New("invalid ACL: permissions must be 0..7, named entries need a mask, and no name may appear twice")
	}
	return checked.encode(), nil
}
