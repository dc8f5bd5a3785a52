package cache

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicefs/sluice/internal/localdir"
)

// DiskConfig configures a Disk.
type DiskConfig struct {
	// Dirs are the cache directories; blocks are spread over them by a
	// hash of their key. Each is created when missing.
	Dirs []string
	// VolumeUUID names the volume's subdirectory in each cache directory.
	VolumeUUID string
	// Capacity bounds the bytes of cached files, split evenly over Dirs.
	Capacity int64
	// StagingLimit bounds the bytes of staged files, split evenly over
	// Dirs; Stage returns ErrStagingFull beyond it.
	StagingLimit int64
	// FreeSpaceRatio is the share of each directory's file system kept
	// free: below it blocks are evicted and not cached, and Stage refuses
	// blocks.
	FreeSpaceRatio float64
	// OpenFiles bounds the cached files kept open for range reads, split
	// evenly over Dirs: 0 means DefaultOpenFiles, or a quarter of the
	// process's limit of open files when that is lower; a negative number
	// keeps none open.
	OpenFiles int
	// Logger receives warnings about failing cache IO; nil discards them.
	Logger *slog.Logger
	// Statfs reports the bytes available and the total size of the file
	// system holding path; nil uses statfs(2). Tests inject numbers here.
	Statfs func(path string) (avail, total uint64, err error)
}

// DefaultOpenFiles is the number of cached files a Disk keeps open when
// DiskConfig.OpenFiles is zero. Each holds a file descriptor and the page
// sums of its block (4 KiB for 4 MiB).
const DefaultOpenFiles = 1024

