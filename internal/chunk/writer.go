package chunk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/object"
)

// Committer allocates slice ids and records stored slices in metadata. A
// FileWriter calls Commit once per slice it keeps, after the slice's
// blocks are stored and the slices started before it in its chunk are
// committed: commits of one chunk come in order, those of different
// chunks may overlap. It calls it from a background goroutine, or from
// the one running Flush, but always with a context of no request (one
// that nobody cancels). The open files of package vfs implement it, to
// fold the attribute changes held on a file into the slice's transaction
// and keep their caches current (metatest.Committer commits a slice alone,
// for tests). docs/architecture.md ("How a write is
// committed") draws the whole path.
type Committer interface {
	NewSliceID(ctx context.Context) (uint64, error)
	// Commit adds s to chunk idx of ino; unsynced tells that its blocks
	// were stored without a sync (see meta.Client.WriteSliceAttr).
	Commit(ctx context.Context, ino meta.Ino, idx uint32, s meta.Slice, unsynced bool) (*meta.Attr, error)
}

// FileWriter buffers the writes of one file. Writes land in slices, one
// run of contiguous bytes per chunk; a slice's full blocks upload as soon
// as they are complete, and the slice is committed when its chunk is full
// or on Flush. Slices of one chunk commit in the order they were started,
// so later writes win on replay.
type FileWriter struct {
	s   *Store
	c   Committer
	ino meta.Ino
	bg  context.Context // outlives the request that started an upload

	mu struct {
		sync.Mutex
		chunks map[uint32][]*wslice // pending slices per chunk, oldest first
		err    error                // first failed upload or commit
		// commits counts slices that left the pending list, so a reader
		// can tell that one moved into metadata while it read.
		commits uint64
		idle    *time.Timer // finishes idle and old slices; nil when unarmed
	}
}

// Slices are finished when no write touched them for idleFlush, or when
// they are older than maxAge, so buffered data reaches the volume soon and
// an idle writer does not hold buffers other writers wait for.
const (
	idleFlush = time.Second
	maxAge    = 5 * time.Second
)

// pressureWait is how long a writer under memory pressure waits for its
// commits to free room before it freezes the block it is filling too.
const pressureWait = 100 * time.Millisecond

// wslice is a slice being written.
type wslice struct {
	idx     uint32
	pos     uint32 // offset in the chunk
	length  uint32
	blocks  [][]byte
	held    int64 // bytes of buffer the blocks hold, taken from the budget
	id      uint64
	started int  // leading blocks whose upload has started
	frozen  bool // no more writes; finishing
	created time.Time
	touched time.Time     // last write
	prev    *wslice       // the slice written before it in the chunk; guarded by the writer's mu
	done    chan struct{} // closed once committed, failed or dropped

	uploads sync.WaitGroup
	errMu   sync.Mutex
	err     error
}

// NewWriter returns a writer for file ino that commits through c.
func (s *Store) NewWriter(ino meta.Ino, c Committer) *FileWriter {
	w := &FileWriter{s: s, c: c, ino: ino, bg: context.Background()}
	w.mu.chunks = map[uint32][]*wslice{}
	return w
}

