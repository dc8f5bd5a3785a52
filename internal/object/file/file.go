// Package file implements object.Store on a local directory.
//
// A key maps to the path of the same name under the root directory, so a
// volume's blocks are plain files (dir/vol/chunks/0/0/1_0_4194304) that
// ordinary tools can inspect. Because a path cannot be both a file and a
// directory, the keys "a/b" and "a/b/c" cannot exist at the same time; the
// second Put fails. Keys with empty, "." or ".." elements, a leading "/", or a
// last element that looks like a temporary file (".*.tmp") are rejected.
//
// Put is atomic: it writes a temporary file (".<name>.<random>.tmp") in the
// target's directory, syncs it and renames it over the target, so a reader
// sees either the old or the new object, never a partial one. List skips
// temporary files left behind by a crash. Under object.DeferSync a Put
// skips the sync and Sync makes such Puts durable together, with one
// syncfs(2) of the directory's file system; a large object's Put writes
// it with direct I/O, from the caller's memory to the disk, where the file
// system allows (see direct.go).
//
// Errors follow the object package convention: a missing key yields an error
// wrapping object.ErrNotFound.
package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sluicefs/sluice/internal/localdir"
	"github.com/sluicefs/sluice/internal/object"
)

// Store is an object.Store backed by a local directory.
type Store struct {
	dir string // absolute and clean, without a trailing separator unless it is "/"
	// deferred counts Puts that skipped their sync; synced is the count
	// the last completed Sync covered.
	deferred, synced atomic.Uint64
	// dirs is held for reading while a Put makes the directories of its
	// file and creates the file there, and for writing while a Delete
	// removes the directories it left empty: so within one process a Put
	// never loses its directories between making them and using them.
	// (Another process's deletes are met by create's retries.)
	dirs sync.RWMutex
	// noDirect is set once the file system refused direct I/O (see
	// direct.go).
	noDirect atomic.Bool
}

var (
	_ object.Store   = (*Store)(nil)
	_ object.Creator = (*Store)(nil)
	_ object.Syncer  = (*Store)(nil)
)

// New returns a Store rooted at dir, made absolute. The directory need not
// exist yet; Create makes it.
func New(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("file: empty directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("file: resolve %q: %w", dir, err)
	}
	return &Store{dir: abs}, nil
}

// String returns "file://" followed by the root directory and a slash.
func (s *Store) String() string {
	return "file://" + strings.TrimSuffix(s.dir, "/") + "/"
}

// Create makes the root directory (and its parents) with mode 0755.
func (s *Store) Create(ctx context.Context) error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("%s: create: %w", s, err)
	}
	return nil
}

// path validates key and returns its file path.
func (s *Store) path(key string) (string, error) {
	if key == "" {
		return "", errors.New("empty key")
	}
	if strings.HasPrefix(key, "/") {
		return "", fmt.Errorf("key %q starts with /", key)
	}
	elems := strings.Split(key, "/")
	for _, e := range elems {
		if e == "" || e == "." || e == ".." {
			return "", fmt.Errorf("key %q has an empty, . or .. element", key)
		}
	}
	if isTemp(elems[len(elems)-1]) {
		return "", fmt.Errorf("key %q looks like a temporary file", key)
	}
	return filepath.Join(s.dir, filepath.FromSlash(key)), nil
}

// isTemp reports whether a file name is one of Put's temporary files.
func isTemp(name string) bool {
	return len(name) > len("..tmp") && strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp")
}

// isNotFound reports whether err means the path does not exist, including
// the case where a parent is a regular file.
func isNotFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// Get returns limit bytes of key from off; a negative limit reads to the end.
func (s *Store) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, fmt.Errorf("%s: get: %w", s, err)
	}
	if off < 0 {
		return nil, fmt.Errorf("%s: get %q: negative offset %d", s, key, off)
	}
	f, err := openFile(p, os.O_RDONLY, 0)
	if isNotFound(err) {
		return nil, fmt.Errorf("%s: get %q: %w", s, key, object.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: get: %w", s, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: get: %w", s, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: get %q: %w", s, key, object.ErrNotFound)
	}
	if off == 0 && limit < 0 {
		if object.IsReadAhead(ctx) && fi.Size() >= directAt && !s.noDirect.Load() {
			return &wholeFile{File: f, size: fi.Size(), store: s}, nil
		}
		return f, nil
	}
	if limit < 0 {
		limit = math.MaxInt64 - off
	}
	if cold := object.ColdReport(ctx); cold != nil {
		return &coldReader{f: f, off: off, end: min(fi.Size(), off+limit), cold: cold}, nil
	}
	return readCloser{io.NewSectionReader(f, off, limit), f}, nil
}

