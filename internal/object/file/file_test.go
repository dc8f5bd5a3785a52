package file_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicefs/sluice/internal/localdir"
	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/conformance"
	"github.com/sluicefs/sluice/internal/object/file"
	"github.com/sluicefs/sluice/internal/object/objecttest"
	"github.com/sluicefs/sluice/internal/testserver"
)

func newStore(t testing.TB) *file.Store {
	t.Helper()
	s, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSuite(t *testing.T) {
	objecttest.RunConfig(t, conformance.Config{ExactSizes: true}, func(t *testing.T) object.Store { return newStore(t) })
}

// failingReader returns some data and then an error.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("injected read failure")
	}
	n := min(len(p), r.n)
	r.n -= n
	return n, nil
}

func TestFailedPutLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	s, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	objecttest.Put(t, s, "a/old", []byte("old"))
	for _, key := range []string{"a/old", "a/new"} {
		if err := s.Put(ctx, key, &failingReader{n: 100 << 10}); err == nil {
			t.Fatalf("Put(%q) with a failing reader succeeded", key)
		}
	}
	if got := objecttest.Get(t, s, "a/old", 0, -1); string(got) != "old" {
		t.Errorf("a/old = %q after a failed overwrite, want old", got)
	}
	if _, err := s.Head(ctx, "a/new"); !errors.Is(err, object.ErrNotFound) {
		t.Errorf("Head(a/new) error = %v, want ErrNotFound", err)
	}
	var files []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, strings.TrimPrefix(p, dir))
		}
		return err
	})
	if len(files) != 1 || files[0] != "/a/old" {
		t.Errorf("files after failed Puts = %q, want only /a/old", files)
	}
}

func TestBadKeys(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	for _, key := range []string{"", "/abs", "../up", "a/../../up", "a//b", "a/./b", "a/", ".x.tmp"} {
		if err := s.Put(ctx, key, strings.NewReader("x")); err == nil {
			t.Errorf("Put(%q) succeeded", key)
		}
		if _, err := s.Get(ctx, key, 0, -1); err == nil || errors.Is(err, object.ErrNotFound) {
			t.Errorf("Get(%q) error = %v, want a bad key error", key, err)
		}
	}
	if infos, err := s.List(ctx, "../", "", 0); err != nil || len(infos) != 0 {
		t.Errorf("List(../) = %v, %v; want nothing", infos, err)
	}
}

func TestLayout(t *testing.T) {
	dir := t.TempDir()
	s, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.String(), "file://"+dir+"/"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	ctx := context.Background()
	objecttest.Put(t, s, "vol/chunks/0/0/1_0_3", []byte("abc"))
	if b, err := os.ReadFile(filepath.Join(dir, "vol/chunks/0/0/1_0_3")); err != nil || string(b) != "abc" {
		t.Errorf("block file = %q, %v; want abc", b, err)
	}
	if info, err := s.Head(ctx, "vol/chunks/0/0/1_0_3"); err != nil || info.Size != 3 {
		t.Errorf("Head = %+v, %v; want size 3", info, err)
	}
	// A crashed Put's temporary file is not listed.
	if err := os.WriteFile(filepath.Join(dir, "vol/chunks/0/0/.1_0_4.123.tmp"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	infos, err := s.List(ctx, "", "", 0)
	if err != nil || len(infos) != 1 || infos[0].Key != "vol/chunks/0/0/1_0_3" {
		t.Errorf("List = %+v, %v; want only the block", infos, err)
	}
	// Delete removes the directories it emptied, but not the root.
	os.Remove(filepath.Join(dir, "vol/chunks/0/0/.1_0_4.123.tmp"))
	if err := s.Delete(ctx, "vol/chunks/0/0/1_0_3"); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("root after Delete = %v, %v; want empty and present", entries, err)
	}
}

// TestPutSpreadsDirectories checks that the directories a Put made have
// their subdirectories spread (internal/localdir); the root, the user's,
// and the leaf are left alone.
func TestPutSpreadsDirectories(t *testing.T) {
	dir := t.TempDir()
	if err := localdir.Probe(dir); err != nil {
		testserver.Missing(t, fmt.Sprintf("a file system that keeps FS_TOPDIR_FL under %s (%v)", dir, err), "put TMPDIR on ext4")
	}
	s, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	objecttest.Put(t, s, "vol/chunks/0/0/1_0_3", []byte("abc"))
	for rel, want := range map[string]bool{"": false, "vol": true, "vol/chunks": true, "vol/chunks/0": true, "vol/chunks/0/0": false} {
		if got, err := localdir.Spreads(filepath.Join(dir, rel)); err != nil || got != want {
			t.Errorf("%q marked as a top directory: %v (%v), want %v", rel, got, err, want)
		}
	}
}

func TestCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "x", "bucket")
	s, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(context.Background()); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("Create did not make %s: %v", dir, err)
	}
	objecttest.Put(t, s, "k", []byte("v"))
	rc, err := s.Get(context.Background(), "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); string(b) != "v" {
		t.Errorf("Get = %q, want v", b)
	}
}

