package metaserver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"
)

// A member's Raft log and stable store, in its directory raft/, are the
// server's own kind of log: segment files, seg-<first index>.log, of
// framed records as the single server's log (wal.go) frames them,
//
//	u32 length of body | u32 CRC-32C of body | body
//	body: u64 index | u64 term | byte type | i64 appended at (Unix ns, 0: none)
//	      | u32 length of extensions | extensions | data (the rest)
//
// one record per Raft log entry, whose data is a batch of the server's
// records. A StoreLogs call is one write and one fdatasync, as a single
// server's group commit is; a segment's space is allocated ahead of its
// records, so that the fdatasync does not also commit a new file size.
// (raft-boltdb, which this replaces, took two fsyncs and page writes per
// call: a three-member group's create took ~2 ms, a single server's
// 0.26 ms.)
//
// An index in memory maps each entry to its segment, offset and length,
// so that GetLog reads one record; the raft.LogCache in front of the
// store serves the entries just appended.
//
// Indexes have no gaps (the store is a raft.MonotonicLogStore, so Raft
// empties it, rather than leaving a gap, when it installs a snapshot):
// an append must follow the last entry, or may start anywhere when the
// store is empty. DeleteRange takes a prefix (after a snapshot: whole
// segments below the range's end are removed, the partial one is kept
// and the new first index remembered in memory; after a restart the
// kept entries below it are readable again, which is harmless, as Raft
// committed and snapshotted them) or a suffix (a follower's entries that
// conflict with the leader's: the segment is cut at the first one).
//
// Open replays the segments. A torn or corrupt end of the last one is
// cut (a crash mid-append); a bad record anywhere else, or a gap in the
// indexes, is refused with an error naming the file.
//
// The stable store (terms and votes, which change rarely) is the file
// stable: u32 CRC-32C of the rest | (u32 length | key | u32 length |
// value)..., rewritten whole on each Set (temporary file, fsync, rename,
// fsync of the directory).

// raftLog is a member's Raft log store and stable store.
//
// Writers (StoreLogs, DeleteRange, Close) are serialized by wmu; they
// change the fields in mu holding both wmu and mu, so a writer reads
// them under wmu alone and a reader (GetLog, FirstIndex, LastIndex)
// under mu.
type raftLog struct {
	dir    string
	log    *slog.Logger
	segMax int64 // a segment past this size is followed by a new one
	ahead  int64 // how much space a segment allocates at a time

	wmu    sync.Mutex
	failed error  // a write failed: every later one is refused with it
	buf    []byte // records being appended

	mu struct {
		sync.RWMutex
		segs   []*raftSegment // ascending; the last is appended to
		first  uint64         // index of locs[0]; 0 when the log is empty
		locs   []raftLoc
		closed bool
	}

	smu    sync.Mutex // guards stable
	stable map[string][]byte
}

var (
	_ raft.LogStore          = (*raftLog)(nil)
	_ raft.StableStore       = (*raftLog)(nil)
	_ raft.MonotonicLogStore = (*raftLog)(nil)
)

// raftLoc is where an entry's record lies.
type raftLoc struct {
	seg *raftSegment
	off int64
	n   uint32 // length of the body
}

const (
	raftSegmentMax   = 64 << 20
	raftSegmentAhead = 16 << 20
	raftStableFile   = "stable"
	raftEntryHeader  = 8 + 8 + 1 + 8 + 4 // body bytes before the extensions
)

// errKeyNotFound is the stable store's answer for a key never set; Raft
// recognises it by its text.
var errKeyNotFound = errors.New("not found")

var errLogClosed = errors.New("raft log is closed")

