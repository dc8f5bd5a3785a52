package store

// InodeRecord is one per-inode record met by Tx.ScanInodes. Exactly one of
// Node, Edge, Chunk and Symlink is set, or Err when the stored record does
// not decode (fsck reports those instead of stopping). Kinds the scan does
// not report (extended attributes, locks) are skipped.
type InodeRecord struct {
	Ino     Ino
	Node    *Node        // the attributes of Ino
	Edge    *Edge        // one entry of directory Ino
	Chunk   *ChunkRecord // one slice list of file Ino
	Symlink []byte       // the target of symlink Ino
	Err     error
}

// ChunkRecord is the slice list of one chunk of a file.
type ChunkRecord struct {
	Idx    uint32
	Slices []Slice
}

// SliceRefRecord is a stored count of extra references to a slice.
type SliceRefRecord struct {
	Id    uint64
	Size  uint32
	Extra int64
}
