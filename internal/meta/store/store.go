package store

import (
	"context"
	"errors"
	"time"
)

var (
	// ErrNotFound reports a missing record.
	ErrNotFound = errors.New("record not found")
	// ErrConflict reports that a transaction conflicted with another one and
	// may succeed when retried.
	ErrConflict = errors.New("transaction conflict")
)

// MaxLag is the longest a View may miss a commit made through another
// handle of the same database (see Store.View).
const MaxLag = time.Second

// Ino is an inode number. The root directory is 1.
type Ino uint64

// RootIno is the inode of the volume's root directory.
const RootIno Ino = 1

// Node types, as stored.
const (
	TypeFile     uint8 = 1
	TypeDir      uint8 = 2
	TypeSymlink  uint8 = 3
	TypeFIFO     uint8 = 4
	TypeBlockDev uint8 = 5
	TypeCharDev  uint8 = 6
	TypeSocket   uint8 = 7
)

// Node holds the attributes of one inode.
type Node struct {
	Ino       Ino
	Type      uint8
	Flags     uint8
	Mode      uint16 // permission bits with setuid, setgid and sticky
	Uid       uint32
	Gid       uint32
	Atime     int64 // seconds since the epoch
	Mtime     int64
	Ctime     int64
	Atimensec uint32
	Mtimensec uint32
	Ctimensec uint32
	Nlink     uint32
	Length    uint64
	Rdev      uint32
	Parent    Ino // 0 when a non-directory has several parents
}

// Edge is one directory entry: the inode and type a name points to.
type Edge struct {
	Name []byte
	Ino  Ino
	Type uint8
}

// Slice is one element of a chunk's slice list: Len bytes at Pos inside the
// chunk, read from offset Off of the stored slice object Id, which is Size
// bytes long. Id 0 is a hole that reads as zeros.
type Slice struct {
	Pos  uint32
	Id   uint64
	Size uint32
	Off  uint32
	Len  uint32
}

// Session describes one mount registered with the volume.
type Session struct {
	Sid       uint64
	Heartbeat int64 // unix seconds of the last heartbeat
	Info      []byte
}

// DelFile is a file whose data still has to be deleted.
type DelFile struct {
	Ino    Ino
	Length uint64
	Expire int64 // unix seconds
}

// UnsyncedSlice is a slice a session committed before the object store
// made its blocks durable (object.Syncer): if the session's host crashes
// before they are, its blocks may be missing or short, and whoever cleans
// up after the session restores them. Ino and Idx name the chunk the
// slice was committed to.
type UnsyncedSlice struct {
	Id   uint64
	Size uint32
	Ino  Ino
	Idx  uint32
}

// Lock kinds.
const (
	LockFlock byte = 'F' // BSD flock: Data is one byte, the lock type
	LockPosix byte = 'P' // POSIX record locks: Data encodes the owner's ranges
)

// LockRecord is the lock state one owner of one session holds on an inode.
// The core gives Data its meaning; an empty Data means no lock.
type LockRecord struct {
	Sid   uint64
	Owner uint64
	Data  []byte
}