// openRaftLog opens (or creates) the Raft log and stable store in dir,
// replaying its segments.
func openRaftLog(dir string, log *slog.Logger) (*raftLog, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("raft log: %w", err)
	}
	bolt := filepath.Join(dir, "raft.db")
	if _, err := os.Stat(bolt); err == nil {
		return nil, fmt.Errorf("raft log: %s was written by raft-boltdb, whose format this version no longer reads "+
			"(no released version wrote one, so there is nothing to migrate): remove the directory %s "+
			"to start this member's Raft state afresh, and add it to its group again", bolt, dir)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("raft log: %w", err)
	}
	l := &raftLog{dir: dir, log: log, segMax: raftSegmentMax, ahead: raftSegmentAhead}
	if err := l.loadStable(); err != nil {
		return nil, err
	}
	if err := l.replay(); err != nil {
		l.closeFiles()
		return nil, err
	}
	return l, nil
}

func raftSegmentPath(dir string, first uint64) string {
	return filepath.Join(dir, fmt.Sprintf("seg-%020d.log", first))
}

// replay indexes the segments' records, cutting a torn end of the last.
func (l *raftLog) replay() error {
	firsts, err := listFiles(l.dir, "seg-", ".log")
	if err != nil {
		return fmt.Errorf("raft log: %w", err)
	}
	var last uint64
	for i, first := range firsts {
		path := raftSegmentPath(l.dir, first)
		if len(l.mu.locs) > 0 && first != last+1 {
			return fmt.Errorf("raft log %s: starts at index %d, but the segment before ends at %d: entries are missing", path, first, last)
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("raft log: %w", err)
		}
		seg := &raftSegment{f: f, first: first, ahead: l.ahead}
		l.mu.segs = append(l.mu.segs, seg)
		want := first
		good, err := scanRaftSegment(f, func(index uint64, off int64, n uint32) error {
			if index != want {
				return fmt.Errorf("raft log %s: the record at offset %d has index %d, want %d: entries are missing", path, off, index, want)
			}
			if l.mu.first == 0 {
				l.mu.first = index
			}
			l.mu.locs = append(l.mu.locs, raftLoc{seg: seg, off: off, n: n})
			want++
			return nil
		})
		if err != nil && (!errors.Is(err, errBadRecord) || i < len(firsts)-1) {
			return fmt.Errorf("raft log %s: %w", path, err)
		}
		seg.size = good
		end, serr := f.Seek(0, io.SeekEnd)
		if serr != nil {
			return fmt.Errorf("raft log %s: %w", path, serr)
		}
		seg.allocated = end
		if err != nil {
			l.log.Warn("raft log: cutting a torn or corrupt end (a crash mid-append)", "file", path, "offset", good, "err", err)
			if err := seg.truncate(good); err != nil {
				return err
			}
		}
		if want > first {
			last = want - 1
		}
	}
	// A last segment left with no record (a crash before its first
	// append was durable) is removed: its name may not be the index the
	// next append starts at.
	if n := len(l.mu.segs); n > 0 && l.mu.segs[n-1].size == 0 {
		seg := l.mu.segs[n-1]
		l.mu.segs = l.mu.segs[:n-1]
		return l.removeSegments([]*raftSegment{seg})
	}
	return nil
}

// scanRaftSegment reads f's records from the start and calls fn with
// each one's index, offset and body length (see scanFrames).
func scanRaftSegment(f *os.File, fn func(index uint64, off int64, n uint32) error) (good int64, err error) {
	return scanFrames(f, raftEntryHeader, math.MaxUint32, true, func(off int64, body []byte) error {
		return fn(binary.BigEndian.Uint64(body), off, uint32(len(body)))
	})
}

// appendRaftEntry appends e's record, framed and checksummed, to dst.
func appendRaftEntry(dst []byte, e *raft.Log) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint64(dst, e.Index)
	dst = binary.BigEndian.AppendUint64(dst, e.Term)
	dst = append(dst, byte(e.Type))
	var at int64
	if !e.AppendedAt.IsZero() {
		at = e.AppendedAt.UnixNano()
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(at))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(e.Extensions)))
	dst = append(dst, e.Extensions...)
	dst = append(dst, e.Data...)
	body := dst[start+8:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(body, castagnoli))
	return dst
}

