package control

import (
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
)

// The operations of the tools `sluice info`, `summary`, `warmup` and
// `rmr`: the request's arguments and the result of each, shared by the
// mount that serves them and the commands that ask. Every one runs with
// the credentials of the process that asked and checks them as system
// calls would: a caller other than root must be able to search every
// directory above the inode it names, to list (read and search) each
// directory it walks, to read each file whose data it looks at, and to
// write each directory it removes entries from.
const (
	OpInfo    = "info"
	OpSummary = "summary"
	OpWarmup  = "warmup"
	OpRmr     = "rmr"
)

// MaxFailures bounds the failures a result lists; Failed counts them all.
const MaxFailures = 100

// Failure is one entry an operation could not handle: its path relative
// to the inode the request named ("" for that inode itself), what went
// wrong, and the errno when it is a POSIX error.
type Failure struct {
	Path  string        `json:"path"`
	Err   string        `json:"error"`
	Errno syscall.Errno `json:"errno,omitempty"`
}

// Failures collects the failures of concurrent workers: it counts them
// all and keeps the first MaxFailures. The zero value is ready.
type Failures struct {
	mu   sync.Mutex
	n    int64
	list []Failure
}

// Add records that path failed with err.
func (f *Failures) Add(path string, err error) {
	fl := Failure{Path: path, Err: err.Error()}
	errors.As(err, &fl.Errno)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if len(f.list) < MaxFailures {
		f.list = append(f.list, fl)
	}
}

// Count returns the number of failures recorded.
func (f *Failures) Count() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// List returns the number of failures and the first MaxFailures.
func (f *Failures) List() (int64, []Failure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n, append([]Failure(nil), f.list...)
}

// Progress is what a long operation reports as it goes, as totals so far:
// entries walked (files and directories) and their bytes (the sum of file
// lengths), bytes of blocks handled by warmup, or entries removed by rmr.
type Progress struct {
	Files   int64 `json:"files,omitempty"`
	Dirs    int64 `json:"dirs,omitempty"`
	Bytes   int64 `json:"bytes,omitempty"`
	Removed int64 `json:"removed,omitempty"`
}

// Totals is what a directory tree holds: its files (every entry that is
// not a directory), its directories (itself included) and the sum of the
// lengths of its regular files.
type Totals struct {
	Files  int64 `json:"files"`
	Dirs   int64 `json:"dirs"`
	Length int64 `json:"length"`
}

// Add adds o to t.
func (t *Totals) Add(o Totals) {
	t.Files += o.Files
	t.Dirs += o.Dirs
	t.Length += o.Length
}

// InfoArgs are the arguments of OpInfo, whose Request.Ino is the inode to
// describe.
type InfoArgs struct {
	// Raw lists each chunk's slices and the object keys of their blocks.
	Raw bool `json:"raw,omitempty"`
	// Recursive walks a directory's tree for its totals.
	Recursive bool `json:"recursive,omitempty"`
	// Strict fails the walk at a subdirectory the caller may not list;
	// otherwise such directories are skipped and reported.
	Strict bool `json:"strict,omitempty"`
}

// InfoResult describes one inode.
type InfoResult struct {
	Ino    meta.Ino  `json:"inode"`
	Type   string    `json:"type"` // TypeName
	Mode   uint16    `json:"mode"` // permission bits with setuid, setgid and sticky
	Uid    uint32    `json:"uid"`
	Gid    uint32    `json:"gid"`
	Nlink  uint32    `json:"nlink"`
	Length uint64    `json:"length"`
	Rdev   uint32    `json:"rdev,omitempty"`
	Atime  time.Time `json:"atime"`
	Mtime  time.Time `json:"mtime"`
	Ctime  time.Time `json:"ctime"`
	// Target is a symlink's target.
	Target string `json:"target,omitempty"`
	// Chunks are a regular file's chunks that hold slices.
	Chunks []ChunkInfo `json:"chunks,omitempty"`
	// Entries is the number of entries of a directory.
	Entries *int64 `json:"entries,omitempty"`
	// Tree holds a directory's totals, with InfoArgs.Recursive.
	Tree *Totals `json:"tree,omitempty"`
	// Failed counts the subdirectories the walk skipped (the caller may
	// not list them); Failures lists the first MaxFailures.
	Failed   int64     `json:"failed,omitempty"`
	Failures []Failure `json:"failures,omitempty"`
}

// ChunkInfo is one chunk of a file: its index (the chunk covers bytes
// [Index*64 MiB, (Index+1)*64 MiB) of the file), the number of slices in
// its list and, with InfoArgs.Raw, the slices.
type ChunkInfo struct {
	Index  uint32      `json:"index"`
	Count  int         `json:"count"`
	Slices []SliceInfo `json:"slices,omitempty"`
}

// SliceInfo is one element of a chunk's slice list: Len bytes at Pos in
// the chunk, read from offset Off of slice ID, which is Size bytes long
// (ID 0 is a hole), and the blocks that hold those bytes.
type SliceInfo struct {
	ID     uint64      `json:"id"`
	Size   uint32      `json:"size"`
	Off    uint32      `json:"off"`
	Len    uint32      `json:"len"`
	Pos    uint32      `json:"pos"`
	Blocks []BlockInfo `json:"blocks,omitempty"`
}

