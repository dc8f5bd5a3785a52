package dump

import (
	"bytes"

	jsoniter "github.com/json-iterator/go"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// Where an entry sits.
const (
	inTree   = iota // an ordinary entry
	topTree         // FSTree: the root
	topTrash        // Trash: the trash root
)

// maxName is the longest name of an entry.
const maxName = 255

// entry reads one entry (its object) named name in directory parent, and
// for a directory its whole tree.
func (l *loader) entry(it *jsoniter.Iterator, name []byte, parent store.Ino, where int) {
	var n store.Node
	var haveAttr, haveTarget bool
	var target []byte
	var xattrs []store.Xattr
	var chunks []store.BulkChunk
	var dir *openDir
	it.ReadObjectCB(func(it *jsoniter.Iterator, key string) bool {
		switch key {
		case "attr":
			if !l.attr(it, &n) {
				return false
			}
			haveAttr = true
		case "symlink":
			s := it.ReadString()
			if l.iterErr(it, "symlink") {
				return false
			}
			target, haveTarget = unescape(s), true
		case "xattrs":
			it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
				var x store.Xattr
				it.ReadObjectCB(func(it *jsoniter.Iterator, k string) bool {
					switch k {
					case "name":
						x.Name = it.ReadString()
					case "value":
						x.Value = unescape(it.ReadString())
					default:
						it.Skip()
					}
					return it.Error == nil
				})
				if x.Name == "" && it.Error == nil {
					l.failf("an extended attribute without a name")
					return false
				}
				xattrs = append(xattrs, x)
				n.Flags |= meta.FlagXattrs
				return it.Error == nil
			})
			if l.iterErr(it, "xattrs") {
				return false
			}
		case "posix_acl_access", "posix_acl_default":
			var a dumpACL
			a.Mask = meta.ACLNoMask
			it.ReadVal(&a)
			if l.iterErr(it, key) {
				return false
			}
			b, err := a.xattr()
			if err != nil {
				l.failf("%s: %v", key, err)
				return false
			}
			if key == "posix_acl_access" {
				xattrs = append(xattrs, store.Xattr{Name: meta.XattrACLAccess, Value: b})
				n.Flags |= meta.FlagACL
			} else {
				xattrs = append(xattrs, store.Xattr{Name: meta.XattrACLDefault, Value: b})
				n.Flags |= meta.FlagDefaultACL
			}
		case "chunks":
			if chunks = l.chunks(it, chunks); chunks == nil && l.err != nil {
				return false
			}
		case "entries":
			if !haveAttr {
				l.failf("\"entries\" comes before \"attr\": cannot place the children")
				return false
			}
			if n.Type != store.TypeDir {
				l.failf("a %s has entries (a directory under a file?)", typeNames[n.Type])
				return false
			}
			if dir == nil {
				if dir = l.openDir(&n, name, parent, where); dir == nil {
					return false
				}
			}
			l.children(it, dir)
		default:
			it.Skip()
			if l.iterErr(it, key) {
				return false
			}
			l.dropped["unknown entry key "+key]++
		}
		return l.ok(it)
	})
	if l.err != nil || l.iterErr(it, "entry") {
		return
	}
	if !haveAttr {
		l.failf("entry without \"attr\"")
		return
	}
	if n.Type == store.TypeDir {
		if dir == nil { // no "entries": an empty directory
			if dir = l.openDir(&n, name, parent, where); dir == nil {
				return
			}
		}
		dir.xattrs = append(dir.xattrs, xattrs...)
		dir.node.Flags |= n.Flags & (meta.FlagACL | meta.FlagDefaultACL | meta.FlagXattrs)
		l.closeDir(dir, where)
		return
	}
	if where != inTree {
		l.failf("the root of the tree is a %s, not a directory", typeNames[n.Type])
		return
	}
	if n.Type == store.TypeSymlink && !haveTarget {
		l.failf("symlink without a target")
		return
	}
	if n.Type != store.TypeSymlink && haveTarget {
		l.failf("a %s with a symlink target", typeNames[n.Type])
		return
	}
	if n.Type != store.TypeFile && len(chunks) > 0 {
		l.failf("a %s with chunks", typeNames[n.Type])
		return
	}
	l.leaf(&n, name, parent, target, xattrs, chunks)
}