// coldReader reads the range [off, end) of f for a Get under
// object.ReportCold: each read first takes only what the page cache holds
// (preadv2 with RWF_NOWAIT); when that falls short, or the kernel cannot
// tell, it sets *cold and reads the rest from the disk.
type coldReader struct {
	f        *os.File
	off, end int64
	cold     *bool
}

func (r *coldReader) Read(p []byte) (int, error) {
	if r.off >= r.end {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.end-r.off)]
	if !*r.cold {
		n, err := unix.Preadv2(int(r.f.Fd()), [][]byte{p}, r.off, unix.RWF_NOWAIT)
		if n > 0 {
			r.off += int64(n)
			return n, nil
		}
		if err == nil { // n == 0: the file ended before its size said
			return 0, io.ErrUnexpectedEOF
		}
		*r.cold = true // EAGAIN: not in the page cache; or no RWF_NOWAIT here
	}
	n, err := r.f.ReadAt(p, r.off)
	r.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (r *coldReader) Close() error { return r.f.Close() }

// readCloser pairs a section of a file with the file's Close.
type readCloser struct {
	io.Reader
	io.Closer
}

// Put stores r under key atomically, creating parent directories.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	p, err := s.path(key)
	if err != nil {
		return fmt.Errorf("%s: put: %w", s, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: put %q: %w", s, key, err)
	}
	if err := s.put(ctx, p, r); err != nil {
		return fmt.Errorf("%s: put %q: %w", s, key, err)
	}
	return nil
}

// directAt is the size from which an object bypasses the page cache
// (direct.go): a Put whose sync is deferred writes it to the disk before
// it returns, with direct I/O or, where the file system refuses that, by
// starting its write-back; a read ahead of it reads it with direct I/O. A
// small file's block waits for the next Sync, which writes many at once.
const directAt = 1 << 20

