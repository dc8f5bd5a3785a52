package kvstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// tx implements store.Tx over a Txn.
type tx struct {
	t   Txn
	err error // first failure of a write method; fails the commit
}

var _ store.Tx = (*tx)(nil)

var be = binary.BigEndian

func inoKey(ino store.Ino, kind byte, extra []byte) []byte {
	k := make([]byte, 0, 10+len(extra))
	k = append(k, 'A')
	k = be.AppendUint64(k, uint64(ino))
	k = append(k, kind)
	return append(k, extra...)
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func (x *tx) get(key []byte, what string) ([]byte, error) {
	v, err := x.t.Get(key)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", what, err)
	}
	if v == nil {
		return nil, store.ErrNotFound
	}
	return v, nil
}

// Nodes

const nodeSize = 1 + 1 + 1 + 2 + 4 + 4 + 3*(8+4) + 4 + 8 + 4 + 8

func encodeNode(n *store.Node) []byte {
	b := make([]byte, 0, nodeSize)
	b = append(b, 1, n.Type, n.Flags) // format version 1
	b = be.AppendUint16(b, n.Mode)
	b = be.AppendUint32(b, n.Uid)
	b = be.AppendUint32(b, n.Gid)
	b = be.AppendUint64(b, uint64(n.Atime))
	b = be.AppendUint32(b, n.Atimensec)
	b = be.AppendUint64(b, uint64(n.Mtime))
	b = be.AppendUint32(b, n.Mtimensec)
	b = be.AppendUint64(b, uint64(n.Ctime))
	b = be.AppendUint32(b, n.Ctimensec)
	b = be.AppendUint32(b, n.Nlink)
	b = be.AppendUint64(b, n.Length)
	b = be.AppendUint32(b, n.Rdev)
	b = be.AppendUint64(b, uint64(n.Parent))
	return b
}

func decodeNode(ino store.Ino, b []byte) (*store.Node, error) {
	if len(b) != nodeSize || b[0] != 1 {
		return nil, fmt.Errorf("inode %d: corrupt attribute record (%d bytes)", ino, len(b))
	}
	n := &store.Node{Ino: ino, Type: b[1], Flags: b[2]}
	b = b[3:]
	n.Mode = be.Uint16(b)
	n.Uid = be.Uint32(b[2:])
	n.Gid = be.Uint32(b[6:])
	n.Atime = int64(be.Uint64(b[10:]))
	n.Atimensec = be.Uint32(b[18:])
	n.Mtime = int64(be.Uint64(b[22:]))
	n.Mtimensec = be.Uint32(b[30:])
	n.Ctime = int64(be.Uint64(b[34:]))
	n.Ctimensec = be.Uint32(b[42:])
	n.Nlink = be.Uint32(b[46:])
	n.Length = be.Uint64(b[50:])
	n.Rdev = be.Uint32(b[58:])
	n.Parent = store.Ino(be.Uint64(b[62:]))
	return n, nil
}

func (x *tx) Node(ino store.Ino) (*store.Node, error) {
	v, err := x.get(inoKey(ino, 'I', nil), "node")
	if err != nil {
		return nil, err
	}
	return decodeNode(ino, v)
}