// attr reads an attr object into n.
func (l *loader) attr(it *jsoniter.Iterator, n *store.Node) bool {
	var typ string
	it.ReadObjectCB(func(it *jsoniter.Iterator, k string) bool {
		switch k {
		case "inode":
			n.Ino = store.Ino(it.ReadUint64())
		case "flags":
			n.Flags |= flagsFromDump(it.ReadUint8())
		case "type":
			typ = it.ReadString()
		case "mode":
			n.Mode = it.ReadUint16() & 0o7777
		case "uid":
			n.Uid = it.ReadUint32()
		case "gid":
			n.Gid = it.ReadUint32()
		case "atime":
			n.Atime = it.ReadInt64()
		case "mtime":
			n.Mtime = it.ReadInt64()
		case "ctime":
			n.Ctime = it.ReadInt64()
		case "atimensec":
			n.Atimensec = it.ReadUint32()
		case "mtimensec":
			n.Mtimensec = it.ReadUint32()
		case "ctimensec":
			n.Ctimensec = it.ReadUint32()
		case "nlink":
			n.Nlink = it.ReadUint32()
		case "length":
			n.Length = it.ReadUint64()
		case "rdev":
			n.Rdev = it.ReadUint32()
		default:
			it.Skip()
		}
		if it.Error != nil {
			if !l.in.truncated(it.Error) {
				l.failf("attr %q: %v (want a non-negative integer in range)", k, it.Error)
			}
			return false
		}
		return true
	})
	if l.err != nil || l.iterErr(it, "attr") {
		return false
	}
	if n.Ino == 0 {
		l.failf("attr without an inode number")
		return false
	}
	if n.Type = typeOf(typ); n.Type == 0 {
		l.failf("unknown type %q", typ)
		return false
	}
	if n.Atimensec >= 1e9 || n.Mtimensec >= 1e9 || n.Ctimensec >= 1e9 {
		l.failf("nanoseconds out of range")
		return false
	}
	if n.Length > meta.MaxFileSize && n.Type == store.TypeFile {
		l.failf("length %d is past the largest file size, %d", n.Length, uint64(meta.MaxFileSize))
		return false
	}
	return true
}

// chunks reads a file's chunk list, appending to out.
func (l *loader) chunks(it *jsoniter.Iterator, out []store.BulkChunk) []store.BulkChunk {
	it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
		var c store.BulkChunk
		it.ReadObjectCB(func(it *jsoniter.Iterator, k string) bool {
			switch k {
			case "index":
				c.Idx = it.ReadUint32()
			case "slices":
				it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
					var s store.Slice
					it.ReadObjectCB(func(it *jsoniter.Iterator, k string) bool {
						switch k {
						case "id", "chunkid":
							s.Id = it.ReadUint64()
						case "pos":
							s.Pos = it.ReadUint32()
						case "size":
							s.Size = it.ReadUint32()
						case "off":
							s.Off = it.ReadUint32()
						case "len":
							s.Len = it.ReadUint32()
						default:
							it.Skip()
						}
						if it.Error != nil {
							if !l.in.truncated(it.Error) {
								l.failf("slice %q: %v (want a non-negative integer in range)", k, it.Error)
							}
							return false
						}
						return true
					})
					if l.err != nil || it.Error != nil {
						return false
					}
					if uint64(s.Pos)+uint64(s.Len) > meta.ChunkSize {
						l.failf("chunk %d: slice %d at %d+%d runs past the 64 MiB chunk", c.Idx, s.Id, s.Pos, s.Len)
						return false
					}
					if s.Id != 0 && uint64(s.Off)+uint64(s.Len) > uint64(s.Size) {
						l.failf("chunk %d: slice %d reads %d+%d past its size %d", c.Idx, s.Id, s.Off, s.Len, s.Size)
						return false
					}
					c.Slices = append(c.Slices, s)
					return true
				})
			default:
				it.Skip()
			}
			return l.err == nil && it.Error == nil
		})
		if l.err != nil || it.Error != nil {
			return false
		}
		if uint64(c.Idx)*meta.ChunkSize >= meta.MaxFileSize {
			l.failf("chunk %d is past the largest file size, %d", c.Idx, uint64(meta.MaxFileSize))
			return false
		}
		if len(c.Slices) > 0 {
			out = append(out, c)
		}
		return true
	})
	if l.err != nil || l.iterErr(it, "chunks") {
		return nil
	}
	return out
}

