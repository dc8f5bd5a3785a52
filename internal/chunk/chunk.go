// Package chunk stores file data: it maps a file's byte ranges to chunks of
// meta.ChunkSize bytes, chunks to slices (one contiguous write each, with a
// volume-wide id), and slices to immutable blocks of the volume's block
// size, kept as objects under the keys of the object-layout spec.
//
// A FileWriter buffers the writes of one open file per chunk and uploads
// them as slices: all blocks of a slice are stored before the slice is
// committed to metadata, so metadata never names missing data; with
// writeback, "stored" means staged durably on local disk, and a background
// uploader moves staged blocks to the object store (also after a crash, on
// the next Open of the cache directory). Reads replay a chunk's slice list
// (later slices cover earlier ones, uncovered ranges are zeros) and fetch
// blocks through the block caches of package cache: memory, then disk
// (with staged blocks), then the object store.
package chunk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"

	"github.com/sluicefs/sluice/internal/chunk/cache"
	"github.com/sluicefs/sluice/internal/object"
)

// Config tunes a Store.
type Config struct {
	// BlockSize is the volume's block size in bytes.
	BlockSize int
	// HashPrefix spreads block keys over 256 prefixes.
	HashPrefix bool
	// MaxUploads bounds concurrent block uploads.
	MaxUploads int
	// BufferSize bounds the bytes buffered by all writers of a mount;
	// writers flush and wait when it is exceeded.
	BufferSize int64

	// CacheDirs are the directories of the disk block cache (--cache-dir,
	// split at ':'). Empty, or the single entry "memory", keeps blocks in
	// memory only.
	CacheDirs []string
	// CacheSize bounds the disk cache in bytes, across CacheDirs (default
	// 100 GiB). With memory only, it bounds the memory cache instead,
	// unless MemoryCacheSize is set.
	CacheSize int64
	// MemoryCacheSize bounds the in-memory block cache in bytes (default
	// 256 MiB); it sits in front of the disk cache.
	MemoryCacheSize int64
	// FreeSpaceRatio is the share of each cache directory's file system
	// kept free (default 0.1): below it cached blocks are evicted, no new
	// ones are cached and writeback stops staging.
	FreeSpaceRatio float64
	// CachePartialOnly, when set, keeps blocks this mount writes out of
	// the caches; by default those shorter than a block (small files, a
	// file's last block) are cached, as they are often read again soon.
	CachePartialOnly bool
	// CacheLargeWrite caches the written blocks of the full block size
	// too. They are left out by default, as JuiceFS does: a big file
	// just written is seldom read back at once, and copying each of its
	// blocks into the disk cache as it uploads took a third of a
	// writing mount's CPU.
	CacheLargeWrite bool
	// FetchToMemory keeps the blocks fetched from the object store in the
	// memory cache alone. With a bucket on this host whose blocks are
	// stored as they are, a copy in the disk cache costs a write and a
	// checksum of every block read and makes no later read cheaper: the
	// bucket's file is read as fast as the cache's. Warm still writes to
	// the disk cache.
	FetchToMemory bool
	// Writeback stages written blocks durably in the disk cache and
	// uploads them in the background; it needs CacheDirs.
	Writeback bool
	// StagingLimit bounds the bytes staged for writeback (default
	// CacheSize); beyond it blocks are uploaded synchronously.
	StagingLimit int64
	// VolumeUUID names the volume's subdirectory in each cache directory;
	// required with CacheDirs.
	VolumeUUID string
	// Logger receives background events and errors (staged uploads,
	// staging full, cache IO); nil discards them.
	Logger *slog.Logger
	// MaxReadahead bounds the readahead window of one sequential stream,
	// in bytes; 0 disables readahead.
	MaxReadahead int64
	// Prefetch is the number of blocks a random read may fetch whole in
	// the background, concurrently; 0 fetches only the bytes read.
	Prefetch int
	// RangedReads lets a read of part of a block that no cache holds fetch
	// only that part from the object store. It only pays when the store
	// serves ranges cheaply: not through compression or encryption, which
	// must fetch whole objects anyway.
	RangedReads bool
	// PrefetchCold, with a bucket on this host (RangedReads set), lets a
	// random read fetch its block whole only when the bucket had to read
	// its bytes from the disk (object.ReportCold): one read of the block
	// then saves the disk many small ones. When the bucket's file is in
	// the page cache, a small read of it costs about what a cache hit
	// does, and a copy of the whole block would cost as much as hundreds
	// of them.
	PrefetchCold bool
}