func BenchmarkStore(b *testing.B) {
	objecttest.Bench(b, newStore(b))
}

// TestDeferredSync checks that a Put under object.DeferSync stores a whole,
// readable object at once and that decorators let a caller find the
// store's Sync.
func TestDeferredSync(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if err := s.Sync(ctx); err != nil {
		t.Fatalf("Sync with nothing deferred: %v", err)
	}
	data := []byte(strings.Repeat("deferred ", 1000))
	if err := s.Put(object.DeferSync(ctx), "chunks/0/0/1_0_9000", strings.NewReader(string(data))); err != nil {
		t.Fatal(err)
	}
	r, err := s.Get(ctx, "chunks/0/0/1_0_9000", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || string(got) != string(data) {
		t.Fatalf("read back %d bytes, %v; want the %d bytes put", len(got), err, len(data))
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Put(object.DeferSync(ctx), "k2", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sync with a cancelled context and a deferred Put = %v, want context.Canceled", err)
	}
	if y := object.FindSyncer(s); y != s {
		t.Fatalf("FindSyncer(store) = %v, want the store", y)
	}
	if y := object.FindSyncer(wrapped{s}); y != s {
		t.Fatalf("FindSyncer through a decorator = %v, want the store", y)
	}
	if object.SyncDeferred(ctx) || !object.SyncDeferred(object.DeferSync(ctx)) {
		t.Fatal("SyncDeferred does not tell DeferSync's context from others")
	}
}

// TestBlockMode checks that blocks are stored with mode 0644 whichever way
// they are written, into directories a Put makes and into existing ones.
func TestBlockMode(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		key  string
	}{
		{"synced, new directory", ctx, "chunks/0/1/1_0_3"},
		{"synced, existing directory", ctx, "chunks/0/1/2_0_3"},
		{"deferred, new directory", object.DeferSync(ctx), "chunks/0/2/3_0_3"},
		{"deferred, existing directory", object.DeferSync(ctx), "chunks/0/2/4_0_3"},
	} {
		if err := s.Put(tc.ctx, tc.key, strings.NewReader("abc")); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		fi, err := os.Stat(filepath.Join(dir, tc.key))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v, want 0644", tc.name, fi.Mode().Perm())
		}
	}
}

// wrapped is a do-nothing decorator.
type wrapped struct{ object.Store }

func (w wrapped) Unwrap() object.Store { return w.Store }

// TestPutBesideDeletes puts and deletes keys of one deep directory from
// several goroutines at once: a Delete that empties the directory removes
// it and its parents while Puts make them again, and no Put may fail for
// a directory removed under it.
func TestPutBesideDeletes(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	const workers, rounds = 4, 300
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			for i := 0; i < rounds; i++ {
				key := fmt.Sprintf("chunks/0/0/%d_%d", w, i)
				ctx := ctx
				if i%2 == 1 {
					ctx = object.DeferSync(ctx)
				}
				if err := s.Put(ctx, key, strings.NewReader("x")); err != nil {
					errs <- err
					return
				}
				if err := s.Delete(ctx, key); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
