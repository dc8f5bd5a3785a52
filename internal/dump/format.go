package dump

import (
	"strconv"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// Type names of the dump format, indexed by store node type.
var typeNames = [...]string{
	store.TypeFile:     "regular",
	store.TypeDir:      "directory",
	store.TypeSymlink:  "symlink",
	store.TypeFIFO:     "fifo",
	store.TypeBlockDev: "blockdev",
	store.TypeCharDev:  "chardev",
	store.TypeSocket:   "socket",
}

// typeOf returns the store type of a dump type name, 0 when unknown.
func typeOf(name string) uint8 {
	for t, n := range typeNames {
		if n != "" && n == name {
			return uint8(t)
		}
	}
	return 0
}

// Flags the dump carries: those JuiceFS defines and Sluice keeps. The ACL
// and xattr flags are Sluice's own (the dump carries ACLs as posix_acl_*
// objects and load sets them again), and JuiceFS's skip-trash bit, 32, is
// meta.FlagSkipTrash inside Sluice, where 32 marks an unfinished
// truncation.
const flagSkipTrash = 32

// dumpMetaVersion is the metadata version a dump's settings carry, that
// of the JuiceFS 1.x layout the format describes.
const dumpMetaVersion = 1

// flagsToDump returns the dump's flags of a node with flags f.
func flagsToDump(f uint8) uint8 {
	d := f & (meta.FlagImmutable | meta.FlagAppend)
	if f&meta.FlagSkipTrash != 0 {
		d |= flagSkipTrash
	}
	return d
}

// flagsFromDump returns the node flags of a dump's flags d.
func flagsFromDump(d uint8) uint8 {
	f := d & (meta.FlagImmutable | meta.FlagAppend)
	if d&flagSkipTrash != 0 {
		f |= meta.FlagSkipTrash
	}
	return f
}

// appendAttr appends n as an attr object on one line, fields in the order
// of the spec.
func appendAttr(b []byte, n *store.Node) []byte {
	b = append(b, `{"inode":`...)
	b = strconv.AppendUint(b, uint64(n.Ino), 10)
	if f := flagsToDump(n.Flags); f != 0 {
		b = append(b, `,"flags":`...)
		b = strconv.AppendUint(b, uint64(f), 10)
	}
	b = append(b, `,"type":"`...)
	if int(n.Type) < len(typeNames) && typeNames[n.Type] != "" {
		b = append(b, typeNames[n.Type]...)
	} else {
		b = append(b, "unknown"...)
	}
	b = append(b, `","mode":`...)
	b = strconv.AppendUint(b, uint64(n.Mode), 10)
	b = append(b, `,"uid":`...)
	b = strconv.AppendUint(b, uint64(n.Uid), 10)
	b = append(b, `,"gid":`...)
	b = strconv.AppendUint(b, uint64(n.Gid), 10)
	b = append(b, `,"atime":`...)
	b = strconv.AppendInt(b, n.Atime, 10)
	b = append(b, `,"mtime":`...)
	b = strconv.AppendInt(b, n.Mtime, 10)
	b = append(b, `,"ctime":`...)
	b = strconv.AppendInt(b, n.Ctime, 10)
	for _, x := range []struct {
		k string
		v uint32
	}{{`,"atimensec":`, n.Atimensec}, {`,"mtimensec":`, n.Mtimensec}, {`,"ctimensec":`, n.Ctimensec}} {
		if x.v != 0 {
			b = append(b, x.k...)
			b = strconv.AppendUint(b, uint64(x.v), 10)
		}
	}
	b = append(b, `,"nlink":`...)
	b = strconv.AppendUint(b, uint64(n.Nlink), 10)
	b = append(b, `,"length":`...)
	if n.Type == store.TypeFile {
		b = strconv.AppendUint(b, n.Length, 10)
	} else {
		b = append(b, '0')
	}
	if n.Rdev != 0 {
		b = append(b, `,"rdev":`...)
		b = strconv.AppendUint(b, uint64(n.Rdev), 10)
	}
	return append(b, '}')
}

// appendSlice appends one slice of a chunk's list.
func appendSlice(b []byte, s store.Slice) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, s.Id, 10)
	if s.Pos != 0 {
		b = append(b, `,"pos":`...)
		b = strconv.AppendUint(b, uint64(s.Pos), 10)
	}
	b = append(b, `,"size":`...)
	b = strconv.AppendUint(b, uint64(s.Size), 10)
	if s.Off != 0 {
		b = append(b, `,"off":`...)
		b = strconv.AppendUint(b, uint64(s.Off), 10)
	}
	b = append(b, `,"len":`...)
	b = strconv.AppendUint(b, uint64(s.Len), 10)
	return append(b, '}')
}

// Counters are the volume's counters as the dump names them.
type Counters struct {
	UsedSpace         int64 `json:"usedSpace"`
	UsedInodes        int64 `json:"usedInodes"`
	NextInode         int64 `json:"nextInodes"`
	NextChunk         int64 `json:"nextChunk"`
	NextSession       int64 `json:"nextSession"`
	NextTrash         int64 `json:"nextTrash"`
	NextCleanupSlices int64 `json:"nextCleanupSlices,omitempty"`
	LastChangelog     int64 `json:"lastChangelog,omitempty"`
}

// counterLoading marks a store a load is filling: set before the first
// record, cleared with the settings written last. A store with it and no
// settings holds an interrupted load.
const counterLoading = "loadInProgress"
