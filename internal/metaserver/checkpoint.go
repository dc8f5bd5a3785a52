package metaserver

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/wire"
)

// A checkpoint is the whole state as of one log index, in a file named
// checkpoint-<index>.ckpt:
//
//	magic | u64 index | entries | 'E' u64 pairs | u32 CRC-32C of all before
//	entry: 'P' bytes key bytes value | 'D' u64 client u64 txn u64 index
//	     | 'C' u64 session u64 call u64 index
//
// It is written to a temporary name, synced and renamed, so a crash
// leaves either the whole file or none; a file whose checksum does not
// match is refused at start-up, never half-loaded.

const checkpointMagic = "SLUICE-CKPT\x01"

func checkpointPath(dir string, index uint64) string {
	return filepath.Join(dir, fmt.Sprintf("checkpoint-%020d.ckpt", index))
}

// errBadCheckpoint reports a checkpoint that fails its checks.
var errBadCheckpoint = errors.New("corrupt checkpoint")

// crcWriter checksums what passes through it.
type crcWriter struct {
	w   io.Writer
	crc hash.Hash32
}

func (c *crcWriter) Write(p []byte) (int, error) {
	c.crc.Write(p)
	return c.w.Write(p)
}

// writeCheckpoint writes t, the dedupe entries and the applied calls as
// of index, durably, and returns the file's size.
func writeCheckpoint(dir string, index uint64, t *tree, dd, calls []dedupeEntry) (int64, error) {
	final := checkpointPath(dir, index)
	tmp := final + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, fmt.Errorf("create checkpoint: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := encodeCheckpoint(bw, index, t, dd, calls); err != nil {
		return 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, fmt.Errorf("write checkpoint: %w", err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("sync checkpoint: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("close checkpoint: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return 0, fmt.Errorf("rename checkpoint: %w", err)
	}
	ok = true
	return st.Size(), syncDir(dir)
}

// readCheckpoint loads the checkpoint at path.
func readCheckpoint(path string) (index uint64, t *tree, dd, calls *dedupe, inodes int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, nil, nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, nil, nil, nil, 0, err
	}
	if st.Size() < checkpointMin {
		return 0, nil, nil, nil, 0, fmt.Errorf("%w: %s is %d bytes", errBadCheckpoint, path, st.Size())
	}
	return decodeCheckpoint(f, path)
}

// checkpointMin is the size of an empty checkpoint.
const checkpointMin = int64(len(checkpointMagic)) + 8 + 9 + 4

// decodeCheckpoint decodes a checkpoint from r, which ends where the
// checkpoint does: a file, or a snapshot streamed to a member. name says
// which in errors. Nothing is returned unless every byte passed its
// checks, the checksum last, so a damaged stream is refused whole.
func decodeCheckpoint(r io.Reader, name string) (index uint64, t *tree, dd, calls *dedupe, inodes int64, err error) {
	// Everything but the last 4 bytes passes through the checksum.
	hb := &holdBack{r: r, crc: crc32.New(castagnoli)}
	br := bufio.NewReaderSize(hb, 1<<20)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", errBadCheckpoint, name, fmt.Sprintf(format, args...))
	}
	// A stream that fails (not one that ends early) is reported as it is.
	failed := func(what string, err error) error {
		if hb.err != nil && hb.err != io.EOF {
			return fmt.Errorf("read %s: %w", name, hb.err)
		}
		return bad("%s: %v", what, err)
	}
	magic := make([]byte, len(checkpointMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != checkpointMagic {
		if err != nil {
			return 0, nil, nil, nil, 0, failed("magic", err)
		}
		return 0, nil, nil, nil, 0, bad("not a checkpoint (magic %q)", magic)
	}
	u64 := func() (uint64, error) {
		var b [8]byte
		_, err := io.ReadFull(br, b[:])
		return binary.BigEndian.Uint64(b[:]), err
	}
	var kbuf, vbuf []byte
	str := func(scratch *[]byte) ([]byte, error) {
		n, err := binary.ReadUvarint(br)
		if err != nil {
			return nil, err
		}
		if n > wire.MaxFrame {
			return nil, fmt.Errorf("string of %d bytes", n)
		}
		if uint64(cap(*scratch)) < n {
			*scratch = make([]byte, n)
		}
		p := (*scratch)[:n]
		_, err = io.ReadFull(br, p)
		return p, err
	}
	if index, err = u64(); err != nil {
		return 0, nil, nil, nil, 0, failed("header", err)
	}
	ld := newLoader()
	dd, calls = newDedupe(), newDedupe()
	var pairs uint64
	for done := false; !done; {
		kind, err := br.ReadByte()
		if err != nil {
			return 0, nil, nil, nil, 0, failed("entry", err)
		}
		switch kind {
		case 'P':
			k, err := str(&kbuf)
			if err != nil {
				return 0, nil, nil, nil, 0, failed("key", err)
			}
			v, err := str(&vbuf)
			if err != nil {
				return 0, nil, nil, nil, 0, failed("value", err)
			}
			if !ld.add(k, v, 0) {
				return 0, nil, nil, nil, 0, bad("pair %d is out of key order", pairs+1)
			}
			if kvstore.IsNodeKey(k) {
				inodes++
			}
			pairs++
		case 'D', 'C':
			var e [3]uint64
			for i := range e {
				if e[i], err = u64(); err != nil {
					return 0, nil, nil, nil, 0, failed("dedupe entry", err)
				}
			}
			if kind == 'D' {
				dd.add(txnKey{e[0], e[1]}, e[2])
			} else {
				calls.add(txnKey{e[0], e[1]}, e[2])
			}
		case 'E':
			n, err := u64()
			if err != nil || n != pairs {
				if err != nil {
					return 0, nil, nil, nil, 0, failed("end", err)
				}
				return 0, nil, nil, nil, 0, bad("end says %d pairs, read %d", n, pairs)
			}
			done = true
		default:
			return 0, nil, nil, nil, 0, bad("entry kind %q", kind)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		if err != nil {
			return 0, nil, nil, nil, 0, failed("end", err)
		}
		return 0, nil, nil, nil, 0, bad("bytes after the end")
	}
	if len(hb.held) != 4 {
		return 0, nil, nil, nil, 0, bad("checksum: %d bytes", len(hb.held))
	}
	if binary.BigEndian.Uint32(hb.held) != hb.crc.Sum32() {
		return 0, nil, nil, nil, 0, bad("checksum mismatch")
	}
	return index, ld.tree(), dd, calls, inodes, nil
}

// holdBack passes on all but the last 4 bytes of r, checksumming what it
// passes on, and keeps those 4, a checkpoint's checksum, in held: a
// stream's length is not known until it ends. Reads must ask for more
// than 4 bytes (a bufio.Reader's do).
type holdBack struct {
	r    io.Reader
	crc  hash.Hash32
	held []byte // the last bytes read, at most 4
	err  error  // r's error, once it returned one
}

func (h *holdBack) Read(p []byte) (int, error) {
	if len(p) <= 4 {
		return 0, io.ErrShortBuffer
	}
	n := copy(p, h.held)
	for n <= 4 && h.err == nil {
		var m int
		m, h.err = h.r.Read(p[n:])
		n += m
	}
	if n <= 4 {
		h.held = append(h.held[:0], p[:n]...)
		return 0, h.err
	}
	h.held = append(h.held[:0], p[n-4:n]...)
	h.crc.Write(p[:n-4])
	return n - 4, nil
}

// encodeCheckpoint writes t, the dedupe entries and the applied calls as
// of index to w in the checkpoint format, its checksum last; a raft
// snapshot is the same bytes. It hands w writes of about
// checkpointChunk bytes, from one buffer it reuses.
func encodeCheckpoint(w io.Writer, index uint64, t *tree, dd, calls []dedupeEntry) error {
	cw := &crcWriter{w: w, crc: crc32.New(castagnoli)}
	// The slack takes the pair that crosses the mark without growing.
	b := make([]byte, 0, checkpointChunk+64<<10)
	flush := func() error {
		_, err := cw.Write(b)
		b = b[:0]
		return err
	}
	b = append(b, checkpointMagic...)
	b = binary.BigEndian.AppendUint64(b, index)
	var pairs uint64
	var werr error
	t.Ascend(func(it item) bool {
		k, v := it.key(), it.val()
		b = append(b, 'P')
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
		pairs++
		if len(b) >= checkpointChunk {
			werr = flush()
		}
		return werr == nil
	})
	if werr != nil {
		return fmt.Errorf("write checkpoint: %w", werr)
	}
	for _, tbl := range []struct {
		kind    byte
		entries []dedupeEntry
	}{{'D', dd}, {'C', calls}} {
		for _, e := range tbl.entries {
			b = append(b, tbl.kind)
			b = binary.BigEndian.AppendUint64(b, e.k.client)
			b = binary.BigEndian.AppendUint64(b, e.k.txn)
			b = binary.BigEndian.AppendUint64(b, e.index)
			if len(b) >= checkpointChunk {
				if err := flush(); err != nil {
					return fmt.Errorf("write checkpoint: %w", err)
				}
			}
		}
	}
	b = append(b, 'E')
	b = binary.BigEndian.AppendUint64(b, pairs)
	if err := flush(); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], cw.crc.Sum32())
	if _, err := w.Write(sum[:]); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}

// checkpointChunk is the size of encodeCheckpoint's writes: large enough
// that a writer's own buffering (a raft snapshot sink has 4 KiB) is
// bypassed and few system calls are made.
const checkpointChunk = 1 << 20
