package dump

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
)

// ACLs travel in the dump as objects of permissions per class; Sluice
// keeps them as the Linux xattr form (a 4-byte version header, then
// 8-byte entries of tag, permissions and id, little-endian).

// Tags of the xattr form.
const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclGroup    = 0x08
	aclMask     = 0x10
	aclOther    = 0x20
	aclVersion  = 2
	// aclNoMask is the mask of an ACL without a mask entry, as JuiceFS
	// writes it.
	aclNoMask = 0xFFFF
)

// aclEntry is one named user's or group's permissions.
type aclEntry struct {
	ID   uint32 `json:"id"`
	Perm uint16 `json:"perm"`
}

// dumpACL is the dump's form of an ACL.
type dumpACL struct {
	Owner  uint16     `json:"owner"`
	Group  uint16     `json:"group"`
	Other  uint16     `json:"other"`
	Mask   uint16     `json:"mask"`
	Users  []aclEntry `json:"users"`
	Groups []aclEntry `json:"groups"`
}

// aclFromXattr decodes the xattr form.
func aclFromXattr(b []byte) (*dumpACL, error) {
	if len(b) < 4 || (len(b)-4)%8 != 0 || binary.LittleEndian.Uint32(b) != aclVersion {
		return nil, fmt.Errorf("corrupt ACL (%d bytes)", len(b))
	}
	a := &dumpACL{Mask: aclNoMask}
	for p := b[4:]; len(p) > 0; p = p[8:] {
		tag, perm, id := binary.LittleEndian.Uint16(p), binary.LittleEndian.Uint16(p[2:]), binary.LittleEndian.Uint32(p[4:])
		switch tag {
		case aclUserObj:
			a.Owner = perm
		case aclGroupObj:
			a.Group = perm
		case aclOther:
			a.Other = perm
		case aclMask:
			a.Mask = perm
		case aclUser:
			a.Users = append(a.Users, aclEntry{id, perm})
		case aclGroup:
			a.Groups = append(a.Groups, aclEntry{id, perm})
		default:
			return nil, fmt.Errorf("corrupt ACL: unknown tag %#x", tag)
		}
	}
	return a, nil
}

// xattr encodes a in the xattr form, entries sorted by tag then id.
func (a *dumpACL) xattr() ([]byte, error) {
	check := func(p uint16) error {
		if p > 7 {
			return fmt.Errorf("ACL permission %d out of range 0..7", p)
		}
		return nil
	}
	b := binary.LittleEndian.AppendUint32(nil, aclVersion)
	add := func(tag, perm uint16, id uint32) {
		b = binary.LittleEndian.AppendUint16(b, tag)
		b = binary.LittleEndian.AppendUint16(b, perm)
		b = binary.LittleEndian.AppendUint32(b, id)
	}
	for _, p := range []uint16{a.Owner, a.Group, a.Other} {
		if err := check(p); err != nil {
			return nil, err
		}
	}
	byID := func(x, y aclEntry) int { return int(int64(x.ID) - int64(y.ID)) }
	users, groups := slices.Clone(a.Users), slices.Clone(a.Groups)
	slices.SortFunc(users, byID)
	slices.SortFunc(groups, byID)
	add(aclUserObj, a.Owner, 0)
	for _, u := range users {
		if err := check(u.Perm); err != nil {
			return nil, err
		}
		add(aclUser, u.Perm, u.ID)
	}
	add(aclGroupObj, a.Group, 0)
	for _, g := range groups {
		if err := check(g.Perm); err != nil {
			return nil, err
		}
		add(aclGroup, g.Perm, g.ID)
	}
	if a.Mask <= 7 {
		add(aclMask, a.Mask, 0)
	} else if len(users)+len(groups) > 0 {
		return nil, fmt.Errorf("ACL with named entries has no mask")
	}
	add(aclOther, a.Other, 0)
	return b, nil
}

// appendACL appends a as the dump writes it, on one line.
func appendACL(b []byte, a *dumpACL) []byte {
	num := func(k string, v uint64) {
		b = append(b, k...)
		b = strconv.AppendUint(b, v, 10)
	}
	list := func(k string, es []aclEntry) {
		b = append(b, k...)
		if es == nil {
			b = append(b, "null"...)
			return
		}
		b = append(b, '[')
		for i, e := range es {
			if i > 0 {
				b = append(b, ',')
			}
			num(`{"id":`, uint64(e.ID))
			num(`,"perm":`, uint64(e.Perm))
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	num(`{"owner":`, uint64(a.Owner))
	num(`,"group":`, uint64(a.Group))
	num(`,"other":`, uint64(a.Other))
	num(`,"mask":`, uint64(a.Mask))
	list(`,"users":`, a.Users)
	list(`,"groups":`, a.Groups)
	return append(b, '}')
}