// checkName refuses names no directory can hold.
func (l *loader) checkName(name []byte) bool {
	switch {
	case len(name) == 0:
		l.failf("an empty name")
	case len(name) > maxName:
		l.failf("a name of %d bytes (at most %d)", len(name), maxName)
	case bytes.IndexByte(name, '/') >= 0 || bytes.IndexByte(name, 0) >= 0:
		l.failf("a name with '/' or NUL")
	case string(name) == "." || string(name) == "..":
		l.failf("an entry named %q", name)
	default:
		return true
	}
	return false
}

// openDir starts a directory: checks it, and makes the records of its
// children point at it.
func (l *loader) openDir(n *store.Node, name []byte, parent store.Ino, where int) *openDir {
	switch where {
	case topTree:
		n.Ino, n.Parent = store.RootIno, store.RootIno
	case topTrash:
		if n.Ino != meta.TrashIno {
			l.failf("the trash has inode %d, not %d", n.Ino, meta.TrashIno)
			return nil
		}
		// Written when its entries are read (see closeDir): JuiceFS
		// dumps a placeholder trash with no entries and no attributes.
		n.Parent = store.RootIno
		n.Mode, n.Uid, n.Gid = 0o555, 0, 0
	default:
		if !l.checkName(name) {
			return nil
		}
		if parent == meta.TrashIno {
			ino, ok := trashHourIno(name)
			if !ok {
				l.failf("a trash directory not named YYYY-MM-DD-HH")
				return nil
			}
			n.Ino = ino
		} else if meta.IsTrash(n.Ino) || n.Ino == store.RootIno {
			l.failf("directory with reserved inode %d", n.Ino)
			return nil
		}
		if parent == store.RootIno && string(name) == meta.TrashName {
			l.failf("an entry named %s in the root: the name is reserved for the trash", meta.TrashName)
			return nil
		}
		n.Parent = parent
		l.edge(parent, name, n.Ino, store.TypeDir)
	}
	if prev := l.types.get(n.Ino); prev != 0 {
		l.failf("directory inode %d appears twice (as %s before)", n.Ino, typeNames[prev])
		return nil
	}
	l.types.set(n.Ino, store.TypeDir)
	d := &openDir{node: *n}
	l.stack = append(l.stack, d)
	return d
}

// children reads a directory's entries object.
func (l *loader) children(it *jsoniter.Iterator, d *openDir) {
	it.ReadMapCB(func(it *jsoniter.Iterator, key string) bool {
		name := unescape(key)
		l.path = append(l.path, key)
		l.entry(it, name, d.node.Ino, inTree)
		l.path = l.path[:len(l.path)-1]
		return l.ok(it)
	})
	l.iterErr(it, "entries")
}

// closeDir writes a directory whose entries have all been read.
func (l *loader) closeDir(d *openDir, where int) {
	l.stack = l.stack[:len(l.stack)-1]
	n := d.node
	if where == topTrash {
		if d.subdirs == 0 {
			return // an empty trash: Sluice makes one when it needs it
		}
		l.hasTrash = true
		l.edge(store.RootIno, []byte(meta.TrashName), n.Ino, store.TypeDir)
	}
	n.Nlink = 2 + d.subdirs
	n.Length = 4096
	for _, x := range d.xattrs {
		l.bulk.Xattrs = append(l.bulk.Xattrs, store.BulkXattr{Ino: n.Ino, Xattr: x})
		l.added()
	}
	if len(l.stack) > 0 {
		l.stack[len(l.stack)-1].subdirs++
	}
	l.count(store.TypeDir)
	switch {
	case where == topTree:
		root := n
		l.root = &root // written last, with the trash's link
		return
	case meta.IsTrash(n.Ino):
		// the trash's directories are not counted in the usage
	default:
		l.charge(&n)
	}
	l.bulk.Nodes = append(l.bulk.Nodes, &n)
	l.added()
}

