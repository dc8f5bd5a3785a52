package chunk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/file"
)

// testVolumeUUID is the UUID newEnv formats volumes with.
const testVolumeUUID = "u"

// newFileStore returns a file object store in a fresh directory.
func newFileStore(t *testing.T) object.Store {
	t.Helper()
	st, err := file.New(t.TempDir())
	if err != nil {
		t.Fatalf("file store: %v", err)
	}
	return st
}

// openStore opens a chunk store with a disk cache in dir over obj and
// closes it at the end of the test. Blocks are testBlockSize, and the
// memory cache holds none, so that reads exercise the disk cache.
func openStore(t *testing.T, obj object.Store, dir string, conf Config) *Store {
	t.Helper()
	conf.BlockSize = testBlockSize
	conf.CacheDirs = []string{dir}
	conf.VolumeUUID = testVolumeUUID
	if conf.MemoryCacheSize == 0 {
		conf.MemoryCacheSize = 1
	}
	s, err := Open(obj, conf)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// holdStore holds every Put until release is closed (or the Put's context
// ends), reporting on entered (when not nil) that a Put has started.
type holdStore struct {
	object.Store
	release chan struct{}
	entered chan string
}

func (h *holdStore) Put(ctx context.Context, key string, r io.Reader) error {
	if h.entered != nil {
		h.entered <- key
	}
	select {
	case <-h.release:
	case <-ctx.Done():
		return fmt.Errorf("held put %q: %w", key, ctx.Err())
	}
	return h.Store.Put(ctx, key, r)
}

func (h *holdStore) Unwrap() object.Store { return h.Store }

var (
	_ object.Store     = (*holdStore)(nil)
	_ object.Unwrapper = (*holdStore)(nil)
)

// blockKeys returns the keys of all blocks of the committed slices of
// chunk 0 of ino.
func (e *env) blockKeys(t *testing.T, ino meta.Ino) []string {
	t.Helper()
	var keys []string
	for _, s := range e.slices(t, ino, 0) {
		if s.Id == 0 {
			continue
		}
		for i := 0; i*testBlockSize < int(s.Size); i++ {
			keys = append(keys, BlockKey(s.Id, i, min(testBlockSize, int(s.Size)-i*testBlockSize), false))
		}
	}
	return keys
}

// stagedFiles returns the keys of the files in the staging area of dir.
func stagedFiles(t *testing.T, dir string) []string {
	t.Helper()
	root := filepath.Join(dir, testVolumeUUID, "rawstaging")
	var keys []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		keys = append(keys, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return keys
}

// TestWritebackReadBeforeUpload writes with writeback while uploads are
// held: Flush commits without waiting for them, the data reads back from
// staging, FlushStaged waits for the uploads, and the staged blocks then
// move into the cache.
func TestWritebackReadBeforeUpload(t *testing.T) {
	obj := &holdStore{Store: newFileStore(t), release: make(chan struct{})}
	e := newEnv(t, obj, Config{})
	dir := t.TempDir()
	e.s = openStore(t, obj, dir, Config{Writeback: true})
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	var m fileModel
	e.write(t, w, &m, pattern(1, 5*testBlockSize+777), 0)
	within(t, 10*time.Second, "Flush with uploads held", func() error { return w.Flush(e.ctx) })

	keys := e.blockKeys(t, ino)
	if len(keys) != 6 {
		t.Fatalf("committed blocks %q, want 6", keys)
	}
	if got := listAll(t, e.ctx, obj); len(got) != 0 {
		t.Fatalf("objects stored while uploads are held: %v", got)
	}
	if n, size := e.s.Staged(); n != 6 || size <= 5*testBlockSize {
		t.Errorf("Staged() = %d blocks, %d bytes; want 6 blocks of the file", n, size)
	}
	if got := stagedFiles(t, dir); len(got) != 6 {
		t.Errorf("staging files %q, want 6", got)
	}
	e.check(t, nil, ino, &m) // from staging: not uploaded, not in memory

	ctx, cancel := context.WithTimeout(e.ctx, 50*time.Millisecond)
	defer cancel()
	if err := e.s.FlushStaged(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("FlushStaged with uploads held: err = %v, want DeadlineExceeded", err)
	}
	close(obj.release)
	if err := e.s.FlushStaged(e.ctx); err != nil {
		t.Fatalf("FlushStaged: %v", err)
	}
	if got := listAll(t, e.ctx, obj); len(got) != 6 {
		t.Fatalf("after FlushStaged, %d objects stored, want 6", len(got))
	}
	if got := stagedFiles(t, dir); len(got) != 0 {
		t.Errorf("staging files %q left after FlushStaged", got)
	}
	if n, _ := e.s.Staged(); n != 0 {
		t.Errorf("Staged() = %d after FlushStaged", n)
	}
	for _, key := range keys {
		if _, err := os.Stat(filepath.Join(dir, testVolumeUUID, "raw", key)); err != nil {
			t.Errorf("uploaded block did not move into the cache: %v", err)
		}
	}
	e.check(t, nil, ino, &m)
	// A mount without the cache reads the same bytes from the object store.
	e.s = New(obj, Config{BlockSize: testBlockSize})
	e.check(t, nil, ino, &m)
}

// TestWritebackRecovery stops a writeback store with its uploads held, as a
// crash would, and opens a new store on the same cache directory: it
// uploads the staged blocks, and the file reads back from the object store.
func TestWritebackRecovery(t *testing.T) {
	base := newFileStore(t)
	held := &holdStore{Store: base, release: make(chan struct{})} // never released
	e := newEnv(t, base, Config{})
	dir := t.TempDir()
	s1, err := Open(held, Config{BlockSize: testBlockSize, CacheDirs: []string{dir}, VolumeUUID: testVolumeUUID, Writeback: true})
	if err != nil {
		t.Fatal(err)
	}
	e.s = s1
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	var m fileModel
	e.write(t, w, &m, pattern(2, 3*testBlockSize), 0)
	e.write(t, w, &m, pattern(3, 100), 7) // a second slice
	e.flush(t, w)
	keys := e.blockKeys(t, ino)
	if err := s1.Close(e.ctx); err != nil { // stops the held uploads
		t.Fatalf("Close: %v", err)
	}
	if got := listAll(t, e.ctx, base); len(got) != 0 {
		t.Fatalf("objects stored before recovery: %v", got)
	}
	if got := stagedFiles(t, dir); len(got) != len(keys) {
		t.Fatalf("staged files %q, want the %d blocks %q", got, len(keys), keys)
	}

	e.s = openStore(t, base, dir, Config{}) // without writeback: recovery still runs
	if err := e.s.FlushStaged(e.ctx); err != nil {
		t.Fatalf("FlushStaged: %v", err)
	}
	var stored []string
	for _, info := range listAll(t, e.ctx, base) {
		stored = append(stored, info.Key)
	}
	slices.Sort(keys)
	if !slices.Equal(stored, keys) {
		t.Errorf("stored %q, want the committed blocks %q", stored, keys)
	}
	e.s = New(base, Config{BlockSize: testBlockSize})
	e.check(t, nil, ino, &m)
}

// TestWritebackRetry fails the first uploads of every block: the uploader
// retries until they succeed.
func TestWritebackRetry(t *testing.T) {
	defer func(d time.Duration) { minUploadBackoff = d }(minUploadBackoff)
	minUploadBackoff = time.Millisecond
	var mu sync.Mutex
	tries := map[string]int{}
	f := &faultStore{Store: newFileStore(t), failPut: func(key string, _ int) bool {
		mu.Lock()
		defer mu.Unlock()
		tries[key]++
		return tries[key] <= 2
	}}
	e := newEnv(t, f, Config{})
	e.s = openStore(t, f, t.TempDir(), Config{Writeback: true})
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	var m fileModel
	e.write(t, w, &m, pattern(4, 2*testBlockSize+5), 0)
	e.flush(t, w)
	if err := e.s.FlushStaged(e.ctx); err != nil {
		t.Fatalf("FlushStaged: %v", err)
	}
	mu.Lock()
	for key, n := range tries {
		if n != 3 {
			t.Errorf("block %s uploaded after %d tries, want 3", key, n)
		}
	}
	mu.Unlock()
	e.s = New(f.Store, Config{BlockSize: testBlockSize})
	e.check(t, nil, ino, &m)
}

// TestWritebackDelete deletes a slice whose blocks are staged and being
// uploaded: the uploads stop, and nothing of the slice is stored later.
func TestWritebackDelete(t *testing.T) {
	obj := &holdStore{Store: newFileStore(t), release: make(chan struct{})}
	e := newEnv(t, obj, Config{})
	dir := t.TempDir()
	e.s = openStore(t, obj, dir, Config{Writeback: true})
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	e.write(t, w, nil, pattern(5, 4*testBlockSize), 0)
	e.flush(t, w)
	ss := e.slices(t, ino, 0)
	within(t, 10*time.Second, "Delete of a slice with held uploads", func() error {
		return e.s.Delete(e.ctx, ss[0].Id, ss[0].Size)
	})
	close(obj.release)
	if err := e.s.FlushStaged(e.ctx); err != nil {
		t.Fatalf("FlushStaged: %v", err)
	}
	if got := listAll(t, e.ctx, obj); len(got) != 0 {
		t.Errorf("blocks of a deleted slice were stored: %v", got)
	}
	if got := stagedFiles(t, dir); len(got) != 0 {
		t.Errorf("staged files of a deleted slice remain: %q", got)
	}
	p := make([]byte, 10)
	if err := e.s.ReadSlice(e.ctx, ss[0].Id, ss[0].Size, 0, p); !errors.Is(err, object.ErrNotFound) {
		t.Errorf("ReadSlice of the deleted slice: err = %v, want ErrNotFound", err)
	}
}

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestWritebackStagingFull bounds staging to two blocks: further blocks
// upload synchronously, which is logged once.
func TestWritebackStagingFull(t *testing.T) {
	obj := &holdStore{Store: newFileStore(t), release: make(chan struct{}), entered: make(chan string, 100)}
	var logs logBuffer
	e := newEnv(t, obj, Config{})
	e.s = openStore(t, obj, t.TempDir(), Config{Writeback: true, StagingLimit: 2*testBlockSize + 1000,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	var m fileModel
	e.write(t, w, &m, pattern(6, 2*testBlockSize), 0) // fills staging
	flushed := make(chan error, 1)
	go func() {
		e.write(t, w, &m, pattern(7, 3*testBlockSize), 2*testBlockSize)
		flushed <- w.Flush(e.ctx)
	}()
	// Of the five blocks, two are staged and three upload synchronously,
	// holding Flush; all five uploads start.
	for range 5 {
		<-obj.entered
	}
	select {
	case err := <-flushed:
		t.Fatalf("Flush returned (%v) while blocks that did not fit staging wait for held uploads", err)
	default:
	}
	if n, _ := e.s.Staged(); n != 2 {
		t.Errorf("Staged() = %d blocks, want 2 (the limit); log:\n%s", n, logs.String())
	}
	close(obj.release)
	if err := <-flushed; err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if err := e.s.FlushStaged(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "writeback staging full, uploading synchronously"); n != 1 {
		t.Errorf("staging-full message logged %d times, want once; log:\n%s", n, logs.String())
	}
	e.s = New(obj, Config{BlockSize: testBlockSize})
	e.check(t, nil, ino, &m)
}

func TestWritebackNeedsDisk(t *testing.T) {
	for _, dirs := range [][]string{nil, {"memory"}} {
		if _, err := Open(newMemStore(), Config{CacheDirs: dirs, Writeback: true}); err == nil {
			t.Errorf("Open with writeback and cache dirs %q succeeded", dirs)
		}
		s := New(newMemStore(), Config{CacheDirs: dirs, Writeback: true})
		if s.conf.Writeback || s.disk != nil {
			t.Errorf("New with writeback and cache dirs %q did not fall back to a memory cache", dirs)
		}
	}
	if _, err := Open(newMemStore(), Config{CacheDirs: []string{t.TempDir()}}); err == nil {
		t.Error("Open of a disk cache without a volume UUID succeeded")
	}
}

// A compaction's slice is in the bucket when WriteSliceFunc returns, with
// writeback too: it replaces slices that are deleted at once, so other
// mounts must find it there, not only in this mount's staging.
func TestWriteSliceFuncBypassesStaging(t *testing.T) {
	obj := newFileStore(t)
	dir := t.TempDir()
	s := openStore(t, obj, dir, Config{Writeback: true})
	data := pattern(3, 2*testBlockSize+100)
	err := s.WriteSliceFunc(context.Background(), 77, uint32(len(data)), func(_ context.Context, off uint32, p []byte) error {
		copy(p, data[off:])
		return nil
	})
	if err != nil {
		t.Fatalf("WriteSliceFunc: %v", err)
	}
	if staged := stagedFiles(t, dir); len(staged) != 0 {
		t.Errorf("staged %v", staged)
	}
	for i := 0; i < 3; i++ {
		key := BlockKey(77, i, min(testBlockSize, len(data)-i*testBlockSize), false)
		r, err := obj.Get(context.Background(), key, 0, -1)
		if err != nil {
			t.Fatalf("block %s not in the bucket: %v", key, err)
		}
		got, _ := io.ReadAll(r)
		r.Close()
		if !bytes.Equal(got, data[i*testBlockSize:i*testBlockSize+len(got)]) {
			t.Errorf("block %s differs", key)
		}
	}
}