// Write buffers p at file offset off.
func (w *FileWriter) Write(ctx context.Context, p []byte, off uint64) error {
	if w.s.buffers.over() {
		// Under pressure: push this file's buffers out and wait for room.
		// The block being filled stays while commits free room; when
		// they have not within pressureWait, it goes too.
		w.mu.Lock()
		w.relieveLocked(false)
		w.mu.Unlock()
		if !w.s.buffers.waitBelowFor(pressureWait) {
			w.mu.Lock()
			w.relieveLocked(true)
			w.mu.Unlock()
			w.s.buffers.waitBelow()
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.err != nil {
		return w.mu.err
	}
	for len(p) > 0 {
		idx := uint32(off / meta.ChunkSize)
		pos := uint32(off % meta.ChunkSize)
		n := min(len(p), meta.ChunkSize-int(pos))
		if err := w.writeChunkLocked(ctx, idx, pos, p[:n]); err != nil {
			return err
		}
		p = p[n:]
		off += uint64(n)
	}
	w.armIdleLocked()
	return nil
}

func (w *FileWriter) writeChunkLocked(ctx context.Context, idx, pos uint32, p []byte) error {
	list := w.mu.chunks[idx]
	end := pos + uint32(len(p))
	sl := w.writableLocked(list, pos, end)
	if sl == nil {
		now := time.Now()
		var last *wslice
		if len(list) > 0 {
			last = list[len(list)-1]
		}
		sl = &wslice{idx: idx, pos: pos, prev: last, done: make(chan struct{}), created: now, touched: now}
		list = append(list, sl)
		w.mu.chunks[idx] = list
	}
	w.copyIn(sl, pos-sl.pos, p)
	sl.touched = time.Now()
	w.dropCoveredLocked(idx, sl, pos, end)
	if sl.pos+sl.length == meta.ChunkSize {
		w.finishLocked(sl)
		return nil
	}
	// Upload blocks a sequential writer has completed.
	if full := int(sl.length) / w.s.conf.BlockSize; full > sl.started && end == sl.pos+sl.length {
		return w.startUploads(ctx, sl, full)
	}
	return nil
}

// writableLocked returns the pending slice of list that a write of
// [pos, end) of its chunk goes into, or nil when it needs a new one: the
// newest slice still open whose unuploaded part the write starts in or
// continues, provided no newer pending slice overlaps the write (which
// must stay on top of it). So a writer that overwrites what it has just
// written, or comes back to continue an earlier run, fills buffers it
// already has instead of uploading more slices.
func (w *FileWriter) writableLocked(list []*wslice, pos, end uint32) *wslice {
	bs := uint32(w.s.conf.BlockSize)
	for i := len(list) - 1; i >= 0; i-- {
		x := list[i]
		if !x.frozen && pos >= x.pos+uint32(x.started)*bs && pos <= x.pos+x.length {
			return x
		}
		if pos < x.pos+x.length && end > x.pos {
			return nil
		}
	}
	return nil
}

// dropCoveredLocked drops the pending slices of chunk idx older than sl
// that the write of [pos, end) into sl covers whole and that have not
// started uploading: nothing will ever read them.
func (w *FileWriter) dropCoveredLocked(idx uint32, sl *wslice, pos, end uint32) {
	list := w.mu.chunks[idx]
	kept := list[:0]
	var dropped []*wslice
	for _, x := range list {
		if x == sl {
			kept = append(kept, list[len(kept)+len(dropped):]...)
			break
		}
		if !x.frozen && x.started == 0 && x.pos >= pos && x.pos+x.length <= end {
			dropped = append(dropped, x)
			continue
		}
		kept = append(kept, x)
	}
	if len(dropped) == 0 {
		return
	}
	clear(list[len(kept):])
	w.mu.chunks[idx] = kept
	gone := map[*wslice]bool{}
	for _, x := range dropped {
		gone[x] = true
	}
	for _, y := range kept {
		for gone[y.prev] {
			y.prev = y.prev.prev
		}
	}
	for _, x := range dropped {
		w.s.buffers.release(x.held)
		w.recycle(x)
		close(x.done)
	}
}

// copyIn writes p at offset off of slice sl, growing its blocks.
func (w *FileWriter) copyIn(sl *wslice, off uint32, p []byte) {
	bs := w.s.conf.BlockSize
	for len(p) > 0 {
		i := int(off) / bs
		for len(sl.blocks) <= i {
			sl.blocks = append(sl.blocks, nil)
		}
		in := int(off) % bs
		n := min(len(p), bs-in)
		b := w.grow(sl, sl.blocks[i], in+n) // zero past len(b): a gap reads as zeros
		copy(b[in:in+n], p)
		if in+n > len(b) {
			b = b[:in+n]
		}
		sl.blocks[i] = b
		p = p[n:]
		off += uint32(n)
		if off > sl.length {
			sl.length = off
		}
	}
}

// Block buffers start small and grow, so a small file holds a few KiB
// rather than a whole block: allocating and zeroing 4 MiB for a 10 KB
// file cost more than the rest of its write. A buffer that reaches
// fullBufferAt, as one filled by large or sequential writes does at once,
// takes the whole block size, so big files copy nothing twice.
const (
	minBuffer    = 4 << 10
	fullBufferAt = 128 << 10
)

// grow returns b with room for need bytes, taking what it adds from the
// budget.
func (w *FileWriter) grow(sl *wslice, b []byte, need int) []byte {
	if need <= cap(b) {
		return b
	}
	bs := w.s.conf.BlockSize
	size := max(minBuffer, 2*cap(b))
	for size < need {
		size *= 2
	}
	if size >= fullBufferAt || size > bs {
		size = bs
	}
	var nb []byte
	if size == bs && w.s.blockBufs != nil {
		// Bytes past len(b) are not zero here, and need not be: a slice
		// is written without gaps, so nothing reads past its length.
		nb = (*w.s.blockBufs.Get().(*[]byte))[:len(b)]
	} else {
		nb = make([]byte, len(b), size)
	}
	copy(nb, b)
	w.s.buffers.add(int64(size - cap(b)))
	sl.held += int64(size - cap(b))
	return nb
}

// recycle returns the whole-block buffers of sl, which is done with (its
// uploads over, out of the pending list), to the store's pool, unless
// the caches took their blocks.
func (w *FileWriter) recycle(sl *wslice) {
	if w.s.blockBufs == nil {
		return
	}
	for i, b := range sl.blocks {
		if cap(b) == w.s.conf.BlockSize && !w.s.cachesWritten(len(b)) {
			b = b[:cap(b)]
			w.s.blockBufs.Put(&b)
		}
		sl.blocks[i] = nil
	}
}

// startUploads uploads blocks [sl.started, upto) in the background.
func (w *FileWriter) startUploads(ctx context.Context, sl *wslice, upto int) error {
	if sl.id == 0 {
		id, err := w.c.NewSliceID(ctx)
		if err != nil {
			return fmt.Errorf("allocate slice id: %w", err)
		}
		sl.id = id
	}
	for ; sl.started < upto; sl.started++ {
		i, data := sl.started, sl.blocks[sl.started]
		sl.uploads.Add(1)
		go func() {
			defer sl.uploads.Done()
			w.upload(sl, i, data)
		}()
	}
	return nil
}

// upload stores block i of sl, recording a failure in sl.err.
func (w *FileWriter) upload(sl *wslice, i int, data []byte) {
	ctx := w.bg
	if w.s.defersSync() {
		ctx = object.DeferSync(ctx)
	}
	if err := w.s.putBlock(ctx, sl.id, i, data); err != nil {
		sl.errMu.Lock()
		sl.err = errors.Join(sl.err, err)
		sl.errMu.Unlock()
	}
}

// finishLocked freezes sl and uploads and commits it in the background.
func (w *FileWriter) finishLocked(sl *wslice) {
	if finish := w.freezeLocked(sl, false); finish != nil {
		go finish()
	}
}

// freezeLocked freezes sl, starts uploading its blocks and returns the
// rest of its work (wait for the uploads, commit, release), to be run
// once; nil when sl was frozen already. With inline, the upload of its
// last block is left to that work too, so that a caller running it
// itself (a small file's close) stores and commits its only block with
// no hand-off to another goroutine: each costs a thread wake-up.
func (w *FileWriter) freezeLocked(sl *wslice, inline bool) func() {
	if sl.frozen {
		return nil
	}
	sl.frozen = true
	upto := len(sl.blocks)
	if inline && upto > sl.started {
		upto-- // the last block: uploaded by the work returned
	}
	err := w.startUploads(w.bg, sl, upto)
	last := -1
	if err == nil && upto < len(sl.blocks) {
		last, sl.started = upto, len(sl.blocks)
	}
	return func() {
		if last >= 0 {
			w.upload(sl, last, sl.blocks[last])
		}
		w.finish(sl, err)
	}
}

// finish waits for the uploads of frozen slice sl, commits it after the
// slices before it (err, when not nil, fails it instead) and releases it.
func (w *FileWriter) finish(sl *wslice, err error) {
	sl.uploads.Wait()
	w.waitPrev(sl)
	if err == nil {
		sl.errMu.Lock()
		err = sl.err
		sl.errMu.Unlock()
	}
	if err == nil {
		unsynced := w.s.defersSync()
		_, err = w.c.Commit(w.bg, w.ino, sl.idx, meta.Slice{Pos: sl.pos, Id: sl.id, Size: sl.length, Len: sl.length}, unsynced)
		if err != nil {
			err = fmt.Errorf("commit slice %d of inode %d: %w", sl.id, w.ino, err)
		} else if unsynced {
			w.s.syncs.add(meta.UnsyncedSlice{Id: sl.id, Size: sl.length, Ino: w.ino, Idx: sl.idx})
		}
	}
	w.mu.Lock()
	if err != nil && w.mu.err == nil {
		w.mu.err = err
	}
	list := w.mu.chunks[sl.idx]
	for i, x := range list {
		if x == sl {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(w.mu.chunks, sl.idx)
	} else {
		w.mu.chunks[sl.idx] = list
	}
	w.mu.commits++
	w.mu.Unlock()
	w.s.buffers.release(sl.held)
	w.recycle(sl)
	close(sl.done)
}

// waitPrev waits until the slices written before sl in its chunk are
// committed, so that sl's commit lands on top of theirs. A slice before it
// may be dropped meanwhile (dropCoveredLocked), which points sl.prev past
// it under w.mu and then closes its done: so sl.prev is read under the
// lock and read again after each wait, until the slice waited for is
// still sl's predecessor.
func (w *FileWriter) waitPrev(sl *wslice) {
	for {
		w.mu.Lock()
		prev := sl.prev
		w.mu.Unlock()
		if prev == nil {
			return
		}
		<-prev.done
		w.mu.Lock()
		same := sl.prev == prev
		w.mu.Unlock()
		if same {
			return
		}
	}
}

// relieveLocked frees this file's buffers under memory pressure: it
// freezes its pending slices, which then commit and release their blocks.
// The newest slice of a chunk, the one a sequential writer is filling,
// is frozen only up to its last whole block: the block being filled moves
// to a new slice that continues it. Freezing it too would store a short
// block each time, which costs an object, a request and (short blocks are
// cached) a copy into the disk cache; four writers onto S3 made one in
// four of their blocks short that way. A newest slice shorter than a
// block is left alone while slices of the file are committing, whose
// buffers will free room, unless all is set.
func (w *FileWriter) relieveLocked(all bool) {
	bs := uint32(w.s.conf.BlockSize)
	committing := false
	for _, list := range w.mu.chunks {
		for _, sl := range list {
			committing = committing || sl.frozen
		}
	}
	type tail struct {
		idx uint32
		sl  *wslice
	}
	var tails []tail
	for idx, list := range w.mu.chunks {
		for i, sl := range list {
			if sl.frozen {
				continue
			}
			if i == len(list)-1 && !all && sl.length%bs != 0 {
				full := sl.length / bs
				if full == 0 {
					tails = append(tails, tail{idx, nil}) // decided below
					continue
				}
				tails = append(tails, tail{idx, w.splitLocked(sl, full)})
			}
			w.finishLocked(sl)
			committing = true
		}
	}
	for _, t := range tails {
		list := w.mu.chunks[t.idx]
		if t.sl != nil {
			w.mu.chunks[t.idx] = append(list, t.sl)
		} else if !committing {
			w.finishLocked(list[len(list)-1])
		}
	}
}

// splitLocked cuts sl after its first full blocks and returns a new slice
// holding the rest (less than a block), to be committed after sl. The
// caller puts it in the chunk's list.
func (w *FileWriter) splitLocked(sl *wslice, full uint32) *wslice {
	bs := uint32(w.s.conf.BlockSize)
	rest := sl.blocks[full:]
	var held int64
	for _, b := range rest {
		held += int64(cap(b))
	}
	now := time.Now()
	t := &wslice{idx: sl.idx, pos: sl.pos + full*bs, length: sl.length - full*bs,
		blocks: append([][]byte(nil), rest...), held: held, prev: sl,
		done: make(chan struct{}), created: now, touched: sl.touched}
	clear(rest)
	sl.blocks = sl.blocks[:full]
	sl.length = full * bs
	sl.held -= held
	return t
}

func (w *FileWriter) finishAllLocked() []chan struct{} {
	var waits []chan struct{}
	for _, list := range w.mu.chunks {
		for _, sl := range list {
			w.finishLocked(sl)
			waits = append(waits, sl.done)
		}
	}
	return waits
}

// Flush uploads and commits everything written so far and returns the
// first failure since the writer was created.
func (w *FileWriter) Flush(ctx context.Context) error {
	w.mu.Lock()
	// One slice left to freeze (a small file, or a big one's tail while
	// the rest uploads): this goroutine finishes it itself.
	var only *wslice
	open := 0
	for _, list := range w.mu.chunks {
		for _, sl := range list {
			if !sl.frozen {
				only = sl
				open++
			}
		}
	}
	var finish func()
	if open == 1 {
		finish = w.freezeLocked(only, true)
	}
	waits := w.finishAllLocked()
	w.mu.Unlock()
	if finish != nil {
		finish()
	}
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.err
}

// Dirty reports whether writes are buffered and not yet committed.
func (w *FileWriter) Dirty() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.mu.chunks) > 0
}

// PendingEnd returns the file offset just past the last buffered byte, or
// 0 when nothing is buffered.
func (w *FileWriter) PendingEnd() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var end uint64
	for idx, list := range w.mu.chunks {
		for _, sl := range list {
			end = max(end, uint64(idx)*meta.ChunkSize+uint64(sl.pos)+uint64(sl.length))
		}
	}
	return end
}