// memoryOnly reports whether the configuration has no disk cache.
func (c *Config) memoryOnly() bool {
	return len(c.CacheDirs) == 0 || len(c.CacheDirs) == 1 && c.CacheDirs[0] == "memory"
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.BlockSize == 0 {
		c.BlockSize = 4 << 20
	}
	if c.MaxUploads <= 0 {
		c.MaxUploads = 20
	}
	if c.BufferSize <= 0 {
		c.BufferSize = 300 << 20
	}
	if c.memoryOnly() && c.MemoryCacheSize <= 0 && c.CacheSize > 0 {
		c.MemoryCacheSize = c.CacheSize
	}
	if c.MemoryCacheSize <= 0 {
		c.MemoryCacheSize = 256 << 20
	}
	if c.CacheSize <= 0 {
		c.CacheSize = 100 << 30
	}
	if c.FreeSpaceRatio <= 0 {
		c.FreeSpaceRatio = 0.1
	}
	if c.MaxReadahead < 0 {
		c.MaxReadahead = 0
	}
	if c.Prefetch < 0 {
		c.Prefetch = 0
	}
	if c.StagingLimit <= 0 {
		c.StagingLimit = c.CacheSize
	}
}

// Validate checks a configuration after Defaults.
func (c *Config) Validate() error {
	if c.memoryOnly() {
		if c.Writeback {
			return errors.New("writeback needs a disk cache directory, not a memory cache")
		}
		return nil
	}
	if c.FreeSpaceRatio >= 1 {
		return fmt.Errorf("free-space ratio %v is not below 1", c.FreeSpaceRatio)
	}
	if c.VolumeUUID == "" {
		return errors.New("a disk cache needs the volume UUID")
	}
	return nil
}

// Store reads and writes slices as blocks in an object store.
type Store struct {
	obj      object.Store
	conf     Config
	log      *slog.Logger
	mem      *cache.Memory
	disk     *cache.Disk // nil with memory only
	cache    cache.Cache // mem, or mem in front of disk
	fetches  singleflight.Group
	uploads  chan struct{} // semaphore of MaxUploads
	buffers  *budget
	staged   *stagedUploads // nil with memory only
	prefetch *prefetcher
	readers  *readGuard // reads a deletion waits for
	// blockBufs recycles whole-block write buffers when nothing keeps a
	// reference to a block once it is stored (no memory cache of written
	// blocks, no writeback staging): a fresh 4 MiB buffer costs a page
	// fault per 4 KiB on first touch, a quarter of a small write's time.
	blockBufs *sync.Pool // nil when buffers cannot be recycled
	// fetched recycles the buffers of blocks fetched into the memory
	// cache alone (memory only, or FetchToMemory); nil otherwise.
	fetched *fetchPool
	syncs   *syncer    // deferred syncs of written blocks (sync.go); nil when off
	reads   readCounts // where the application's block reads were served (stats.go)
	peers   Peers      // the cache group (peers.go); nil when none
}