// Tx is a metadata transaction. Reads see the transaction's own writes.
// Methods that write return no error: engines buffer writes and report
// failures from commit.
type Tx interface {
	// Node returns the attributes of ino, or ErrNotFound.
	Node(ino Ino) (*Node, error)
	// Nodes returns the attributes of several inodes in one round trip; a
	// missing inode yields a nil element.
	Nodes(inos []Ino) ([]*Node, error)
	SetNode(n *Node)
	DeleteNode(ino Ino)

	// NodeEdge reads directory parent's attributes and its entry name in
	// one round trip: ErrNotFound when parent is missing, and an Edge with
	// Ino 0 when the name is.
	NodeEdge(parent Ino, name []byte) (*Node, Edge, error)
	// Lookup reads directory parent's attributes, its entry name and the
	// node that entry names, in one round trip where the engine can (a
	// join, a server-side script): ErrNotFound when parent is missing, an
	// Edge with Ino 0 and a nil node when the name is, and a nil node when
	// the entry's node is.
	Lookup(parent Ino, name []byte) (*Node, Edge, *Node, error)
	// Edge returns the entry name in directory parent, or ErrNotFound.
	Edge(parent Ino, name []byte) (Edge, error)
	SetEdge(parent Ino, e Edge)
	DeleteEdge(parent Ino, name []byte)
	// Edges returns up to limit entries of parent whose names sort after
	// after (all from the start when after is nil), in name byte order.
	Edges(parent Ino, after []byte, limit int) ([]Edge, error)

	// Symlink returns the target of a symlink, or ErrNotFound.
	Symlink(ino Ino) ([]byte, error)
	SetSymlink(ino Ino, target []byte)
	DeleteSymlink(ino Ino)

	// Xattr returns one extended attribute value, or ErrNotFound.
	Xattr(ino Ino, name string) ([]byte, error)
	SetXattr(ino Ino, name string, value []byte)
	DeleteXattr(ino Ino, name string)
	// XattrNames lists the extended attribute names of ino.
	XattrNames(ino Ino) ([]string, error)

	// Chunk returns the slice list of chunk index idx of ino (nil when the
	// chunk has none).
	Chunk(ino Ino, idx uint32) ([]Slice, error)
	// AppendSlice adds s at the end of the chunk's slice list.
	AppendSlice(ino Ino, idx uint32, s Slice)
	// SetChunk replaces the whole slice list; an empty list deletes it.
	SetChunk(ino Ino, idx uint32, slices []Slice)
	// ChunkIndexes returns up to limit chunk indexes of ino at or above
	// from that have a slice list, in ascending order.
	ChunkIndexes(ino Ino, from uint32, limit int) ([]uint32, error)

	// SliceRef returns the number of extra references to a slice beyond
	// the first (0 when the slice is not shared).
	SliceRef(id uint64, size uint32) (int64, error)
	// SetSliceRef stores the extra reference count; 0 deletes the record.
	SetSliceRef(id uint64, size uint32, extra int64)
	// AddSliceRef adds delta to the extra reference count, as SliceRef
	// then SetSliceRef would, but where the engine can, without the
	// transaction depending on the count: a copy that shares a slice need
	// not read its count first (on Redis, a round trip). A failure is
	// reported when the transaction ends.
	AddSliceRef(id uint64, size uint32, delta int64)

	// Counter returns a named counter (0 when unset).
	Counter(name string) (int64, error)
	// SetCounter stores a named counter; 0 deletes its record, which
	// Counter cannot tell from a stored 0.
	SetCounter(name string, v int64)

	// Setting returns the volume settings blob, or ErrNotFound.
	Setting() ([]byte, error)
	// SetSetting stores the volume settings blob; an empty one deletes it,
	// so that a destroyed volume leaves no record (meta.Destroy).
	SetSetting(v []byte)

	// Sessions lists registered sessions.
	Sessions() ([]Session, error)
	SetSession(s Session)
	DeleteSession(sid uint64)
	// Sustained lists inodes kept alive by session sid (unlinked while open).
	Sustained(sid uint64) ([]Ino, error)
	SetSustained(sid uint64, ino Ino, on bool)
	// Unsynced lists the slices session sid committed whose blocks may
	// not be durable yet.
	Unsynced(sid uint64) ([]UnsyncedSlice, error)
	// SetUnsynced records (on) or forgets s for session sid; forgetting
	// needs only s.Id and s.Size.
	SetUnsynced(sid uint64, s UnsyncedSlice, on bool)

	// Locks returns the lock records of kind (LockFlock or LockPosix) on ino.
	Locks(ino Ino, kind byte) ([]LockRecord, error)
	// SetLock stores r; an empty r.Data deletes it.
	SetLock(ino Ino, kind byte, r LockRecord)
	// LockedInodes lists the inodes on which session sid may hold locks.
	LockedInodes(sid uint64) ([]Ino, error)
	SetLockedInode(sid uint64, ino Ino, on bool)

	// DelFiles returns up to limit (<= 0: all) files waiting for data
	// deletion.
	DelFiles(limit int) ([]DelFile, error)
	SetDelFile(f DelFile, on bool)
	// DelSlices returns up to limit slices waiting for block deletion.
	DelSlices(limit int) ([]Slice, error)
	SetDelSlice(id uint64, size uint32, on bool)

	// Truncations returns up to limit files whose truncation left chunks
	// past the new end still to be dropped (see Truncation).
	Truncations(limit int) ([]Truncation, error)
	SetTruncation(t Truncation, on bool)

	// Scans page through whole record families for fsck, gc and
	// compaction (see scan.go). Each call reads a bounded page of about
	// limit records and returns the cursor of the next page, nil after the
	// last one; start with a nil cursor. A page may hold fewer records
	// (even none) before the end. Cursors stay valid across transactions,
	// so a long scan runs as one short View per page; records changed
	// meanwhile may or may not be seen. Records come in key order on
	// ordered key-value engines, table by table in key order on SQL ones,
	// in no order (and rarely twice) on redis.
	ScanInodes(cursor []byte, limit int) ([]InodeRecord, []byte, error)
	ScanSliceRefs(cursor []byte, limit int) ([]SliceRefRecord, []byte, error)
	ScanDelFiles(cursor []byte, limit int) ([]DelFile, []byte, error)
	ScanDelSlices(cursor []byte, limit int) ([]Slice, []byte, error)
}

// Store is a metadata engine behind the typed transaction.
type Store interface {
	// Update runs fn in a read-write transaction and commits it, retrying
	// fn from the start on ErrConflict a bounded number of times.
	Update(ctx context.Context, fn func(tx Tx) error) error
	// View runs fn in a read-only transaction. Each read returns what was
	// committed when it was made; an engine need not read every record
	// of one View at the same instant (the SQL servers' first statement
	// runs before the transaction of the rest begins, and Redis reads
	// each round trip afresh), so fn tolerates a record that changed or
	// vanished between two of its reads. A write in View fails it.
	//
	// A View sees every commit made through the same handle before it
	// began, and a handle never reads a value older than one it has
	// already read. A commit made through another handle (another mount)
	// may stay unseen for up to MaxLag after it returned: the Redis
	// engine answers from a client-side cache that the server keeps
	// current by reports that travel beside the writer's reply. Update
	// checks every value it read at commit, so a committed Update read
	// the values current at its commit, whichever handle wrote them.
	// (The package doc lists each engine's guarantees.)
	View(ctx context.Context, fn func(tx Tx) error) error
	// Name describes the engine and its address with secrets removed.
	Name() string
	// Close releases the engine's resources.
	Close() error
}
