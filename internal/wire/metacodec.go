package wire

import "github.com/sluicefs/sluice/internal/meta"

// The encodings of package meta's types in calls and replies. Each has
// a put and a get; the operation table (ops.go) combines them into the
// codecs of each operation's arguments and results.

func putAttr(b *Buf, a *meta.Attr) {
	if a == nil {
		b.Byte(0)
		return
	}
	b.Byte(1)
	b.Uvarint(uint64(a.Ino))
	b.Byte(a.Type)
	b.Byte(a.Flags)
	b.Uvarint(uint64(a.Mode))
	b.Uvarint(uint64(a.Uid))
	b.Uvarint(uint64(a.Gid))
	b.Varint(a.Atime)
	b.Varint(a.Mtime)
	b.Varint(a.Ctime)
	b.Uvarint(uint64(a.Atimensec))
	b.Uvarint(uint64(a.Mtimensec))
	b.Uvarint(uint64(a.Ctimensec))
	b.Uvarint(uint64(a.Nlink))
	b.Uvarint(a.Length)
	b.Uvarint(uint64(a.Rdev))
	b.Uvarint(uint64(a.Parent))
}

func getAttr(r *Reader) *meta.Attr {
	if r.Byte() != 1 {
		return nil
	}
	a := &meta.Attr{Ino: meta.Ino(r.Uvarint()), Type: r.Byte(), Flags: r.Byte()}
	a.Mode = uint16(r.Uvarint())
	a.Uid = uint32(r.Uvarint())
	a.Gid = uint32(r.Uvarint())
	a.Atime, a.Mtime, a.Ctime = r.Varint(), r.Varint(), r.Varint()
	a.Atimensec = uint32(r.Uvarint())
	a.Mtimensec = uint32(r.Uvarint())
	a.Ctimensec = uint32(r.Uvarint())
	a.Nlink = uint32(r.Uvarint())
	a.Length = r.Uvarint()
	a.Rdev = uint32(r.Uvarint())
	a.Parent = meta.Ino(r.Uvarint())
	return a
}

// getAttrValue reads an attribute block that must be present.
func getAttrValue(r *Reader) *meta.Attr {
	if a := getAttr(r); a != nil {
		return a
	}
	return &meta.Attr{}
}

func putCred(b *Buf, c meta.Cred) {
	b.Uvarint(uint64(c.Uid))
	b.Uvarint(uint64(c.Gid))
	b.Uvarint(uint64(c.Pid))
	b.Uvarint(uint64(len(c.Gids)))
	for _, g := range c.Gids {
		b.Uvarint(uint64(g))
	}
}

func getCred(r *Reader) meta.Cred {
	c := meta.Cred{Uid: uint32(r.Uvarint()), Gid: uint32(r.Uvarint()), Pid: uint32(r.Uvarint())}
	if n := r.Count(1); n > 0 {
		c.Gids = make([]uint32, n)
		for i := range c.Gids {
			c.Gids[i] = uint32(r.Uvarint())
		}
	}
	return c
}

func putChanges(b *Buf, cs []meta.AttrChange) {
	b.Uvarint(uint64(len(cs)))
	for i := range cs {
		putCred(b, cs[i].Cred)
		b.Uvarint(uint64(cs[i].Mask))
		putAttr(b, &cs[i].In)
	}
}

func getChanges(r *Reader) []meta.AttrChange {
	n := r.Count(4)
	if n == 0 {
		return nil
	}
	cs := make([]meta.AttrChange, n)
	for i := range cs {
		cs[i].Cred = getCred(r)
		cs[i].Mask = uint32(r.Uvarint())
		cs[i].In = *getAttrValue(r)
	}
	return cs
}

func putSlice(b *Buf, s meta.Slice) {
	b.Uvarint(uint64(s.Pos))
	b.Uvarint(s.Id)
	b.Uvarint(uint64(s.Size))
	b.Uvarint(uint64(s.Off))
	b.Uvarint(uint64(s.Len))
}

func getSlice(r *Reader) meta.Slice {
	return meta.Slice{Pos: uint32(r.Uvarint()), Id: r.Uvarint(), Size: uint32(r.Uvarint()),
		Off: uint32(r.Uvarint()), Len: uint32(r.Uvarint())}
}

func putLock(b *Buf, l meta.PosixLock) {
	b.Uvarint(l.Start)
	b.Uvarint(l.End)
	b.Uvarint(uint64(l.Type))
	b.Uvarint(uint64(l.Pid))
}

func getLock(r *Reader) meta.PosixLock {
	return meta.PosixLock{Start: r.Uvarint(), End: r.Uvarint(), Type: uint32(r.Uvarint()), Pid: uint32(r.Uvarint())}
}

func putNewNode(b *Buf, nn meta.NewNode) {
	b.Byte(nn.Type)
	b.Uvarint(uint64(nn.Mode))
	b.Uvarint(uint64(nn.Umask))
	b.Uvarint(uint64(nn.Rdev))
	b.Bytes(nn.Target)
}

func getNewNode(r *Reader) meta.NewNode {
	return meta.NewNode{Type: r.Byte(), Mode: uint16(r.Uvarint()), Umask: uint16(r.Uvarint()),
		Rdev: uint32(r.Uvarint()), Target: r.Bytes()}
}

func putBool(b *Buf, v bool) {
	if v {
		b.Byte(1)
		return
	}
	b.Byte(0)
}

func getBool(r *Reader) bool { return r.Byte() == 1 }