// BlockInfo is one block: its object key in the bucket (with the
// volume's name in front, as the bucket lists it) and its length.
type BlockInfo struct {
	Key string `json:"key"`
	Len int    `json:"len"`
}

// TypeName returns the name info shows for a node type of package store.
func TypeName(t uint8) string {
	switch t {
	case store.TypeFile:
		return "file"
	case store.TypeDir:
		return "directory"
	case store.TypeSymlink:
		return "symlink"
	case store.TypeFIFO:
		return "fifo"
	case store.TypeBlockDev:
		return "block device"
	case store.TypeCharDev:
		return "character device"
	case store.TypeSocket:
		return "socket"
	}
	return "unknown"
}

// SummaryArgs are the arguments of OpSummary, whose Request.Ino is the
// top of the tree.
type SummaryArgs struct {
	// Depth is how many levels below the top are shown (0: the top only).
	Depth int `json:"depth"`
	// Entries bounds the children shown per directory: the biggest, by
	// length; the rest are summed in one node named "...".
	Entries int `json:"entries"`
	// Strict fails at a subdirectory the caller may not list instead of
	// skipping it.
	Strict bool `json:"strict,omitempty"`
}

// SummaryNode is one entry of a summary with the totals of its tree (a
// file has Files 1). Path is relative to the top ("" for the top itself),
// with "/" between names; a node that sums the children left out is
// named "..." and Others says how many it sums.
type SummaryNode struct {
	Path     string         `json:"path"`
	Dir      bool           `json:"dir,omitempty"`
	Others   int64          `json:"others,omitempty"`
	Children []*SummaryNode `json:"children,omitempty"`
	Totals
}

// SummaryResult is the result of OpSummary.
type SummaryResult struct {
	Tree     *SummaryNode `json:"tree"`
	Failed   int64        `json:"failed,omitempty"`
	Failures []Failure    `json:"failures,omitempty"`
}

// Warmup modes.
const (
	WarmupFetch = "fetch" // fetch the blocks into the cache
	WarmupCheck = "check" // report how much of them is cached
	WarmupEvict = "evict" // drop them from the cache
)

// WarmupArgs are the arguments of OpWarmup. It works on Inos, files and
// directory trees (Request.Ino is not used); Paths, when given, are
// their names for failures and results, one per inode.
type WarmupArgs struct {
	Inos  []meta.Ino `json:"inos"`
	Paths []string   `json:"paths,omitempty"`
	// Mode is WarmupFetch (the default), WarmupCheck or WarmupEvict.
	Mode string `json:"mode,omitempty"`
	// Threads is how many blocks the mount handles at once (default 4).
	Threads int `json:"threads,omitempty"`
	// Background returns at once and lets the mount do the work, which
	// it logs when it ends.
	Background bool `json:"background,omitempty"`
	// CacheGroup asks for the blocks to be warmed on their owners in the
	// mount's cache group (what a member does anyway), and fails on a
	// mount in no group.
	CacheGroup bool `json:"cache_group,omitempty"`
}

// WarmupTotals is what warmup found in a path: regular files, their
// blocks and the bytes of those blocks, and the bytes of blocks that were
// cached (WarmupCheck: in the cache; WarmupFetch: in the cache at the
// end, as far as the mount knows; WarmupEvict: dropped from the cache).
type WarmupTotals struct {
	Files  int64 `json:"files"`
	Blocks int64 `json:"blocks"`
	Bytes  int64 `json:"bytes"`
	Cached int64 `json:"cached"`
}

// Add adds o to t.
func (t *WarmupTotals) Add(o WarmupTotals) {
	t.Files += o.Files
	t.Blocks += o.Blocks
	t.Bytes += o.Bytes
	t.Cached += o.Cached
}

// WarmupPath is the totals of one of WarmupArgs.Inos.
type WarmupPath struct {
	Ino  meta.Ino `json:"inode"`
	Path string   `json:"path,omitempty"`
	WarmupTotals
}

// WarmupResult is the result of OpWarmup.
type WarmupResult struct {
	Mode  string       `json:"mode"`
	Paths []WarmupPath `json:"paths"`
	Total WarmupTotals `json:"total"`
	// Fetched is the bytes read from object storage (WarmupFetch).
	Fetched int64 `json:"fetched,omitempty"`
	// Tiers are the cache tiers of the mount, fastest first: "memory",
	// and "disk" with a disk cache. Warmup fills the slowest.
	Tiers []string `json:"tiers"`
	// Background is set when the work goes on in the mount.
	Background bool      `json:"background,omitempty"`
	Failed     int64     `json:"failed,omitempty"`
	Failures   []Failure `json:"failures,omitempty"`
}

// RmrArgs are the arguments of OpRmr, whose Request.Ino is the directory
// holding the entry to remove.
type RmrArgs struct {
	Name string `json:"name"`
}

// RmrResult is the result of OpRmr: the entries removed (files and
// directories, the top included) and those that could not be.
type RmrResult struct {
	Removed  int64     `json:"removed"`
	Failed   int64     `json:"failed,omitempty"`
	Failures []Failure `json:"failures,omitempty"`
}