// decodeRaftEntry decodes a record's body into e; e's slices share body.
func decodeRaftEntry(body []byte, e *raft.Log) error {
	if len(body) < raftEntryHeader {
		return fmt.Errorf("%w: %d bytes", errBadRecord, len(body))
	}
	e.Index = binary.BigEndian.Uint64(body)
	e.Term = binary.BigEndian.Uint64(body[8:])
	e.Type = raft.LogType(body[16])
	e.AppendedAt = time.Time{}
	if at := int64(binary.BigEndian.Uint64(body[17:])); at != 0 {
		e.AppendedAt = time.Unix(0, at)
	}
	next := binary.BigEndian.Uint32(body[25:])
	rest := body[raftEntryHeader:]
	if uint64(next) > uint64(len(rest)) {
		return fmt.Errorf("%w: extensions of %d bytes in a record of %d", errBadRecord, next, len(body))
	}
	e.Extensions, e.Data = nil, nil
	if next > 0 {
		e.Extensions = rest[:next:next]
	}
	if len(rest) > int(next) {
		e.Data = rest[next:]
	}
	return nil
}

// FirstIndex returns the first index held, 0 when the log is empty.
func (l *raftLog) FirstIndex() (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.first, nil
}

// LastIndex returns the last index held, 0 when the log is empty.
func (l *raftLog) LastIndex() (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.lastLocked(), nil
}

// lastLocked is the last index; mu or wmu is held.
func (l *raftLog) lastLocked() uint64 {
	if len(l.mu.locs) == 0 {
		return 0
	}
	return l.mu.first + uint64(len(l.mu.locs)) - 1
}

// IsMonotonic tells Raft that the log has no gaps, so that it empties
// the log after installing a snapshot instead of leaving one.
func (l *raftLog) IsMonotonic() bool { return true }

// GetLog reads the entry at index into out, or returns
// raft.ErrLogNotFound.
func (l *raftLog) GetLog(index uint64, out *raft.Log) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed {
		return errLogClosed
	}
	if len(l.mu.locs) == 0 || index < l.mu.first || index > l.lastLocked() {
		return raft.ErrLogNotFound
	}
	loc := l.mu.locs[index-l.mu.first]
	buf := make([]byte, 8+int(loc.n))
	if _, err := loc.seg.f.ReadAt(buf, loc.off); err != nil {
		return fmt.Errorf("raft log %s: read entry %d at offset %d: %w", loc.seg.f.Name(), index, loc.off, err)
	}
	body := buf[8:]
	if binary.BigEndian.Uint32(buf) != loc.n || crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(buf[4:]) {
		return fmt.Errorf("raft log %s: entry %d at offset %d: %w: checksum mismatch", loc.seg.f.Name(), index, loc.off, errBadRecord)
	}
	if err := decodeRaftEntry(body, out); err != nil {
		return fmt.Errorf("raft log %s: entry %d at offset %d: %w", loc.seg.f.Name(), index, loc.off, err)
	}
	if out.Index != index {
		return fmt.Errorf("raft log %s: entry at offset %d has index %d, want %d: %w", loc.seg.f.Name(), loc.off, out.Index, index, errBadRecord)
	}
	return nil
}

// StoreLog appends one entry.
func (l *raftLog) StoreLog(e *raft.Log) error { return l.StoreLogs([]*raft.Log{e}) }