// Open returns a Store over obj, which already applies the volume's prefix
// and compression. With a disk cache it opens the cache directories and
// starts uploading the blocks a previous run left staged. Close stops the
// background work.
func Open(obj object.Store, conf Config) (*Store, error) {
	conf.Defaults()
	if err := conf.Validate(); err != nil {
		return nil, fmt.Errorf("chunk store: %w", err)
	}
	s := newStore(obj, conf)
	if conf.memoryOnly() {
		return s, nil
	}
	disk, err := cache.NewDisk(cache.DiskConfig{
		Dirs:           conf.CacheDirs,
		VolumeUUID:     conf.VolumeUUID,
		Capacity:       conf.CacheSize,
		StagingLimit:   conf.StagingLimit,
		FreeSpaceRatio: conf.FreeSpaceRatio,
		Logger:         s.log,
	})
	if err != nil {
		return nil, fmt.Errorf("chunk store: %w", err)
	}
	s.disk = disk
	s.cache = cache.NewTiered(s.mem, disk)
	s.staged = newStagedUploads()
	if keys := disk.Staged(); len(keys) > 0 {
		s.log.Info("uploading blocks staged by a previous run", "blocks", len(keys), "bytes", disk.StagedUsed())
		for _, key := range keys {
			s.queueUpload(key)
		}
	}
	return s, nil
}

