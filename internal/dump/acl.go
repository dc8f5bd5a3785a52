package dump

import (
	"strconv"

	"github.com/sluicefs/sluice/internal/meta"
)

// ACLs travel in the dump as objects of permissions per class (the
// core's meta.ACLRule, which owns the xattr form); a mask of 65535
// (meta.ACLNoMask) says there is none, as JuiceFS writes it.

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
	r, err := meta.DecodeACL(b)
	if err != nil {
		return nil, err
	}
	a := &dumpACL{Owner: r.Owner, Group: r.Group, Other: r.Other, Mask: r.Mask}
	for _, u := range r.Users {
		a.Users = append(a.Users, aclEntry(u))
	}
	for _, g := range r.Groups {
		a.Groups = append(a.Groups, aclEntry(g))
	}
	return a, nil
}

// xattr encodes a in the xattr form.
func (a *dumpACL) xattr() ([]byte, error) {
	r := meta.ACLRule{Owner: a.Owner, Group: a.Group, Other: a.Other, Mask: a.Mask}
	for _, u := range a.Users {
		r.Users = append(r.Users, meta.ACLEntry(u))
	}
	for _, g := range a.Groups {
		r.Groups = append(r.Groups, meta.ACLEntry(g))
	}
	return r.Encode()
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