func (x *tx) Nodes(inos []store.Ino) ([]*store.Node, error) {
	keys := make([][]byte, len(inos))
	for i, ino := range inos {
		keys[i] = inoKey(ino, 'I', nil)
	}
	vals, err := x.t.GetMany(keys)
	if err != nil {
		return nil, fmt.Errorf("get nodes: %w", err)
	}
	out := make([]*store.Node, len(inos))
	for i, v := range vals {
		if v == nil {
			continue
		}
		if out[i], err = decodeNode(inos[i], v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (x *tx) SetNode(n *store.Node)    { x.t.Set(inoKey(n.Ino, 'I', nil), encodeNode(n)) }
func (x *tx) DeleteNode(ino store.Ino) { x.t.Delete(inoKey(ino, 'I', nil)) }

// Edges

func decodeEdge(name, v []byte) (store.Edge, error) {
	if len(v) != 9 {
		return store.Edge{}, fmt.Errorf("entry %q: corrupt record", name)
	}
	return store.Edge{Name: name, Type: v[0], Ino: store.Ino(be.Uint64(v[1:]))}, nil
}

func (x *tx) NodeEdge(parent store.Ino, name []byte) (*store.Node, store.Edge, error) {
	vals, err := x.t.GetMany([][]byte{inoKey(parent, 'I', nil), inoKey(parent, 'D', name)})
	if err != nil {
		return nil, store.Edge{}, fmt.Errorf("get node and entry: %w", err)
	}
	if vals[0] == nil {
		return nil, store.Edge{}, store.ErrNotFound
	}
	n, err := decodeNode(parent, vals[0])
	if err != nil || vals[1] == nil {
		return n, store.Edge{}, err
	}
	e, err := decodeEdge(bytes.Clone(name), vals[1])
	return n, e, err
}

func (x *tx) Lookup(parent store.Ino, name []byte) (*store.Node, store.Edge, *store.Node, error) {
	keys := [][]byte{inoKey(parent, 'I', nil), inoKey(parent, 'D', name)}
	var vals, next [][]byte
	var err error
	if f, ok := x.t.(Follower); ok {
		vals, next, err = f.GetFollow(keys, []bool{false, true}, EntryFollow)
	} else {
		vals, err = x.t.GetMany(keys)
	}
	if err != nil {
		return nil, store.Edge{}, nil, fmt.Errorf("get node, entry and its node: %w", err)
	}
	if vals[0] == nil {
		return nil, store.Edge{}, nil, store.ErrNotFound
	}
	dir, err := decodeNode(parent, vals[0])
	if err != nil || vals[1] == nil {
		return dir, store.Edge{}, nil, err
	}
	e, err := decodeEdge(bytes.Clone(name), vals[1])
	if err != nil {
		return nil, store.Edge{}, nil, err
	}
	var nv []byte
	if next != nil {
		nv = next[1]
	} else if nv, err = x.t.Get(inoKey(e.Ino, 'I', nil)); err != nil {
		return nil, store.Edge{}, nil, fmt.Errorf("get node: %w", err)
	}
	if nv == nil {
		return dir, e, nil, nil
	}
	n, err := decodeNode(e.Ino, nv)
	return dir, e, n, err
}

func (x *tx) Edge(parent store.Ino, name []byte) (store.Edge, error) {
	v, err := x.get(inoKey(parent, 'D', name), "entry")
	if err != nil {
		return store.Edge{}, err
	}
	return decodeEdge(bytes.Clone(name), v)
}

func (x *tx) SetEdge(parent store.Ino, e store.Edge) {
	v := be.AppendUint64([]byte{e.Type}, uint64(e.Ino))
	x.t.Set(inoKey(parent, 'D', e.Name), v)
}

func (x *tx) DeleteEdge(parent store.Ino, name []byte) { x.t.Delete(inoKey(parent, 'D', name)) }

func (x *tx) Edges(parent store.Ino, after []byte, limit int) ([]store.Edge, error) {
	prefix := inoKey(parent, 'D', nil)
	begin := prefix
	if after != nil {
		begin = append(inoKey(parent, 'D', after), 0)
	}
	pairs, err := x.t.Scan(begin, prefixEnd(prefix), limit)
	if err != nil {
		return nil, fmt.Errorf("scan entries of %d: %w", parent, err)
	}
	out := make([]store.Edge, len(pairs))
	for i, p := range pairs {
		if out[i], err = decodeEdge(bytes.Clone(p.Key[len(prefix):]), p.Value); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Symlinks and xattrs

func (x *tx) Symlink(ino store.Ino) ([]byte, error) { return x.get(inoKey(ino, 'S', nil), "symlink") }
func (x *tx) SetSymlink(ino store.Ino, target []byte) {
	x.t.Set(inoKey(ino, 'S', nil), target)
}
func (x *tx) DeleteSymlink(ino store.Ino) { x.t.Delete(inoKey(ino, 'S', nil)) }

func (x *tx) Xattr(ino store.Ino, name string) ([]byte, error) {
	return x.get(inoKey(ino, 'X', []byte(name)), "xattr")
}
func (x *tx) SetXattr(ino store.Ino, name string, value []byte) {
	x.t.Set(inoKey(ino, 'X', []byte(name)), value)
}
func (x *tx) DeleteXattr(ino store.Ino, name string) { x.t.Delete(inoKey(ino, 'X', []byte(name))) }

func (x *tx) XattrNames(ino store.Ino) ([]string, error) {
	prefix := inoKey(ino, 'X', nil)
	pairs, err := x.t.Scan(prefix, prefixEnd(prefix), 0)
	if err != nil {
		return nil, fmt.Errorf("scan xattrs of %d: %w", ino, err)
	}
	names := make([]string, len(pairs))
	for i, p := range pairs {
		names[i] = string(p.Key[len(prefix):])
	}
	return names, nil
}

// Chunks

func chunkKey(ino store.Ino, idx uint32) []byte {
	return inoKey(ino, 'C', be.AppendUint32(nil, idx))
}

func (x *tx) Chunk(ino store.Ino, idx uint32) ([]store.Slice, error) {
	v, err := x.t.Get(chunkKey(ino, idx))
	if err != nil {
		return nil, fmt.Errorf("get chunk %d of %d: %w", idx, ino, err)
	}
	ss, err := store.DecodeSlices(v)
	if err != nil {
		return nil, fmt.Errorf("chunk %d of inode %d: %w", idx, ino, err)
	}
	return ss, nil
}

func (x *tx) AppendSlice(ino store.Ino, idx uint32, s store.Slice) {
	k := chunkKey(ino, idx)
	if a, ok := x.t.(Appender); ok {
		a.Append(k, store.EncodeSlice(nil, s))
		return
	}
	v, err := x.t.Get(k)
	if err != nil {
		if x.err == nil {
			x.err = fmt.Errorf("append slice to chunk %d of %d: %w", idx, ino, err)
		}
		return
	}
	x.t.Set(k, store.EncodeSlice(bytes.Clone(v), s))
}

func (x *tx) SetChunk(ino store.Ino, idx uint32, slices []store.Slice) {
	if len(slices) == 0 {
		x.t.Delete(chunkKey(ino, idx))
		return
	}
	x.t.Set(chunkKey(ino, idx), store.EncodeSlices(slices))
}

func (x *tx) ChunkIndexes(ino store.Ino, from uint32, limit int) ([]uint32, error) {
	prefix := inoKey(ino, 'C', nil)
	pairs, err := x.t.Scan(chunkKey(ino, from), prefixEnd(prefix), limit)
	if err != nil {
		return nil, fmt.Errorf("scan chunks of %d: %w", ino, err)
	}
	out := make([]uint32, len(pairs))
	for i, p := range pairs {
		out[i] = be.Uint32(p.Key[len(prefix):])
	}
	return out, nil
}

// Slice references

func sliceKey(kind byte, id uint64, size uint32) []byte {
	return be.AppendUint32(be.AppendUint64([]byte{kind}, id), size)
}

func (x *tx) SliceRef(id uint64, size uint32) (int64, error) {
	v, err := x.t.Get(sliceKey('K', id, size))
	if err != nil || v == nil {
		return 0, err
	}
	return int64(be.Uint64(v)), nil
}

func (x *tx) SetSliceRef(id uint64, size uint32, extra int64) {
	if extra == 0 {
		x.t.Delete(sliceKey('K', id, size))
		return
	}
	x.t.Set(sliceKey('K', id, size), be.AppendUint64(nil, uint64(extra)))
}

func (x *tx) AddSliceRef(id uint64, size uint32, delta int64) {
	if a, ok := x.t.(Adder); ok {
		a.Add(sliceKey('K', id, size), delta)
		return
	}
	extra, err := x.SliceRef(id, size)
	if err != nil {
		if x.err == nil {
			x.err = fmt.Errorf("add to the references of slice %d: %w", id, err)
		}
		return
	}
	x.SetSliceRef(id, size, extra+delta)
}

// Counters and settings

func (x *tx) Counter(name string) (int64, error) {
	v, err := x.t.Get(append([]byte{'C'}, name...))
	if err != nil {
		return 0, fmt.Errorf("get counter %s: %w", name, err)
	}
	if len(v) != 8 {
		return 0, nil
	}
	return int64(be.Uint64(v)), nil
}

func (x *tx) SetCounter(name string, v int64) {
	if v == 0 {
		x.t.Delete(append([]byte{'C'}, name...))
		return
	}
	x.t.Set(append([]byte{'C'}, name...), be.AppendUint64(nil, uint64(v)))
}

func (x *tx) Setting() ([]byte, error) { return x.get([]byte{'S'}, "setting") }

func (x *tx) SetSetting(v []byte) {
	if len(v) == 0 {
		x.t.Delete([]byte{'S'})
		return
	}
	x.t.Set([]byte{'S'}, v)
}

// Sessions

func (x *tx) Sessions() ([]store.Session, error) {
	pairs, err := x.t.Scan([]byte{'N'}, []byte{'N' + 1}, 0)
	if err != nil {
		return nil, fmt.Errorf("scan sessions: %w", err)
	}
	out := make([]store.Session, 0, len(pairs))
	for _, p := range pairs {
		var s store.Session
		if err := json.Unmarshal(p.Value, &s); err != nil {
			return nil, fmt.Errorf("session record: %w", err)
		}
		out = append(out, s)
	}
	return out, nil
}

func (x *tx) SetSession(s store.Session) {
	v, _ := json.Marshal(s) // a struct of plain fields always marshals
	x.t.Set(be.AppendUint64([]byte{'N'}, s.Sid), v)
}

func (x *tx) DeleteSession(sid uint64) { x.t.Delete(be.AppendUint64([]byte{'N'}, sid)) }

func (x *tx) Sustained(sid uint64) ([]store.Ino, error) {
	prefix := be.AppendUint64([]byte{'O'}, sid)
	pairs, err := x.t.Scan(prefix, prefixEnd(prefix), 0)
	if err != nil {
		return nil, fmt.Errorf("scan sustained inodes: %w", err)
	}
	out := make([]store.Ino, len(pairs))
	for i, p := range pairs {
		out[i] = store.Ino(be.Uint64(p.Key[len(prefix):]))
	}
	return out, nil
}

func (x *tx) SetSustained(sid uint64, ino store.Ino, on bool) {
	k := be.AppendUint64(be.AppendUint64([]byte{'O'}, sid), uint64(ino))
	if on {
		x.t.Set(k, []byte{1})
	} else {
		x.t.Delete(k)
	}
}

func (x *tx) Unsynced(sid uint64) ([]store.UnsyncedSlice, error) {
	prefix := be.AppendUint64([]byte{'U'}, sid)
	pairs, err := x.t.Scan(prefix, prefixEnd(prefix), 0)
	if err != nil {
		return nil, fmt.Errorf("scan unsynced slices of session %d: %w", sid, err)
	}
	out := make([]store.UnsyncedSlice, len(pairs))
	for i, p := range pairs {
		k := p.Key[len(prefix):]
		if len(k) != 12 || len(p.Value) != 12 {
			return nil, fmt.Errorf("session %d: corrupt unsynced slice record", sid)
		}
		out[i] = store.UnsyncedSlice{
			Id: be.Uint64(k), Size: be.Uint32(k[8:]),
			Ino: store.Ino(be.Uint64(p.Value)), Idx: be.Uint32(p.Value[8:]),
		}
	}
	return out, nil
}

func (x *tx) SetUnsynced(sid uint64, s store.UnsyncedSlice, on bool) {
	k := be.AppendUint32(be.AppendUint64(be.AppendUint64([]byte{'U'}, sid), s.Id), s.Size)
	if on {
		x.t.Set(k, be.AppendUint32(be.AppendUint64(nil, uint64(s.Ino)), s.Idx))
	} else {
		x.t.Delete(k)
	}
}

// Locks

func (x *tx) Locks(ino store.Ino, kind byte) ([]store.LockRecord, error) {
	prefix := inoKey(ino, kind, nil)
	pairs, err := x.t.Scan(prefix, prefixEnd(prefix), 0)
	if err != nil {
		return nil, fmt.Errorf("scan locks of %d: %w", ino, err)
	}
	out := make([]store.LockRecord, 0, len(pairs))
	for _, p := range pairs {
		k := p.Key[len(prefix):]
		if len(k) != 16 {
			return nil, fmt.Errorf("inode %d: corrupt lock record", ino)
		}
		out = append(out, store.LockRecord{Sid: be.Uint64(k), Owner: be.Uint64(k[8:]), Data: p.Value})
	}
	return out, nil
}

func (x *tx) SetLock(ino store.Ino, kind byte, r store.LockRecord) {
	k := inoKey(ino, kind, be.AppendUint64(be.AppendUint64(nil, r.Sid), r.Owner))
	if len(r.Data) == 0 {
		x.t.Delete(k)
	} else {
		x.t.Set(k, r.Data)
	}
}

func (x *tx) LockedInodes(sid uint64) ([]store.Ino, error) {
	prefix := be.AppendUint64([]byte{'Q'}, sid)
	pairs, err := x.t.Scan(prefix, prefixEnd(prefix), 0)
	if err != nil {
		return nil, fmt.Errorf("scan locked inodes: %w", err)
	}
	out := make([]store.Ino, len(pairs))
	for i, p := range pairs {
		out[i] = store.Ino(be.Uint64(p.Key[len(prefix):]))
	}
	return out, nil
}

func (x *tx) SetLockedInode(sid uint64, ino store.Ino, on bool) {
	k := be.AppendUint64(be.AppendUint64([]byte{'Q'}, sid), uint64(ino))
	if on {
		x.t.Set(k, []byte{1})
	} else {
		x.t.Delete(k)
	}
}

// Deletion queues

func (x *tx) DelFiles(limit int) ([]store.DelFile, error) {
	pairs, err := x.t.Scan([]byte{'D'}, []byte{'D' + 1}, limit)
	if err != nil {
		return nil, fmt.Errorf("scan deleted files: %w", err)
	}
	out := make([]store.DelFile, len(pairs))
	for i, p := range pairs {
		if len(p.Key) != 17 || len(p.Value) != 8 {
			return nil, fmt.Errorf("corrupt deleted-file record")
		}
		out[i] = store.DelFile{Ino: store.Ino(be.Uint64(p.Key[1:])), Length: be.Uint64(p.Key[9:]),
			Expire: int64(be.Uint64(p.Value))}
	}
	return out, nil
}

func (x *tx) SetDelFile(f store.DelFile, on bool) {
	k := be.AppendUint64(be.AppendUint64([]byte{'D'}, uint64(f.Ino)), f.Length)
	if on {
		x.t.Set(k, be.AppendUint64(nil, uint64(f.Expire)))
	} else {
		x.t.Delete(k)
	}
}

func (x *tx) DelSlices(limit int) ([]store.Slice, error) {
	pairs, err := x.t.Scan([]byte{'L'}, []byte{'L' + 1}, limit)
	if err != nil {
		return nil, fmt.Errorf("scan deleted slices: %w", err)
	}
	out := make([]store.Slice, len(pairs))
	for i, p := range pairs {
		if len(p.Key) != 13 {
			return nil, fmt.Errorf("corrupt deleted-slice record")
		}
		out[i] = store.Slice{Id: be.Uint64(p.Key[1:]), Size: be.Uint32(p.Key[9:])}
	}
	return out, nil
}

func (x *tx) SetDelSlice(id uint64, size uint32, on bool) {
	if on {
		x.t.Set(sliceKey('L', id, size), []byte{1})
	} else {
		x.t.Delete(sliceKey('L', id, size))
	}
}
