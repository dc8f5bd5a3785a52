package metaserver

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sluicefs/sluice/internal/wire"
)

// The log is a sequence of segment files, log-<first index>.wal, each a
// sequence of records:
//
//	u32 length of body | u32 CRC-32C of body | body
//	body: u64 index | u64 term | byte kind | u64 client | u64 txn | writes
//	      [| u64 session | u64 call, in records of kind recordCall]
//
// Index numbers the records from 1 without gaps, and term is 0: the two
// fields a Raft log needs, so that replication can ship these records
// as they are. A record holds the effect of one transaction (the keys it
// set and deleted), never the operation, so replaying it does not depend
// on the clock or on the code that decided it.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Kinds of log records. A recordCall is a commit that is the effect of a
// mount's call (wire.Commit's Session and Call): replay remembers the
// call as applied, so that the call sent again after a restart is
// answered, not run again.
const (
	recordCommit byte = 1
	recordCall   byte = 2
)

// maxRecord bounds a record's body, as wire.MaxFrame bounds a commit.
const maxRecord = wire.MaxFrame + 1<<20

// record is one decoded log record.
type record struct {
	Index  uint64
	Term   uint64
	Client uint64
	Txn    uint64
	Writes []wire.Write
	// Session and Call name the call whose effect this is; Session is 0
	// for other commits.
	Session, Call uint64
}

// appendRecord appends r, framed and checksummed, to dst.
func appendRecord(dst []byte, r *record) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	b := wire.NewBuf(0)
	b.U64(r.Index)
	b.U64(r.Term)
	kind := recordCommit
	if r.Session != 0 {
		kind = recordCall
	}
	b.Byte(kind)
	b.U64(r.Client)
	b.U64(r.Txn)
	wire.EncodeWrites(b, r.Writes)
	if kind == recordCall {
		b.U64(r.Session)
		b.U64(r.Call)
	}
	body := b.Raw()
	dst = append(dst, body...)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(body, castagnoli))
	return dst
}

// decodeRecord decodes a record's body.
func decodeRecord(body []byte) (*record, error) {
	rd := wire.NewReader(body)
	r := &record{Index: rd.U64(), Term: rd.U64()}
	kind := rd.Byte()
	if kind != recordCommit && kind != recordCall && rd.Err() == nil {
		return nil, fmt.Errorf("record kind %d unknown", kind)
	}
	r.Client = rd.U64()
	r.Txn = rd.U64()
	r.Writes = wire.DecodeWrites(rd)
	if kind == recordCall {
		r.Session, r.Call = rd.U64(), rd.U64()
		if r.Session == 0 && rd.Err() == nil {
			return nil, errors.New("call record without a session")
		}
	}
	if err := rd.Done(); err != nil {
		return nil, err
	}
	return r, nil
}

// errBadRecord reports a record whose checksum or encoding is wrong, or
// that the file ends inside of.
var errBadRecord = errors.New("bad log record")

// readSegment calls fn for each record of the segment at path in order.
// It returns the offset just past the last good record; err wraps
// errBadRecord when reading stopped at a torn or corrupt record, and is
// fn's error or an I/O error otherwise.
func readSegment(path string, fn func(*record) error) (good int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	// A record keeps slices of its body: each gets its own.
	return scanFrames(f, 0, maxRecord, false, func(off int64, body []byte) error {
		rec, err := decodeRecord(body)
		if err != nil {
			return fmt.Errorf("%w at offset %d: %v", errBadRecord, off, err) //lint:nowrap errBadRecord is what recovery tests for
		}
		return fn(rec)
	})
}

// scanFrames reads the frames of a log file from its start, the format
// of both logs (a single server's and a member's Raft log): a 4-byte
// body length, a 4-byte CRC-32C of the body, the body. It calls fn with
// each body of minLen to maxLen bytes and its offset; reuse lets the
// next frame's body overwrite the last one's. It returns the offset
// just past the last good frame; err wraps errBadRecord when reading
// stopped at a torn or corrupt frame (zeros to the end of the file,
// space allocated ahead, are the end), and is fn's error or an I/O
// error otherwise.
func scanFrames(f *os.File, minLen, maxLen uint32, reuse bool, fn func(off int64, body []byte) error) (good int64, err error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	r := bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 1<<20)
	var hdr [8]byte
	var body []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err == io.EOF {
				return good, nil
			}
			return good, fmt.Errorf("%w at offset %d: torn header", errBadRecord, good)
		}
		n := binary.BigEndian.Uint32(hdr[:])
		sum := binary.BigEndian.Uint32(hdr[4:])
		if n == 0 && sum == 0 {
			if zerosToEOF(r) {
				return good, nil
			}
			return good, fmt.Errorf("%w at offset %d: empty record", errBadRecord, good)
		}
		if n < minLen || n > maxLen || int64(n) > size-good-8 {
			return good, fmt.Errorf("%w at offset %d: length %d", errBadRecord, good, n)
		}
		if !reuse || cap(body) < int(n) {
			body = make([]byte, n)
		}
		body = body[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			return good, fmt.Errorf("%w at offset %d: torn body", errBadRecord, good)
		}
		if crc32.Checksum(body, castagnoli) != sum {
			return good, fmt.Errorf("%w at offset %d: checksum mismatch", errBadRecord, good)
		}
		if err := fn(good, body); err != nil {
			return good, err
		}
		good += 8 + int64(n)
	}
}