// StoreLogs appends entries, which must follow the last one held (or
// may start anywhere when the log is empty), durably: one write and one
// fdatasync.
func (l *raftLog) StoreLogs(es []*raft.Log) error {
	if len(es) == 0 {
		return nil
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.mu.closed {
		return errLogClosed
	}
	if l.failed != nil {
		return l.failed
	}
	if last := l.lastLocked(); last != 0 && es[0].Index != last+1 {
		return fmt.Errorf("raft log: appending entry %d after %d would leave a gap", es[0].Index, last)
	}
	buf := l.buf[:0]
	locs := make([]raftLoc, len(es))
	for i, e := range es {
		if i > 0 && e.Index != es[i-1].Index+1 {
			return fmt.Errorf("raft log: entries to append skip from %d to %d", es[i-1].Index, e.Index)
		}
		if uint64(len(e.Data))+uint64(len(e.Extensions)) > 1<<32-1-raftEntryHeader {
			return fmt.Errorf("raft log: entry %d of %d bytes is too long", e.Index, len(e.Data))
		}
		off := len(buf)
		buf = appendRaftEntry(buf, e)
		locs[i] = raftLoc{off: int64(off), n: uint32(len(buf) - off - 8)}
	}
	if cap(buf) <= 1<<20 {
		l.buf = buf
	}
	seg, err := l.segmentFor(es[0].Index, int64(len(buf)))
	if err == nil {
		base := seg.size
		if err = seg.append(buf); err == nil {
			l.mu.Lock()
			if len(l.mu.locs) == 0 {
				l.mu.first = es[0].Index
			}
			for _, loc := range locs {
				loc.seg, loc.off = seg, base+loc.off
				l.mu.locs = append(l.mu.locs, loc)
			}
			l.mu.Unlock()
			return nil
		}
	}
	l.failed = err
	return err
}

// segmentFor returns the segment an append of n bytes starting at index
// first goes to, a new one when the last is full (or there is none).
func (l *raftLog) segmentFor(first uint64, n int64) (*raftSegment, error) {
	segs := l.mu.segs
	if k := len(segs); k > 0 && (segs[k-1].size == 0 && segs[k-1].first == first || segs[k-1].size+n <= l.segMax) {
		return segs[k-1], nil
	}
	if k := len(segs); k > 0 {
		if err := segs[k-1].seal(); err != nil {
			return nil, err
		}
	}
	seg, err := createRaftSegment(l.dir, first, l.ahead)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.mu.segs = append(l.mu.segs, seg)
	l.mu.Unlock()
	return seg, nil
}

// DeleteRange deletes the entries from to to, inclusive: a prefix of
// the log (after a snapshot), a suffix (entries that conflict with the
// leader's), or all of it.
func (l *raftLog) DeleteRange(from, to uint64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.mu.closed {
		return errLogClosed
	}
	if l.failed != nil {
		return l.failed
	}
	first, last := l.mu.first, l.lastLocked()
	if last == 0 || from > to || to < first || from > last {
		return nil
	}
	var err error
	switch {
	case from <= first && to >= last:
		err = l.deleteAll()
	case from <= first:
		err = l.deletePrefix(to + 1)
	case to >= last:
		err = l.deleteSuffix(from)
	default:
		return fmt.Errorf("raft log: cannot delete entries %d to %d from the middle of %d to %d", from, to, first, last)
	}
	if err != nil {
		l.failed = err
	}
	return err
}

// deleteAll empties the log, removing every segment.
func (l *raftLog) deleteAll() error {
	l.mu.Lock()
	segs := l.mu.segs
	l.mu.segs, l.mu.locs, l.mu.first = nil, nil, 0
	l.mu.Unlock()
	return l.removeSegments(segs)
}

// deletePrefix makes first the first index, removing the segments that
// hold only entries before it.
func (l *raftLog) deletePrefix(first uint64) error {
	l.mu.Lock()
	k := sort.Search(len(l.mu.segs), func(i int) bool { return l.mu.segs[i].first > first }) - 1
	gone := l.mu.segs[:max(k, 0)]
	l.mu.segs = append([]*raftSegment(nil), l.mu.segs[len(gone):]...)
	l.mu.locs = append([]raftLoc(nil), l.mu.locs[first-l.mu.first:]...)
	l.mu.first = first
	l.mu.Unlock()
	return l.removeSegments(gone)
}

// deleteSuffix deletes the entries from index on: the segments after
// the one holding it are removed, and that one is cut at its record.
func (l *raftLog) deleteSuffix(index uint64) error {
	l.mu.Lock()
	loc := l.mu.locs[index-l.mu.first]
	k := len(l.mu.segs) - 1
	for l.mu.segs[k] != loc.seg {
		k--
	}
	gone := append([]*raftSegment(nil), l.mu.segs[k+1:]...)
	l.mu.segs = l.mu.segs[:k+1]
	if loc.off == 0 {
		gone = append([]*raftSegment{loc.seg}, gone...)
		l.mu.segs = l.mu.segs[:k]
	}
	l.mu.locs = l.mu.locs[:index-l.mu.first]
	l.mu.Unlock()
	// The newest go first, so that a crash leaves no gap.
	for i, j := 0, len(gone)-1; i < j; i, j = i+1, j-1 {
		gone[i], gone[j] = gone[j], gone[i]
	}
	if err := l.removeSegments(gone); err != nil {
		return err
	}
	if loc.off == 0 {
		return nil
	}
	return loc.seg.truncate(loc.off)
}

// removeSegments closes and removes segs' files, in order, and makes
// their removal durable.
func (l *raftLog) removeSegments(segs []*raftSegment) error {
	if len(segs) == 0 {
		return nil
	}
	for _, seg := range segs {
		seg.f.Close()
		if err := os.Remove(seg.f.Name()); err != nil {
			return fmt.Errorf("raft log: %w", err)
		}
	}
	if err := syncDir(l.dir); err != nil {
		return fmt.Errorf("raft log: %w", err)
	}
	return nil
}

// Close gives back the space allocated past the records and closes the
// files. Later calls fail.
func (l *raftLog) Close() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return nil
	}
	l.mu.closed = true
	var err error
	if k := len(l.mu.segs); k > 0 && l.failed == nil {
		err = l.mu.segs[k-1].seal()
	}
	if cerr := l.closeFiles(); err == nil {
		err = cerr
	}
	return err
}