// leaf stores a non-directory entry: the name, and on the first name of
// the inode its records.
func (l *loader) leaf(n *store.Node, name []byte, parent store.Ino, target []byte, xattrs []store.Xattr, chunks []store.BulkChunk) {
	if !l.checkName(name) {
		return
	}
	if parent == store.RootIno && string(name) == meta.TrashName {
		l.failf("an entry named %s in the root: the name is reserved for the trash", meta.TrashName)
		return
	}
	if meta.IsTrash(n.Ino) || n.Ino == store.RootIno {
		l.failf("%s with reserved inode %d", typeNames[n.Type], n.Ino)
		return
	}
	l.edge(parent, name, n.Ino, n.Type)
	l.count(n.Type)
	if prev := l.types.get(n.Ino); prev != 0 {
		if prev != n.Type {
			l.failf("inode %d appears as a %s and as a %s", n.Ino, typeNames[prev], typeNames[n.Type])
			return
		}
		l.rep.HardLinks++
		// Attributes and chunks come from the first name; extended
		// attributes from every name (a dump may list them under one).
		for _, x := range xattrs {
			l.bulk.Xattrs = append(l.bulk.Xattrs, store.BulkXattr{Ino: n.Ino, Xattr: x})
			l.added()
		}
		lk := l.links[n.Ino]
		if lk == nil {
			l.links[n.Ino] = &link{count: 2, parent: parent}
			return
		}
		lk.count++
		if lk.parent != parent {
			lk.parent = 0
		}
		return
	}
	l.types.set(n.Ino, n.Type)
	n.Parent = parent
	n.Nlink = 1
	switch n.Type {
	case store.TypeSymlink:
		n.Length = uint64(len(target))
		l.bulk.Symlinks = append(l.bulk.Symlinks, store.BulkSymlink{Ino: n.Ino, Target: target})
		l.added()
	case store.TypeFile:
		for _, c := range chunks {
			for _, s := range c.Slices {
				l.ref(s)
			}
			l.bulk.Chunks = append(l.bulk.Chunks, store.BulkChunk{ChunkKey: store.ChunkKey{Ino: n.Ino, Idx: c.Idx}, Slices: c.Slices})
			l.added()
		}
	default:
		n.Length = 0
	}
	for _, x := range xattrs {
		l.bulk.Xattrs = append(l.bulk.Xattrs, store.BulkXattr{Ino: n.Ino, Xattr: x})
		l.added()
	}
	l.charge(n)
	node := *n
	l.bulk.Nodes = append(l.bulk.Nodes, &node)
	l.added()
}

// edge stores a directory entry.
func (l *loader) edge(parent store.Ino, name []byte, ino store.Ino, typ uint8) {
	l.bulk.Edges = append(l.bulk.Edges, store.BulkEdge{Parent: parent, Edge: store.Edge{Name: name, Ino: ino, Type: typ}})
	l.added()
}

// ref counts one chunk list naming slice s.
func (l *loader) ref(s store.Slice) {
	if s.Id == 0 {
		return
	}
	l.rep.Slices++
	l.maxSlice = max(l.maxSlice, s.Id)
	if !l.slices.add(s.Id) {
		l.extra[sliceKey{s.Id, s.Size}]++
	}
}

// charge counts an inode in the usage, as the core charges it.
func (l *loader) charge(n *store.Node) {
	l.inodes++
	l.space += meta.SpaceOf(n)
	l.maxIno = max(l.maxIno, n.Ino)
}

func (l *loader) count(t uint8) {
	r := l.rep
	r.Entries++
	switch t {
	case store.TypeDir:
		r.Dirs++
	case store.TypeFile:
		r.Files++
	case store.TypeSymlink:
		r.Symlinks++
	default:
		r.Others++
	}
	if r.Entries%4096 == 0 && l.opts.Progress != nil {
		l.opts.Progress(Progress{Entries: r.Entries, Bytes: l.in.n})
	}
}