// put writes r to a temporary file next to p and renames it over p. On any
// failure it removes the file it wrote.
//
// A Put whose sync is deferred (object.DeferSync: a block of a slice not
// committed yet, see Sync) writes p in place instead: nothing reads the
// key before its Put returns, and a crash can leave p short either way,
// which whoever restores the volume after the crash checks. That saves a
// small file's block a rename and a temporary name.
func (s *Store) put(ctx context.Context, p string, r io.Reader) (err error) {
	deferred := object.SyncDeferred(ctx)
	direct := deferred && s.wantsDirect(r)
	var f *os.File
	if deferred {
		f, err = s.create(p, func(string, string) (f *os.File, err error) {
			f, direct, err = s.openInPlace(p, direct)
			return f, err
		})
	} else {
		f, err = s.create(p, func(dir, base string) (*os.File, error) {
			return os.CreateTemp(dir, "."+base+".*.tmp")
		})
	}
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if !deferred || !umaskKeeps644() { // whatever CreateTemp or the umask gave
		if err := f.Chmod(0o644); err != nil {
			return err
		}
	}
	if direct {
		w := &directWriter{f: f, store: s}
		_, err = io.Copy(w, r)
		if ferr := w.Finish(); err == nil {
			err = ferr
		}
		if err != nil {
			return err
		}
	} else {
		n, err := io.Copy(f, r)
		if err != nil {
			return err
		}
		if deferred && n >= directAt {
			// Start the disk on it now: the next Sync then waits for
			// little, and the disk works beside the writer, as with an
			// fsync per object, without a journal commit each. Only a
			// hint: a file system that cannot leaves it to the Sync.
			_ = unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
		}
	}
	if !deferred {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if deferred {
		s.deferred.Add(1)
		return nil
	}
	return os.Rename(f.Name(), p)
}

// wantsDirect reports whether a deferred Put of r writes with direct I/O:
// when r tells its length, and that is directAt or more.
func (s *Store) wantsDirect(r io.Reader) bool {
	l, ok := r.(interface{ Len() int })
	return ok && l.Len() >= directAt && !s.noDirect.Load()
}

// openInPlace opens p for a deferred Put, with direct I/O when direct is
// set and the file system takes it; it reports whether it did.
func (s *Store) openInPlace(p string, direct bool) (*os.File, bool, error) {
	const flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if direct {
		f, err := openFile(p, flags|unix.O_DIRECT, 0o644)
		if !errors.Is(err, unix.EINVAL) {
			return f, err == nil, err
		}
		s.noDirect.Store(true)
	}
	f, err := openFile(p, flags, 0o644)
	return f, false, err
}

// Sync makes every Put that returned before it durable, data and names,
// with one syncfs(2) of the file system that holds the directory. It costs
// nothing when no Put deferred its sync since the last Sync.
func (s *Store) Sync(ctx context.Context) error {
	upto := s.deferred.Load()
	if s.synced.Load() >= upto {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: sync: %w", s, err)
	}
	d, err := os.Open(s.dir)
	if err != nil {
		return fmt.Errorf("%s: sync: %w", s, err)
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("%s: sync: %w", s, err)
	}
	for {
		cur := s.synced.Load()
		if cur >= upto || s.synced.CompareAndSwap(cur, upto) {
			return nil
		}
	}
}

// create opens, with open, the file that a Put of target p writes (p
// itself, or a temporary file next to it), making parent directories. The
// directories usually exist, so it opens first and makes them only when
// that fails, then holding s.dirs for reading so that no Delete of this
// store removes them before the file is in them. It retries because
// another process's Delete may still remove a parent directory that has
// just become empty.
func (s *Store) create(p string, open func(dir, base string) (*os.File, error)) (*os.File, error) {
	dir, base := filepath.Split(p)
	f, err := open(dir, base)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return f, err
	}
	s.dirs.RLock()
	defer s.dirs.RUnlock()
	for attempt := 1; ; attempt++ {
		// MkdirAll itself fails when a Delete removes a directory it
		// made or found: with ENOENT making the next one, or EEXIST
		// when the one it failed to make is gone by the time it looks.
		// The next attempt makes them again.
		if err := localdir.MkdirAll(s.dir, dir, 0o755); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		f, err := open(dir, base)
		if err == nil || !errors.Is(err, fs.ErrNotExist) || attempt == createAttempts {
			return f, err
		}
	}
}

// createAttempts bounds how often create makes the directories of a file
// again. Each failure needs another process's Delete that empties a
// directory between two of its steps, so a handful of attempts only run
// out under a storm of such deletes in one directory; a Put that fails
// then is retried above it.
const createAttempts = 16

// umaskKeeps644 reports whether the process's umask leaves a file created
// with mode 0644 at 0644, so that it needs no chmod. It reads the umask
// from /proc once (umask(2) cannot read it without setting it); when it
// cannot, files are chmod'ed.
var umaskKeeps644 = sync.OnceValue(func() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			return err == nil && m&0o644 == 0
		}
	}
	return false
})

// Delete removes key and then any parent directories it left empty, up to
// but not including the root. Deleting a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	p, err := s.path(key)
	if err != nil {
		return fmt.Errorf("%s: delete: %w", s, err)
	}
	fi, err := os.Lstat(p)
	if isNotFound(err) || (err == nil && fi.IsDir()) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: delete: %w", s, err)
	}
	if err := os.Remove(p); err != nil && !isNotFound(err) {
		return fmt.Errorf("%s: delete: %w", s, err)
	}
	s.dirs.Lock()
	defer s.dirs.Unlock()
	for d := filepath.Dir(p); len(d) > len(s.dir) && strings.HasPrefix(d, s.dir); d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			break // not empty, or gone already: either way we are done
		}
	}
	return nil
}

// Head returns the size and modification time of key.
func (s *Store) Head(ctx context.Context, key string) (object.Info, error) {
	p, err := s.path(key)
	if err != nil {
		return object.Info{}, fmt.Errorf("%s: head: %w", s, err)
	}
	fi, err := os.Stat(p)
	if isNotFound(err) || (err == nil && !fi.Mode().IsRegular()) {
		return object.Info{}, fmt.Errorf("%s: head %q: %w", s, key, object.ErrNotFound)
	}
	if err != nil {
		return object.Info{}, fmt.Errorf("%s: head: %w", s, err)
	}
	return object.Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}