// closeFiles closes the segments' files.
func (l *raftLog) closeFiles() error {
	var err error
	for _, seg := range l.mu.segs {
		if cerr := seg.f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("raft log: %w", cerr)
		}
	}
	return err
}

// raftSegment is one file of the Raft log.
type raftSegment struct {
	f         *os.File
	first     uint64 // the index in its name
	size      int64  // bytes of records
	allocated int64  // bytes allocated (the file's size)
	ahead     int64  // how much space to allocate at a time
	noAlloc   bool   // the file system cannot allocate ahead: appends grow the file
}

// createRaftSegment creates the segment whose first entry is first,
// allocates ahead bytes for it and makes its name durable. A file of
// that name holds no entry the log has (the log ends before first), so
// it is emptied.
func createRaftSegment(dir string, first uint64, ahead int64) (*raftSegment, error) {
	f, err := os.OpenFile(raftSegmentPath(dir, first), os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("raft log: create segment: %w", err)
	}
	s := &raftSegment{f: f, first: first, ahead: ahead}
	if err := s.grow(0); err != nil {
		f.Close()
		return nil, err
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, fmt.Errorf("raft log: %w", err)
	}
	return s, nil
}

// grow allocates space for n more bytes of records, s.ahead bytes at a
// time, durably, when the file system can.
func (s *raftSegment) grow(n int64) error {
	if s.noAlloc || s.size+n <= s.allocated {
		return nil
	}
	allocated, ok, err := allocateAhead(s.f, s.size+n, s.allocated, s.ahead)
	if err != nil {
		return fmt.Errorf("raft log: %w", err)
	}
	s.allocated, s.noAlloc = allocated, !ok
	return nil
}

// append writes p after the records and makes it durable.
func (s *raftSegment) append(p []byte) error {
	if err := s.grow(int64(len(p))); err != nil {
		return err
	}
	if _, err := s.f.WriteAt(p, s.size); err != nil {
		return fmt.Errorf("raft log: write %s: %w", s.f.Name(), err)
	}
	if err := unix.Fdatasync(int(s.f.Fd())); err != nil {
		return fmt.Errorf("raft log: sync %s: %w", s.f.Name(), err)
	}
	s.size += int64(len(p))
	s.allocated = max(s.allocated, s.size)
	return nil
}