// newStore returns a Store with a memory cache only.
func newStore(obj object.Store, conf Config) *Store {
	s := &Store{
		obj:     obj,
		conf:    conf,
		log:     conf.Logger,
		mem:     cache.NewMemory(conf.MemoryCacheSize),
		uploads: make(chan struct{}, conf.MaxUploads),
		buffers: newBudget(conf.BufferSize),
		readers: newReadGuard(),
	}
	if (conf.CachePartialOnly || !conf.CacheLargeWrite) && !conf.Writeback {
		bs := conf.BlockSize
		s.blockBufs = &sync.Pool{New: func() any { b := make([]byte, bs); return &b }}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.cache = s.mem
	if conf.memoryOnly() || conf.FetchToMemory {
		s.fetched = newFetchPool(conf.BlockSize, s.readers)
		s.mem.OnDrop(s.fetched.put)
	}
	s.prefetch = newPrefetcher(s, min(conf.BufferSize, conf.MemoryCacheSize/2), readaheadConcurrency, conf.Prefetch)
	return s
}

// New is Open for callers that cannot handle an error: when the disk
// cache cannot be opened it logs why and falls back to a memory cache
// without writeback (blocks are then uploaded before writes complete).
func New(obj object.Store, conf Config) *Store {
	s, err := Open(obj, conf)
	if err == nil {
		return s
	}
	conf.Defaults()
	conf.CacheDirs, conf.Writeback = nil, false
	s = newStore(obj, conf)
	s.log.Warn("block cache: using memory only", "err", err)
	return s
}

// Close stops the background uploads of staged blocks, which the next
// Store over the same cache directory resumes, and waits for them and for
// queued cache writes, or for ctx. Call FlushStaged first to upload
// everything.
func (s *Store) Close(ctx context.Context) error {
	if s.disk == nil {
		return nil
	}
	err := s.staged.stop(ctx)
	s.disk.Close()
	return err
}

// BlockSize returns the block size in bytes.
func (s *Store) BlockSize() int { return s.conf.BlockSize }

// blockLen returns the length of block index of a slice of size bytes.
func (s *Store) blockLen(size uint32, index int) int {
	bs := s.conf.BlockSize
	return min(bs, int(size)-index*bs)
}

func (s *Store) key(id uint64, size uint32, index int) string {
	return BlockKey(id, index, s.blockLen(size, index), s.conf.HashPrefix)
}

// putBlock stores block index of slice id: with writeback it stages the
// block durably and queues its upload, otherwise (or when staging is full
// or fails) it uploads it holding an upload slot. Every block but a
// slice's last is full, so the key follows from len(data). The caches keep
// a reference to data, which the writer never modifies once its upload has
// started.
func (s *Store) putBlock(ctx context.Context, id uint64, index int, data []byte) error {
	return s.put(ctx, id, index, data, s.cache, s.conf.Writeback)
}

// put is putBlock caching the uploaded block in c, and staging it only
// when stage is set.
func (s *Store) put(ctx context.Context, id uint64, index int, data []byte, c cache.Cache, stage bool) error {
	key := BlockKey(id, index, len(data), s.conf.HashPrefix)
	if stage && s.stage(key, data) {
		return nil
	}
	select {
	case s.uploads <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.uploads }()
	if err := s.obj.Put(ctx, key, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("upload block %s: %w", key, err)
	}
	if s.cachesWritten(len(data)) {
		c.Put(key, data)
	}
	return nil
}

// cachesWritten reports whether a written block of n bytes goes into the
// caches once stored (see Config.CachePartialOnly and CacheLargeWrite).
func (s *Store) cachesWritten(n int) bool {
	return !s.conf.CachePartialOnly && (n < s.conf.BlockSize || s.conf.CacheLargeWrite)
}

// block returns the whole of block index of slice id, from the caches
// (memory, then disk and its staged blocks) or the object store, which
// fills the caches. A cached block of the wrong length is dropped.
func (s *Store) block(ctx context.Context, id uint64, size uint32, index int) ([]byte, error) {
	b, _, err := s.fetchBlock(ctx, id, size, index)
	return b, err
}

// source is where a block read was served from.
type source int

const (
	fromMemory source = iota
	fromDisk
	fromObjects // the reader waited for the object store
	fromPeer    // the reader waited for a member of the cache group
)

// fetchResult is a block a fetch returns, with the pool generation of its
// buffer (see fetchPool.live) and where it came from.
type fetchResult struct {
	b   []byte
	gen uint64
	src source
}

// testHookFetched, when set by a test, is called after a fetched block is
// cached and before the readers waiting for it have it.
var testHookFetched func(s *Store, key string)

// fetchBlock is block, and tells where the block came from.
func (s *Store) fetchBlock(ctx context.Context, id uint64, size uint32, index int) ([]byte, source, error) {
	for {
		b, gen, src, err := s.fetchOnce(ctx, id, size, index)
		if err != nil || s.fetched == nil || s.fetched.live(b, gen) {
			return b, src, err
		}
		// The memory cache let go of the block before this read had it
		// from the fetch it joined, and its buffer may be reused: fetch
		// it again.
	}
}

// fetchOnce returns block index of slice id from the caches or fetches it,
// with the pool generation of a buffer fetched (see fetchPool.live).
func (s *Store) fetchOnce(ctx context.Context, id uint64, size uint32, index int) ([]byte, uint64, source, error) {
	key := s.key(id, size, index)
	want := s.blockLen(size, index)
	if b, ok := s.mem.Get(key); ok && len(b) == want {
		return b, 0, fromMemory, nil
	}
	if b, ok := s.cached(key, want); ok {
		return b, 0, fromDisk, nil // or memory, filled by a fetch just now
	}
	if p := s.peersFor(ctx); p != nil && p.Remote(key) {
		if f, ok := s.fetchFromPeer(ctx, p, key, want); ok {
			return f.b, f.gen, f.src, nil
		}
		// The owner is down, or does not have it: object storage.
	}
	// The fetch serves every reader that joins it, so it must not end
	// with the context of the one that started it (an interrupted
	// request): it runs detached, bounded by fetchTimeout, and each
	// reader waits for it only as long as its own context lasts.
	ch := s.fetches.DoChan(key, func() (any, error) {
		if b, ok := s.cached(key, want); ok {
			return fetchResult{b, 0, fromDisk}, nil
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
		defer cancel()
		r, err := s.obj.Get(ctx, key, 0, -1)
		if err != nil {
			if f, ok := s.findAtPeers(ctx, key, want, err); ok {
				return f, nil
			}
			return nil, fmt.Errorf("read block %s: %w", key, err)
		}
		defer r.Close()
		b, gen := s.fetchBuf(want)
		if _, err := io.ReadFull(r, b); err != nil {
			s.dropFetchBuf(b)
			return nil, fmt.Errorf("read block %s: short or failed read: %w", key, err)
		}
		if s.fetched != nil {
			s.mem.Put(key, b) // the disk cache never gets pooled buffers
		} else {
			s.cache.Put(key, b)
		}
		if testHookFetched != nil {
			testHookFetched(s, key)
		}
		return fetchResult{b, gen, fromObjects}, nil
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, 0, fromObjects, res.Err
		}
		f := res.Val.(fetchResult)
		return f.b, f.gen, f.src, nil
	case <-ctx.Done():
		return nil, 0, fromObjects, fmt.Errorf("read block %s: %w", key, ctx.Err())
	}
}

// findAtPeers looks for block key in the caches of the cache group when
// object storage does not have it (getErr): a member's writeback may
// have staged it, committed and not uploaded it yet. The block found is
// cached here as if fetched.
func (s *Store) findAtPeers(ctx context.Context, key string, want int, getErr error) (fetchResult, bool) {
	// An owner serving a peer looks too: Find asks for cached blocks
	// only, which no member fetches.
	p := s.peers
	if p == nil || !errors.Is(getErr, object.ErrNotFound) {
		return fetchResult{}, false
	}
	b, gen := s.fetchBuf(want)
	if !p.Find(ctx, key, b) {
		s.dropFetchBuf(b)
		return fetchResult{}, false
	}
	if s.fetched != nil {
		s.mem.Put(key, b)
	} else {
		s.cache.Put(key, b)
	}
	return fetchResult{b, gen, fromPeer}, true
}

// cached returns block key from the caches when it has the expected
// length; a block of another length is removed.
func (s *Store) cached(key string, want int) ([]byte, bool) {
	b, ok := s.cache.Get(key)
	if !ok {
		return nil, false
	}
	if len(b) != want {
		s.log.Warn("block cache: dropping block of wrong length", "key", key, "len", len(b), "want", want)
		s.cache.Remove(key)
		return nil, false
	}
	return b, true
}

// ReadSlice fills p with the bytes of slice id (size bytes long) starting
// at offset off. A deletion of the slice through this Store waits for it.
func (s *Store) ReadSlice(ctx context.Context, id uint64, size uint32, off uint32, p []byte) error {
	defer s.readers.leave(s.readers.enter())
	return s.readSlice(ctx, id, size, off, p, nil)
}

// readSlice is ReadSlice without the guard, gathering pieces into v when v
// is not nil (see ReadFileVec).
func (s *Store) readSlice(ctx context.Context, id uint64, size uint32, off uint32, p []byte, v *iovec) error {
	if uint64(off)+uint64(len(p)) > uint64(size) {
		return fmt.Errorf("read of slice %d past its end (%d+%d > %d)", id, off, len(p), size)
	}
	bs := s.conf.BlockSize
	for len(p) > 0 {
		index := int(off) / bs
		inBlock := int(off) % bs
		n := min(len(p), s.blockLen(size, index)-inBlock)
		if err := s.readBlock(ctx, id, size, index, inBlock, p[:n], v); err != nil {
			return err
		}
		p = p[n:]
		off += uint32(n)
	}
	return nil
}

// Delete removes all blocks of slice id of size bytes from the object
// store, the caches and staging. A staged block's upload is cancelled and
// waited for first, so it cannot store the block after the deletion.
// Missing blocks are not an error, so a deletion may be repeated. It
// first waits for the reads through this Store that began before it (see
// readGuard), so a read of this mount never finds a block deleted under
// it.
func (s *Store) Delete(ctx context.Context, id uint64, size uint32) error {
	if err := s.readers.wait(ctx); err != nil {
		return fmt.Errorf("delete slice %d: wait for reads: %w", id, err)
	}
	n := (int(size) + s.conf.BlockSize - 1) / s.conf.BlockSize
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.conf.MaxUploads)
	for i := 0; i < n; i++ {
		key := s.key(id, size, i)
		g.Go(func() error {
			if s.disk != nil {
				if err := s.staged.cancelKey(gctx, key); err != nil {
					return fmt.Errorf("delete block %s: %w", key, err)
				}
				s.disk.Unstage(key)
			}
			s.cache.Remove(key)
			if err := s.obj.Delete(gctx, key); err != nil && !errors.Is(err, object.ErrNotFound) {
				return fmt.Errorf("delete block %s: %w", key, err)
			}
			return nil
		})
	}
	return g.Wait()
}