// Validate checks the configuration.
func (c *DiskConfig) Validate() error {
	switch {
	case len(c.Dirs) == 0:
		return errors.New("disk cache: no directory")
	case c.VolumeUUID == "" || strings.ContainsAny(c.VolumeUUID, `/\`) || c.VolumeUUID == "." || c.VolumeUUID == "..":
		return fmt.Errorf("disk cache: bad volume UUID %q", c.VolumeUUID)
	case c.Capacity < 0 || c.StagingLimit < 0:
		return fmt.Errorf("disk cache: negative capacity %d or staging limit %d", c.Capacity, c.StagingLimit)
	case c.FreeSpaceRatio < 0 || c.FreeSpaceRatio >= 1:
		return fmt.Errorf("disk cache: free-space ratio %v is not in [0, 1)", c.FreeSpaceRatio)
	}
	for _, d := range c.Dirs {
		if d == "" {
			return errors.New("disk cache: empty directory name")
		}
	}
	return nil
}

// Disk caches blocks as files under local directories and stages blocks
// for writeback (see the package documentation for the layout). Writes to
// the cache happen in the background: Put queues the block, and a block
// that cannot be queued is dropped.
type Disk struct {
	conf     DiskConfig
	log      *slog.Logger
	dirs     []*diskDir
	stop     chan struct{}
	closed   atomic.Bool
	wg       sync.WaitGroup // writers and scanners
	lastWarn atomic.Int64   // unix nanoseconds of the last warning
	counts   counters       // atomic: evictions
}

// diskDir is one cache directory.
type diskDir struct {
	d                      *Disk
	raw, staging           string
	capacity, stagingLimit int64
	writes                 chan writeReq // pending writes and flushes
	scanned                chan struct{} // closed once raw has been indexed

	mu struct {
		sync.Mutex
		lru        *lru
		open       *openFiles        // handles of indexed keys only
		pending    map[string][]byte // queued by Put, not yet written
		staged     map[string]int64  // staged key → file size
		stagedUsed int64
		// gone records keys dropped from the index while the restart
		// scan runs, so that the scan does not add them back; nil
		// after the scan.
		gone map[string]bool
	}
}

// writeQueue bounds the blocks waiting to be written per directory.
const writeQueue = 16

// writeReq asks a directory's writer to write the pending block key, or,
// with done set, to close done: every earlier request has been handled.
type writeReq struct {
	key  string
	done chan struct{}
}

// NewDisk opens the cache directories, creating them when needed, indexes
// the staged blocks they hold, and starts indexing cached blocks in the
// background. Close stops it.
func NewDisk(conf DiskConfig) (*Disk, error) {
	if err := conf.Validate(); err != nil {
		return nil, err
	}
	if conf.Statfs == nil {
		conf.Statfs = statfs
	}
	d := &Disk{conf: conf, log: conf.Logger, stop: make(chan struct{})}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	n := int64(len(conf.Dirs))
	if conf.OpenFiles == 0 {
		conf.OpenFiles = defaultOpenFiles()
	}
	openPerDir := 0
	if conf.OpenFiles > 0 {
		openPerDir = max(1, conf.OpenFiles/len(conf.Dirs))
	}
	for _, dir := range conf.Dirs {
		dd := &diskDir{
			d:            d,
			raw:          filepath.Join(dir, conf.VolumeUUID, "raw"),
			staging:      filepath.Join(dir, conf.VolumeUUID, "rawstaging"),
			capacity:     conf.Capacity / n,
			stagingLimit: conf.StagingLimit / n,
			writes:       make(chan writeReq, writeQueue),
			scanned:      make(chan struct{}),
		}
		dd.mu.lru = newLRU()
		dd.mu.open = newOpenFiles(openPerDir)
		dd.mu.pending = map[string][]byte{}
		dd.mu.staged = map[string]int64{}
		dd.mu.gone = map[string]bool{}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("disk cache: %w", err)
		}
		if err := os.MkdirAll(dd.raw, 0o700); err != nil {
			return nil, fmt.Errorf("disk cache: %w", err)
		}
		if err := mkdirSync(dir, dd.staging); err != nil {
			return nil, fmt.Errorf("disk cache: create %s: %w", dd.staging, err)
		}
		if err := dd.scanStaging(); err != nil {
			return nil, fmt.Errorf("disk cache: %w", err)
		}
		d.dirs = append(d.dirs, dd)
	}
	for _, dd := range d.dirs {
		d.wg.Add(2)
		go dd.writeLoop()
		go dd.scan()
	}
	return d, nil
}

// Close stops the background scan, writes the blocks still queued, waits
// for both, and closes the files kept open for reads (those in use close
// when their reads end). Later Puts and Stages are dropped or refused.
func (d *Disk) Close() {
	if d.closed.Swap(true) {
		return
	}
	close(d.stop)
	d.wg.Wait()
	for _, dd := range d.dirs {
		dd.mu.Lock()
		dd.mu.open.close()
		dd.mu.Unlock()
	}
}

// dir returns the directory of key.
func (d *Disk) dir(key string) *diskDir {
	if len(d.dirs) == 1 {
		return d.dirs[0]
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	return d.dirs[h.Sum32()%uint32(len(d.dirs))]
}

// warn logs a warning about cache IO, at most every 30 seconds, and at
// debug level in between: a failing disk must not flood the log.
func (d *Disk) warn(msg string, args ...any) {
	now := time.Now().UnixNano()
	last := d.lastWarn.Load()
	if now-last > int64(30*time.Second) && d.lastWarn.CompareAndSwap(last, now) {
		d.log.Warn(msg, args...)
		return
	}
	d.log.Debug(msg, args...)
}

// validKey reports whether key can name a cache file.
func validKey(key string) bool {
	return fs.ValidPath(key) && key != "." && !strings.Contains(key, ".tmp.")
}

// Get returns the cached block of key: a block still queued for writing,
// a cached file, or a staged one. A file that fails its checksums is
// removed and reported as a miss.
func (d *Disk) Get(key string) ([]byte, bool) {
	if !validKey(key) {
		return nil, false
	}
	dd := d.dir(key)
	dd.mu.Lock()
	if b, ok := dd.mu.pending[key]; ok {
		dd.mu.Unlock()
		return b, true
	}
	indexed := dd.mu.lru.touch(key) != 0
	_, staged := dd.mu.staged[key]
	dd.mu.Unlock()
	if indexed || dd.scanning() {
		b, err := readFile(dd.raw, key)
		if err == nil {
			if !indexed {
				dd.index(key, encodedSize(len(b)))
			}
			return b, true
		}
		dd.drop(key, err)
	}
	if staged {
		b, err := readFile(dd.staging, key)
		if err == nil {
			return b, true
		}
		if !errors.Is(err, fs.ErrNotExist) { // a missing file is being staged or uploaded
			d.warn("disk cache: cannot read staged block", "key", key, "dir", dd.staging, "err", err)
		}
	}
	return nil, false
}

// ReadAt fills p with the bytes at off of the cached block of key, reading
// and checking only the pages p covers. It reports false on a miss, when
// the range is outside the block, or when the file fails its checksums
// (it is then removed); p may then have been written to. Cached files
// stay open between reads (see DiskConfig.OpenFiles), so that a hit costs
// one pread and the checksums of the pages read.
func (d *Disk) ReadAt(key string, p []byte, off int64) bool {
	if !validKey(key) {
		return false
	}
	dd := d.dir(key)
	dd.mu.Lock()
	if b, ok := dd.mu.pending[key]; ok {
		dd.mu.Unlock()
		if off < 0 || off+int64(len(p)) > int64(len(b)) {
			return false
		}
		copy(p, b[off:])
		return true
	}
	version := dd.mu.lru.touch(key)
	var h *handle
	if version != 0 {
		h = dd.mu.open.get(key)
	}
	_, staged := dd.mu.staged[key]
	dd.mu.Unlock()
	if version != 0 || dd.scanning() {
		err := dd.readRaw(key, h, version, p, off)
		if err == nil {
			return true
		}
		if !errors.Is(err, errRange) {
			dd.drop(key, err)
		}
	}
	if staged {
		if err := readFileRange(dd.staging, key, p, off); err == nil {
			return true
		}
	}
	return false
}

// readRaw fills p from off in the cached file of key through h, a handle
// the caller holds a reference to, or, when h is nil, by opening the file.
// version is that of key in the index when the caller looked, 0 when it
// was not indexed. A file opened is kept open if its key still has that
// version; one found outside the index during the restart scan is indexed
// first.
func (dd *diskDir) readRaw(key string, h *handle, version uint64, p []byte, off int64) error {
	if h == nil {
		var err error
		if h, err = openHandle(dd.raw, key); err != nil {
			return err
		}
		dd.mu.Lock()
		if version == 0 {
			version = dd.mu.lru.add(key, h.size(), false)
		}
		// Checked under the lock that Remove, drop and eviction hold to
		// forget the key and its handle: the file of a key that left the
		// index meanwhile, and maybe came back with a new file, is not
		// kept open.
		if dd.mu.lru.version(key) == version {
			dd.mu.open.add(h)
		}
		dd.mu.Unlock()
	}
	defer h.release()
	return h.readAt(p, off)
}

// Put queues data to be written as the cached block of key. It drops the
// block when the queue is full or the cache is closed; blocks are
// immutable, so a key already cached or staged is left alone.
func (d *Disk) Put(key string, data []byte) { d.put(key, data, false) }

// PutWait is Put, but waits for room in the queue instead of dropping the
// block, for work that asked for the block to be cached (warmup). It
// still drops it when the cache closes.
func (d *Disk) PutWait(key string, data []byte) { d.put(key, data, true) }

func (d *Disk) put(key string, data []byte, wait bool) {
	if d.closed.Load() || !validKey(key) {
		return
	}
	dd := d.dir(key)
	dd.mu.Lock()
	_, staged := dd.mu.staged[key]
	if _, ok := dd.mu.pending[key]; ok || staged || dd.mu.lru.has(key) {
		dd.mu.Unlock()
		return
	}
	dd.mu.pending[key] = data
	dd.mu.Unlock()
	req := writeReq{key: key}
	if wait {
		select {
		case dd.writes <- req:
			return
		case <-d.stop:
		}
	} else {
		select {
		case dd.writes <- req:
			return
		default: // the queue is full
		}
	}
	dd.mu.Lock()
	delete(dd.mu.pending, key)
	dd.mu.Unlock()
}

// Remove drops the cached block of key (not a staged one: see Unstage).
func (d *Disk) Remove(key string) {
	if !validKey(key) {
		return
	}
	dd := d.dir(key)
	dd.mu.Lock()
	delete(dd.mu.pending, key)
	dd.forgetLocked(key)
	dd.mu.Unlock()
	if err := os.Remove(filepath.Join(dd.raw, filepath.FromSlash(key))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.warn("disk cache: cannot remove block", "key", key, "dir", dd.raw, "err", err)
	}
}

// Used returns the bytes of cached (not staged) files indexed so far.
func (d *Disk) Used() int64 {
	var n int64
	for _, dd := range d.dirs {
		dd.mu.Lock()
		n += dd.mu.lru.used
		dd.mu.Unlock()
	}
	return n
}

// Stats returns the cache's counters and the bytes and number of the
// cached files indexed so far.
func (d *Disk) Stats() Stats {
	var used, blocks int64
	for _, dd := range d.dirs {
		dd.mu.Lock()
		used += dd.mu.lru.used
		blocks += int64(len(dd.mu.lru.index))
		dd.mu.Unlock()
	}
	return d.counts.stats(used, blocks)
}

// Flush waits until the blocks queued by earlier Puts are written (or
// dropped). It returns at once after Close, which writes them itself.
func (d *Disk) Flush() {
	for _, dd := range d.dirs {
		done := make(chan struct{})
		select {
		case dd.writes <- writeReq{done: done}:
		case <-d.stop:
			return
		}
		select {
		case <-done:
		case <-d.stop:
			return
		}
	}
}

// WaitScanned blocks until every directory has been indexed after start,
// or the cache is closed.
func (d *Disk) WaitScanned() {
	for _, dd := range d.dirs {
		<-dd.scanned
	}
}

func (dd *diskDir) scanning() bool {
	select {
	case <-dd.scanned:
		return false
	default:
		return true
	}
}

// forgetLocked drops key and its open file from the index.
func (dd *diskDir) forgetLocked(key string) {
	dd.mu.lru.remove(key)
	dd.mu.open.drop(key)
	if dd.mu.gone != nil {
		dd.mu.gone[key] = true
	}
}

// evictLocked drops least recently used entries of at least n bytes, and
// their open files, from the index and returns their keys; the caller
// removes their files.
func (dd *diskDir) evictLocked(n int64) []string {
	keys := dd.mu.lru.evict(n)
	dd.d.counts.evictions.Add(uint64(len(keys)))
	for _, key := range keys {
		dd.mu.open.drop(key)
		if dd.mu.gone != nil {
			dd.mu.gone[key] = true
		}
	}
	return keys
}

// index records a file found on disk outside the scan.
func (dd *diskDir) index(key string, size int64) {
	dd.mu.Lock()
	dd.mu.lru.add(key, size, false)
	dd.mu.Unlock()
}

// drop handles a failed read of the cached file of key: a missing file
// leaves the index, a corrupt or unreadable one is removed too.
func (dd *diskDir) drop(key string, err error) {
	dd.mu.Lock()
	dd.forgetLocked(key)
	dd.mu.Unlock()
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	dd.d.warn("disk cache: dropping unreadable block", "key", key, "dir", dd.raw, "err", err)
	if err := os.Remove(filepath.Join(dd.raw, filepath.FromSlash(key))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		dd.d.warn("disk cache: cannot remove block", "key", key, "dir", dd.raw, "err", err)
	}
}

// space returns the state of the directory's file system, zero when it
// cannot be read.
func (dd *diskDir) space() space {
	avail, total, err := dd.d.conf.Statfs(dd.raw)
	if err != nil {
		dd.d.warn("disk cache: cannot read free space", "dir", dd.raw, "err", err)
		return space{}
	}
	return space{avail: avail, total: total}
}

// removeFiles deletes evicted cache files.
func (dd *diskDir) removeFiles(keys []string) {
	for _, key := range keys {
		if err := os.Remove(filepath.Join(dd.raw, filepath.FromSlash(key))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			dd.d.warn("disk cache: cannot remove evicted block", "key", key, "dir", dd.raw, "err", err)
		}
	}
}

// spaceCheck is how often a directory checks its file system's free
// space when it writes nothing, to give space back to other users.
const spaceCheck = 10 * time.Second

// writeLoop writes queued blocks and checks free space until the cache
// closes, then writes what is still queued.
func (dd *diskDir) writeLoop() {
	defer dd.d.wg.Done()
	tick := time.NewTicker(spaceCheck)
	defer tick.Stop()
	for {
		select {
		case req := <-dd.writes:
			dd.handle(req)
		case <-tick.C:
			dd.checkSpace()
		case <-dd.d.stop:
			for {
				select {
				case req := <-dd.writes:
					dd.handle(req)
				default:
					return
				}
			}
		}
	}
}

func (dd *diskDir) handle(req writeReq) {
	if req.done != nil {
		close(req.done)
		return
	}
	dd.write(req.key)
}

// checkSpace evicts cached blocks while the file system is below its
// free-space floor.
func (dd *diskDir) checkSpace() {
	sp := dd.space()
	dd.mu.Lock()
	evict, _ := plan(dd.mu.lru.used, dd.capacity, 0, sp, dd.d.conf.FreeSpaceRatio)
	victims := dd.evictLocked(evict)
	dd.mu.Unlock()
	if len(victims) > 0 {
		dd.d.log.Info("disk cache: evicted blocks to keep the free-space ratio", "dir", dd.raw, "blocks", len(victims),
			"avail", sp.avail, "total", sp.total, "ratio", dd.d.conf.FreeSpaceRatio)
	}
	dd.removeFiles(victims)
}

// write stores the queued block of key, evicting to make room first.
func (dd *diskDir) write(key string) {
	dd.mu.Lock()
	data, ok := dd.mu.pending[key]
	dd.mu.Unlock()
	if !ok {
		return // removed meanwhile
	}
	size := encodedSize(len(data))
	sp := dd.space()
	dd.mu.Lock()
	evict, store := plan(dd.mu.lru.used, dd.capacity, size, sp, dd.d.conf.FreeSpaceRatio)
	victims := dd.evictLocked(evict)
	dd.mu.Unlock()
	dd.removeFiles(victims)
	var tmp string
	var err error
	if store {
		tmp, err = writeTemp(dd.raw, key, data, false)
		if err != nil {
			dd.d.warn("disk cache: cannot write block", "key", key, "dir", dd.raw, "err", err)
		}
	}
	dd.mu.Lock()
	defer dd.mu.Unlock()
	_, wanted := dd.mu.pending[key]
	delete(dd.mu.pending, key)
	if tmp == "" {
		return
	}
	// Rename under the lock, so a Remove of key cannot come between the
	// check and the rename and leave the file behind.
	if wanted {
		dd.mu.open.drop(key) // of a file the restart scan found, about to be replaced
		if err := os.Rename(tmp, filepath.Join(dd.raw, filepath.FromSlash(key))); err == nil {
			dd.mu.lru.add(key, size, false)
			return
		}
	}
	os.Remove(tmp)
}

// scan indexes the cached files of the directory, oldest modification
// last, and removes temporary files that a crash left behind.
func (dd *diskDir) scan() {
	defer dd.d.wg.Done()
	defer close(dd.scanned)
	type found struct {
		key   string
		size  int64
		mtime time.Time
	}
	var all []found
	filepath.WalkDir(dd.raw, func(path string, de fs.DirEntry, err error) error {
		select {
		case <-dd.d.stop:
			return filepath.SkipAll
		default:
		}
		if err != nil || de.IsDir() {
			return nil
		}
		info, err := de.Info()
		if err != nil {
			return nil
		}
		if strings.Contains(de.Name(), ".tmp.") {
			removeStaleTemp(path, info)
			return nil
		}
		rel, err := filepath.Rel(dd.raw, path)
		if err != nil {
			return nil
		}
		all = append(all, found{filepath.ToSlash(rel), info.Size(), info.ModTime()})
		return nil
	})
	sort.Slice(all, func(i, j int) bool { return all[i].mtime.After(all[j].mtime) })
	dd.mu.Lock()
	for _, f := range all {
		if !dd.mu.lru.has(f.key) && !dd.mu.gone[f.key] {
			dd.mu.lru.add(f.key, f.size, true)
		}
	}
	dd.mu.gone = nil
	victims := dd.evictLocked(dd.mu.lru.used - dd.capacity) // the capacity may have shrunk
	dd.mu.Unlock()
	dd.removeFiles(victims)
}

// staleTemp is the age after which a temporary file is a leftover of a
// crash: a live writer renames its file within moments.
const staleTemp = time.Minute

// removeStaleTemp removes the temporary file at path if it is stale.
func removeStaleTemp(path string, info fs.FileInfo) {
	if time.Since(info.ModTime()) > staleTemp {
		os.Remove(path)
	}
}

// readFile reads and checks the file of key under root.
func readFile(root, key string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(key)))
	if err != nil {
		return nil, err
	}
	return decode(key, b)
}

// readFileRange fills p from off in the file of key under root, checking
// its trailer and the pages it reads.
func readFileRange(root, key string, p []byte, off int64) error {
	h, err := openHandle(root, key)
	if err != nil {
		return err
	}
	defer h.release()
	return h.readAt(p, off)
}

// writeTemp writes data and its trailer to a temporary file next to the
// file of key under root, creating directories, and returns its name.
// With durable set the file and the directories created are fsync'd.
func writeTemp(root, key string, data []byte, durable bool) (string, error) {
	path := filepath.Join(root, filepath.FromSlash(key))
	dir := filepath.Dir(path)
	var err error
	if durable {
		err = mkdirSync(root, dir)
	} else {
		err = localdir.MkdirAll(root, dir, 0o700)
	}
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp.*")
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		_, err = f.Write(trailer(key, data))
	}
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// mkdirSync creates dir and its missing parents below root, fsyncing the
// parent of each directory it creates so that the new entries survive a
// crash.
func mkdirSync(root, dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return err
	}
	cur := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		next := filepath.Join(cur, part)
		if cur != root {
			localdir.Spread(cur)
		}
		if err := os.Mkdir(next, 0o700); err == nil {
			if err := syncDir(cur); err != nil {
				return err
			}
		} else if !errors.Is(err, fs.ErrExist) {
			return err
		}
		cur = next
	}
	return nil
}

// syncDir fsyncs a directory, making the entries in it durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