// seal gives back the space allocated past the records, durably: the
// segment is no longer appended to.
func (s *raftSegment) seal() error {
	if s.allocated <= s.size {
		return nil
	}
	return s.truncate(s.size)
}

// truncate cuts the segment at off, durably.
func (s *raftSegment) truncate(off int64) error {
	if err := s.f.Truncate(off); err != nil {
		return fmt.Errorf("raft log: cut %s at %d: %w", s.f.Name(), off, err)
	}
	if err := unix.Fdatasync(int(s.f.Fd())); err != nil {
		return fmt.Errorf("raft log: sync %s: %w", s.f.Name(), err)
	}
	s.size, s.allocated = off, off
	return nil
}

// loadStable reads the stable store's file, if there is one.
func (l *raftLog) loadStable() error {
	path := filepath.Join(l.dir, raftStableFile)
	l.stable = map[string][]byte{}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("raft stable store: %w", err)
	}
	if len(b) < 4 || crc32.Checksum(b[4:], castagnoli) != binary.BigEndian.Uint32(b) {
		return fmt.Errorf("raft stable store %s: %w: checksum mismatch", path, errBadRecord)
	}
	for rest := b[4:]; len(rest) > 0; {
		var k, v []byte
		if k, rest, err = cutField(rest); err == nil {
			v, rest, err = cutField(rest)
		}
		if err != nil {
			return fmt.Errorf("raft stable store %s: %w", path, err)
		}
		l.stable[string(k)] = v
	}
	return nil
}

// cutField splits a u32-length-prefixed field off b.
func cutField(b []byte) (field, rest []byte, err error) {
	if len(b) < 4 || uint64(binary.BigEndian.Uint32(b)) > uint64(len(b)-4) {
		return nil, nil, fmt.Errorf("%w: torn field", errBadRecord)
	}
	n := 4 + int(binary.BigEndian.Uint32(b))
	return b[4:n:n], b[n:], nil
}

// Set stores val under key durably: the file is rewritten whole.
func (l *raftLog) Set(key, val []byte) error {
	l.smu.Lock()
	defer l.smu.Unlock()
	if old, ok := l.stable[string(key)]; ok && bytes.Equal(old, val) {
		return nil
	}
	next := make(map[string][]byte, len(l.stable)+1)
	for k, v := range l.stable {
		next[k] = v
	}
	next[string(key)] = bytes.Clone(val)
	if err := writeStable(l.dir, next); err != nil {
		return err
	}
	l.stable = next
	return nil
}

// writeStable replaces the stable store's file with kv, atomically.
func writeStable(dir string, kv map[string][]byte) error {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b := make([]byte, 4, 64)
	for _, k := range keys {
		b = binary.BigEndian.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(kv[k])))
		b = append(b, kv[k]...)
	}
	binary.BigEndian.PutUint32(b, crc32.Checksum(b[4:], castagnoli))
	path := filepath.Join(dir, raftStableFile)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("raft stable store: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("raft stable store %s: %w", path, err)
	}
	return nil
}

// Get returns the value stored under key, or an error "not found".
func (l *raftLog) Get(key []byte) ([]byte, error) {
	l.smu.Lock()
	defer l.smu.Unlock()
	v, ok := l.stable[string(key)]
	if !ok {
		return nil, errKeyNotFound
	}
	return bytes.Clone(v), nil
}

// SetUint64 stores val under key.
func (l *raftLog) SetUint64(key []byte, val uint64) error {
	return l.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns the number stored under key, or 0 and an error "not
// found".
func (l *raftLog) GetUint64(key []byte) (uint64, error) {
	v, err := l.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raft stable store: value of %q is %d bytes, not a number", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