// armIdleLocked starts the idle timer when slices are being written.
func (w *FileWriter) armIdleLocked() {
	if w.mu.idle == nil && len(w.mu.chunks) > 0 {
		w.mu.idle = time.AfterFunc(idleFlush, w.finishIdle)
	}
}

// finishIdle finishes slices that are idle or old, and re-arms the timer
// while unfinished slices remain.
func (w *FileWriter) finishIdle() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.idle = nil
	now := time.Now()
	open := false
	for _, list := range w.mu.chunks {
		for _, sl := range list {
			if sl.frozen {
				continue
			}
			if now.Sub(sl.touched) >= idleFlush || now.Sub(sl.created) >= maxAge {
				w.finishLocked(sl)
			} else {
				open = true
			}
		}
	}
	if open {
		w.mu.idle = time.AfterFunc(idleFlush, w.finishIdle)
	}
}

// Read fills p with the file's content at off as this writer's process
// sees it: what is committed, with buffered writes on top. A slice that
// commits while the committed part is read would be in neither, so the
// read is retried until no commit interleaved.
func (w *FileWriter) Read(ctx context.Context, src SliceSource, p []byte, off uint64) error {
	for {
		w.mu.Lock()
		commits := w.mu.commits
		w.mu.Unlock()
		if err := w.s.ReadFile(ctx, src, w.ino, p, off); err != nil {
			return err
		}
		w.mu.Lock()
		if w.mu.commits == commits {
			w.overlayLocked(p, off)
			w.mu.Unlock()
			return nil
		}
		w.mu.Unlock()
	}
}