// zerosToEOF tells whether only zero bytes are left in r.
func zerosToEOF(r *bufio.Reader) bool {
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		for _, c := range buf[:n] {
			if c != 0 {
				return false
			}
		}
		if err == io.EOF {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// fileIndex parses the index in a name such as log-00000000000000000001.wal.
func fileIndex(name, prefix, suffix string) (uint64, bool) {
	if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, suffix) {
		return 0, false
	}
	v, err := strconv.ParseUint(name[len(prefix):len(name)-len(suffix)], 10, 64)
	return v, err == nil
}

// listFiles returns the indexes of dir's files named prefix<index>suffix,
// ascending.
func listFiles(dir, prefix, suffix string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, e := range ents {
		if v, ok := fileIndex(e.Name(), prefix, suffix); ok && e.Type().IsRegular() {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

func segmentPath(dir string, first uint64) string {
	return filepath.Join(dir, fmt.Sprintf("log-%020d.wal", first))
}

// segment is the log file being appended to. Its space is allocated
// ahead of the records, so that making a write durable (fdatasync) does
// not also have to commit a new file size: on ext4 that halves the time
// of a commit. The allocated space reads as zeros, which replay takes for
// the end of the segment.
type segment struct {
	f         *os.File
	first     uint64
	size      int64 // bytes of records
	allocated int64 // bytes allocated; 0 when the file system cannot
}

// segmentAhead is how much space a segment allocates at a time.
const segmentAhead = 64 << 20

// createSegment creates the segment whose first record is first and
// makes its name durable. A file of that name holds no record the state
// has (the server starts a segment after the last record it replayed, or
// after a checkpoint when the current segment is not empty), so it is
// emptied.
func createSegment(dir string, first uint64) (*segment, error) {
	f, err := os.OpenFile(segmentPath(dir, first), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create log segment: %w", err)
	}
	s := &segment{f: f, first: first}
	if err := s.grow(0); err != nil {
		f.Close()
		return nil, err
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// grow allocates space for n more bytes of records, durably, when the
// file system can.
func (s *segment) grow(n int64) error {
	if s.size+n <= s.allocated {
		return nil
	}
	allocated, ok, err := allocateAhead(s.f, s.size+n, s.allocated, segmentAhead)
	if err != nil {
		return fmt.Errorf("log segment: %w", err)
	}
	if !ok {
		s.allocated = -1 << 62 // appends grow the file
		return nil
	}
	s.allocated = allocated
	return nil
}

// allocateAhead allocates f's space up to at least need bytes, ahead
// bytes at a time past allocated, durably, so that an append within it
// syncs no change of the file's size. ok is false when the file system
// cannot allocate ahead: appends then grow the file.
func allocateAhead(f *os.File, need, allocated, ahead int64) (n int64, ok bool, err error) {
	n = allocated + ahead
	for n < need {
		n += ahead
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
			return allocated, false, nil
		}
		return allocated, true, fmt.Errorf("allocate %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return allocated, true, fmt.Errorf("sync %s: %w", f.Name(), err)
	}
	return n, true, nil
}

// append writes p after the records and makes it durable.
func (s *segment) append(p []byte) error {
	if err := s.grow(int64(len(p))); err != nil {
		return err
	}
	if _, err := s.f.WriteAt(p, s.size); err != nil {
		return fmt.Errorf("write log segment %s: %w", s.f.Name(), err)
	}
	s.size += int64(len(p))
	if err := unix.Fdatasync(int(s.f.Fd())); err != nil {
		return fmt.Errorf("sync log segment %s: %w", s.f.Name(), err)
	}
	return nil
}

// close gives back the space allocated past the records and closes the
// file.
func (s *segment) close() error {
	var err error
	if s.allocated > s.size {
		if err = s.f.Truncate(s.size); err == nil {
			err = s.f.Sync()
		}
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
