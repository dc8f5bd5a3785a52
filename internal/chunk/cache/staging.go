package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sluicefs/sluice/internal/localdir"
)

// ErrStagingFull reports that the staging area has reached its byte limit
// or its file system's free-space floor; the caller uploads the block
// itself instead.
var ErrStagingFull = errors.New("writeback staging full")

// ErrCorrupt reports a staged block whose file fails its checksums; its
// data is lost.
var ErrCorrupt = errCorrupt

// Stage writes data durably as the staged block of key: when Stage
// returns nil, the file and its directory entry have been fsync'd, so the
// block survives a crash and is listed by Staged after a restart. It
// returns an error wrapping ErrStagingFull when the staging limit or the
// free-space floor (after evicting cached blocks) leaves no room.
func (d *Disk) Stage(key string, data []byte) error {
	if d.closed.Load() {
		return errors.New("stage block: disk cache closed")
	}
	if !validKey(key) {
		return fmt.Errorf("stage block: bad key %q", key)
	}
	dd := d.dir(key)
	size := encodedSize(len(data))
	reserved, err := dd.reserve(key, size)
	if err != nil {
		return err
	}
	tmp, err := writeTemp(dd.staging, key, data, true)
	if err == nil {
		path := filepath.Join(dd.staging, filepath.FromSlash(key))
		if err = os.Rename(tmp, path); err != nil {
			os.Remove(tmp)
		} else {
			err = syncDir(filepath.Dir(path))
		}
	}
	if err != nil {
		if reserved {
			dd.mu.Lock()
			dd.unstageLocked(key)
			dd.mu.Unlock()
		}
		return fmt.Errorf("stage block %s in %s: %w", key, dd.staging, err)
	}
	return nil
}

// reserve accounts size bytes of staging for key, evicting cached blocks
// when the file system is below its free-space floor. It reports false
// when key is accounted already: blocks are immutable, so staging one
// again rewrites the same bytes.
func (dd *diskDir) reserve(key string, size int64) (bool, error) {
	sp := dd.space()
	ratio := dd.d.conf.FreeSpaceRatio
	dd.mu.Lock()
	if _, ok := dd.mu.staged[key]; ok {
		dd.mu.Unlock()
		return false, nil
	}
	if used := dd.mu.stagedUsed; used+size > dd.stagingLimit {
		dd.mu.Unlock()
		return false, fmt.Errorf("%s holds %d bytes, limit %d: %w", dd.staging, used, dd.stagingLimit, ErrStagingFull)
	}
	var victims []string
	if overFloor(sp, size, ratio) {
		short := int64(ratio*float64(sp.total)) - (int64(sp.avail) - size)
		if short > dd.mu.lru.used {
			dd.mu.Unlock()
			return false, fmt.Errorf("%s: %d of %d bytes free, below the free-space ratio %v: %w",
				dd.staging, sp.avail, sp.total, ratio, ErrStagingFull)
		}
		victims = dd.evictLocked(short)
	}
	dd.mu.staged[key] = size
	dd.mu.stagedUsed += size
	dd.mu.Unlock()
	dd.removeFiles(victims)
	return true, nil
}

func (dd *diskDir) unstageLocked(key string) {
	if size, ok := dd.mu.staged[key]; ok {
		dd.mu.stagedUsed -= size
		delete(dd.mu.staged, key)
	}
}

// Staged returns the keys of all staged blocks, sorted: right after
// NewDisk, those a previous run left to upload.
func (d *Disk) Staged() []string {
	var keys []string
	for _, dd := range d.dirs {
		dd.mu.Lock()
		for key := range dd.mu.staged {
			keys = append(keys, key)
		}
		dd.mu.Unlock()
	}
	sort.Strings(keys)
	return keys
}

// StagedUsed returns the bytes of staged files.
func (d *Disk) StagedUsed() int64 {
	var n int64
	for _, dd := range d.dirs {
		dd.mu.Lock()
		n += dd.mu.stagedUsed
		dd.mu.Unlock()
	}
	return n
}

// ReadStaged returns the data of the staged block of key. A file that
// fails its checksums is removed from staging and reported with an error
// wrapping ErrCorrupt; a missing one with an error wrapping
// fs.ErrNotExist.
func (d *Disk) ReadStaged(key string) ([]byte, error) {
	if !validKey(key) {
		return nil, fmt.Errorf("read staged block: bad key %q: %w", key, fs.ErrNotExist)
	}
	dd := d.dir(key)
	b, err := readFile(dd.staging, key)
	if err == nil {
		return b, nil
	}
	if errors.Is(err, errCorrupt) {
		d.Unstage(key)
	}
	return nil, fmt.Errorf("read staged block %s in %s: %w", key, dd.staging, err)
}

// Unstage removes the staged block of key, e.g. when its slice is deleted
// before it was uploaded.
func (d *Disk) Unstage(key string) {
	if !validKey(key) {
		return
	}
	dd := d.dir(key)
	dd.mu.Lock()
	dd.unstageLocked(key)
	dd.mu.Unlock()
	if err := os.Remove(filepath.Join(dd.staging, filepath.FromSlash(key))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.warn("disk cache: cannot remove staged block", "key", key, "dir", dd.staging, "err", err)
	}
}

// Uploaded reports that the staged block of key is in object storage: its
// file moves into the cache, since the block was just written and is
// likely read soon, or is removed when the cache has no room.
func (d *Disk) Uploaded(key string) {
	if !validKey(key) {
		return
	}
	dd := d.dir(key)
	src := filepath.Join(dd.staging, filepath.FromSlash(key))
	dst := filepath.Join(dd.raw, filepath.FromSlash(key))
	dd.mu.Lock()
	size, ok := dd.mu.staged[key]
	dd.mu.Unlock()
	if !ok {
		return
	}
	sp := dd.space()
	dd.mu.Lock()
	evict, store := plan(dd.mu.lru.used, dd.capacity, size, sp, d.conf.FreeSpaceRatio)
	victims := dd.evictLocked(evict)
	dd.mu.Unlock()
	dd.removeFiles(victims)
	if store && localdir.MkdirAll(dd.raw, filepath.Dir(dst), 0o700) == nil && os.Rename(src, dst) == nil {
		dd.mu.Lock()
		dd.unstageLocked(key)
		dd.mu.open.drop(key) // of a cached file just replaced
		dd.mu.lru.add(key, size, false)
		dd.mu.Unlock()
		return
	}
	d.Unstage(key)
}

// scanStaging indexes the staged files of the directory and removes
// temporary files a crash left behind. A staged file is complete: it was
// renamed into place only after being fsync'd.
func (dd *diskDir) scanStaging() error {
	err := filepath.WalkDir(dd.staging, func(path string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() {
			return nil
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		if strings.Contains(de.Name(), ".tmp.") {
			removeStaleTemp(path, info)
			return nil
		}
		rel, err := filepath.Rel(dd.staging, path)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		dd.mu.staged[key] = info.Size()
		dd.mu.stagedUsed += info.Size()
		return nil
	})
	if err != nil {
		return fmt.Errorf("scan staged blocks in %s: %w", dd.staging, err)
	}
	return nil
}