// ReadVec is Read that may return the content as pieces instead of in p,
// valid until release is called, as Store.ReadFileVec does; with buffered
// writes in the range the pieces are gathered into p and the writes laid
// over it, and ReadVec returns p alone. The caller must call release
// once, also after an error.
func (w *FileWriter) ReadVec(ctx context.Context, src SliceSource, p []byte, off uint64) (pieces [][]byte, release func(), err error) {
	for {
		w.mu.Lock()
		commits := w.mu.commits
		w.mu.Unlock()
		pieces, release, err := w.s.ReadFileVec(ctx, src, w.ino, p, off)
		if err != nil {
			return nil, release, err
		}
		w.mu.Lock()
		if w.mu.commits == commits {
			if w.bufferedLocked(off, uint64(len(p))) {
				Gather(p, pieces)
				release()
				pieces = [][]byte{p}
				w.overlayLocked(p, off)
			}
			w.mu.Unlock()
			return pieces, release, nil
		}
		w.mu.Unlock()
		release()
	}
}

// bufferedLocked reports whether buffered, uncommitted writes overlap the
// n bytes at off.
func (w *FileWriter) bufferedLocked(off, n uint64) bool {
	if len(w.mu.chunks) == 0 {
		return false
	}
	end := off + n
	for idx := off / meta.ChunkSize; idx*meta.ChunkSize < end; idx++ {
		for _, sl := range w.mu.chunks[uint32(idx)] {
			start := idx*meta.ChunkSize + uint64(sl.pos)
			if max(start, off) < min(start+uint64(sl.length), end) {
				return true
			}
		}
	}
	return false
}

// overlayLocked copies buffered, uncommitted bytes over p, which holds the
// committed content of the file at offset off.
func (w *FileWriter) overlayLocked(p []byte, off uint64) {
	if len(w.mu.chunks) == 0 {
		return
	}
	end := off + uint64(len(p))
	bs := uint64(w.s.conf.BlockSize)
	for idx := off / meta.ChunkSize; idx*meta.ChunkSize < end; idx++ {
		for _, sl := range w.mu.chunks[uint32(idx)] {
			start := idx*meta.ChunkSize + uint64(sl.pos)
			lo, hi := max(start, off), min(start+uint64(sl.length), end)
			for at := lo; at < hi; {
				so := at - start
				b := sl.blocks[so/bs]
				n := copy(p[at-off:hi-off], b[so%bs:])
				at += uint64(n)
			}
		}
	}
}
