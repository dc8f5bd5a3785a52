package chunk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/object"
	objmem "github.com/sluicefs/sluice/internal/object/mem"
)

// testBlockSize is the block size of test volumes: the smallest allowed,
// so that tests make many blocks cheaply.
const testBlockSize = 64 << 10

// env is a volume for tests: a real meta client over the in-memory engine
// and a chunk store over obj.
type env struct {
	ctx context.Context
	c   metatest.Committer
	obj object.Store
	s   *Store
}

// newEnv formats a volume and returns an env whose chunk store uses obj
// (a fresh in-memory object store when nil) and conf (BlockSize defaults
// to testBlockSize).
func newEnv(t *testing.T, obj object.Store, conf Config) *env {
	t.Helper()
	ctx := context.Background()
	st := kvstore.New(mem.New("t"))
	if _, err := meta.FormatVolume(ctx, st, &meta.Format{Name: "test", UUID: "u", Storage: "mem", Bucket: "b",
		BlockSize: testBlockSize >> 10, HashPrefix: conf.HashPrefix}); err != nil {
		t.Fatalf("FormatVolume: %v", err)
	}
	c, err := meta.NewSession(ctx, st, meta.Config{})
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("Close meta client: %v", err)
		}
	})
	if obj == nil {
		obj = objmem.New("x")
	}
	if conf.BlockSize == 0 {
		conf.BlockSize = testBlockSize
	}
	return &env{ctx: ctx, c: metatest.Committer{Session: c}, obj: obj, s: New(obj, conf)}
}

// newFile creates an empty regular file named name in the root directory.
func (e *env) newFile(t *testing.T, name string) meta.Ino {
	t.Helper()
	a, err := e.c.Mknod(e.ctx, meta.RootIno, []byte(name), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	if err != nil {
		t.Fatalf("Mknod %q: %v", name, err)
	}
	return a.Ino
}

// fileModel is the reference content of a file, kept sparsely in pages so
// that tests can write near chunk boundaries without allocating 64 MiB.
type fileModel struct {
	size  uint64
	pages map[uint64][]byte
}

const modelPage = 64 << 10

func (m *fileModel) write(p []byte, off uint64) {
	if m.pages == nil {
		m.pages = map[uint64][]byte{}
	}
	m.size = max(m.size, off+uint64(len(p)))
	for len(p) > 0 {
		pg := m.pages[off/modelPage]
		if pg == nil {
			pg = make([]byte, modelPage)
			m.pages[off/modelPage] = pg
		}
		n := copy(pg[off%modelPage:], p)
		p, off = p[n:], off+uint64(n)
	}
}

// truncate sets the size to n; bytes past n read as zeros afterwards.
func (m *fileModel) truncate(n uint64) {
	for i, pg := range m.pages {
		switch {
		case i*modelPage >= n:
			delete(m.pages, i)
		case (i+1)*modelPage > n:
			clear(pg[n-i*modelPage:])
		}
	}
	m.size = n
}

// bytes returns n bytes of the model at off.
func (m *fileModel) bytes(off uint64, n int) []byte {
	out := make([]byte, n)
	for i := 0; i < n; {
		at := off + uint64(i)
		k := min(n-i, int(modelPage-at%modelPage))
		if pg := m.pages[at/modelPage]; pg != nil {
			copy(out[i:i+k], pg[at%modelPage:])
		}
		i += k
	}
	return out
}

// write buffers p at off through w and applies it to m (when not nil).
func (e *env) write(t *testing.T, w *FileWriter, m *fileModel, p []byte, off uint64) {
	t.Helper()
	if err := w.Write(e.ctx, p, off); err != nil {
		t.Fatalf("Write(%d bytes at %d): %v", len(p), off, err)
	}
	if m != nil {
		m.write(p, off)
	}
}

// flush flushes w and fails the test on error.
func (e *env) flush(t *testing.T, w *FileWriter) {
	t.Helper()
	if err := w.Flush(e.ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

// read returns n bytes of file ino at off the way the vfs reads them: the
// committed content, then w's buffered writes on top (w may be nil).
func (e *env) read(t *testing.T, w *FileWriter, ino meta.Ino, off uint64, n int) []byte {
	t.Helper()
	p := make([]byte, n)
	for i := range p {
		p[i] = 0xEE // ReadFile must overwrite every byte, holes included
	}
	read := func() error { return e.s.ReadFile(e.ctx, e.c, ino, p, off) }
	if w != nil {
		read = func() error { return w.Read(e.ctx, e.c, p, off) }
	}
	if err := read(); err != nil {
		t.Fatalf("read %d bytes at %d: %v", n, off, err)
	}
	// The vectored read gives the same bytes.
	q := bytes.Repeat([]byte{0xEE}, n)
	readVec := func() ([][]byte, func(), error) { return e.s.ReadFileVec(e.ctx, e.c, ino, q, off) }
	if w != nil {
		readVec = func() ([][]byte, func(), error) { return w.ReadVec(e.ctx, e.c, q, off) }
	}
	pieces, release, err := readVec()
	defer release()
	if err != nil {
		t.Fatalf("vectored read of %d bytes at %d: %v", n, off, err)
	}
	if got := bytes.Join(pieces, nil); !bytes.Equal(got, p) {
		t.Fatalf("vectored read of %d bytes at %d: %d bytes in %d pieces differ from Read's %d bytes",
			n, off, len(got), len(pieces), len(p))
	}
	return p
}

// checkRange compares n bytes of ino at off (read through w when not nil)
// with the model.
func (e *env) checkRange(t *testing.T, w *FileWriter, ino meta.Ino, m *fileModel, off uint64, n int) {
	t.Helper()
	assertBytes(t, e.read(t, w, ino, off, n), m.bytes(off, n), off)
}

// check compares ino with the model: the whole file when it is small,
// else every written page of the model and the pages around it.
func (e *env) check(t *testing.T, w *FileWriter, ino meta.Ino, m *fileModel) {
	t.Helper()
	if m.size <= 16<<20 {
		e.checkRange(t, w, ino, m, 0, int(m.size))
		return
	}
	for i := range m.pages {
		for j := max(i, 1) - 1; j <= i+1 && j*modelPage < m.size; j++ {
			e.checkRange(t, w, ino, m, j*modelPage, int(min(modelPage, m.size-j*modelPage)))
		}
	}
}

// length returns the committed length of ino.
func (e *env) length(t *testing.T, ino meta.Ino) uint64 {
	t.Helper()
	a, err := e.c.GetAttr(e.ctx, ino)
	if err != nil {
		t.Fatalf("GetAttr: %v", err)
	}
	return a.Length
}

// slices returns the committed slice list of chunk idx of ino.
func (e *env) slices(t *testing.T, ino meta.Ino, idx uint32) []meta.Slice {
	t.Helper()
	ss, err := e.c.ReadChunk(e.ctx, ino, idx)
	if err != nil {
		t.Fatalf("ReadChunk(%d, %d): %v", ino, idx, err)
	}
	return ss
}

// assertBytes compares got with want and reports the first difference as
// a file offset (base is the offset of got[0]).
func assertBytes(t *testing.T, got, want []byte, base uint64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d bytes, want %d", len(got), len(want))
	}
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for got[i] == want[i] {
		i++
	}
	j := i
	for j < len(got) && got[j] != want[j] {
		j++
	}
	t.Fatalf("content differs at offset %d (first %d bytes differ): got %x..., want %x...",
		base+uint64(i), j-i, got[i:min(i+8, len(got))], want[i:min(i+8, len(want))])
}

// pattern returns n pseudo-random bytes from seed.
func pattern(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15))
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

func TestBlockKey(t *testing.T) {
	tests := []struct {
		id         uint64
		index, n   int
		hashPrefix bool
		want       string
	}{
		// The spec's example: a 10 MiB slice with id 1 and 4 MiB blocks.
		{1, 0, 4 << 20, false, "chunks/0/0/1_0_4194304"},
		{1, 1, 4 << 20, false, "chunks/0/0/1_1_4194304"},
		{1, 2, 2 << 20, false, "chunks/0/0/1_2_2097152"},
		{1, 0, 4 << 20, true, "chunks/01/0/1_0_4194304"},
		{999, 3, 100, false, "chunks/0/0/999_3_100"},
		{1000, 0, 100, false, "chunks/0/1/1000_0_100"},
		{999999, 0, 1, false, "chunks/0/999/999999_0_1"},
		{1000000, 0, 1, false, "chunks/1/1000/1000000_0_1"},
		{1234567890, 0, 4 << 20, false, "chunks/1234/1234567/1234567890_0_4194304"},
		{1234567890, 7, 65536, true, "chunks/D2/1234/1234567890_7_65536"}, // 1234567890 = 0x499602D2
		{255, 0, 1, true, "chunks/FF/0/255_0_1"},
		{256, 0, 1, true, "chunks/00/0/256_0_1"},
		{10, 0, 1, true, "chunks/0A/0/10_0_1"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := BlockKey(tt.id, tt.index, tt.n, tt.hashPrefix); got != tt.want {
				t.Errorf("BlockKey(%d, %d, %d, %v) = %q, want %q", tt.id, tt.index, tt.n, tt.hashPrefix, got, tt.want)
			}
		})
	}
}

// parseKey parses a block key with ParseBlockKey and checks that it has
// the form of the spec that hashPrefix says.
func parseKey(t *testing.T, key string, hashPrefix bool) BlockRef {
	t.Helper()
	ref, err := ParseBlockKey(key)
	if err != nil {
		t.Fatalf("stored key: %v", err)
	}
	if ref.HashPrefix != hashPrefix {
		t.Fatalf("key %q: hash prefix %v, want %v", key, ref.HashPrefix, hashPrefix)
	}
	return ref
}

// listAll returns every object under chunks/.
func listAll(t *testing.T, ctx context.Context, obj object.Store) []object.Info {
	t.Helper()
	all, err := obj.List(ctx, "chunks/", "", 0)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return all
}

// TestStoredKeys writes a file as several slices and checks that every
// stored object has a spec key whose length suffix is its size, that the
// blocks of each committed slice are exactly the stored objects, and that
// only a slice's last block is short.
func TestStoredKeys(t *testing.T) {
	for _, hashPrefix := range []bool{false, true} {
		t.Run(fmt.Sprintf("hashPrefix=%v", hashPrefix), func(t *testing.T) {
			e := newEnv(t, nil, Config{HashPrefix: hashPrefix})
			ino := e.newFile(t, "f")
			w := e.s.NewWriter(ino, e.c)
			var m fileModel
			e.write(t, w, &m, pattern(1, 10*testBlockSize+123), 0)     // 11 blocks, last short
			e.write(t, w, &m, pattern(2, 5000), 3*testBlockSize+17)    // overwrite after upload: new slice
			e.write(t, w, &m, pattern(3, 2*testBlockSize), 1<<20)      // exactly 2 full blocks
			e.write(t, w, &m, pattern(4, 7), meta.ChunkSize+5)         // tiny slice in chunk 1
			e.write(t, w, &m, pattern(5, testBlockSize+1), 3<<20+1000) // unaligned position
			e.flush(t, w)

			objects := map[BlockRef]bool{}
			for _, info := range listAll(t, e.ctx, e.obj) {
				ref := parseKey(t, info.Key, hashPrefix)
				if int64(ref.Len) != info.Size {
					t.Errorf("object %q holds %d bytes, its key says %d", info.Key, info.Size, ref.Len)
				}
				objects[ref] = true
			}
			want := map[BlockRef]bool{}
			for idx := uint32(0); idx < 2; idx++ {
				for _, s := range e.slices(t, ino, idx) {
					if s.Id == 0 {
						continue
					}
					for i := 0; i*testBlockSize < int(s.Size); i++ {
						want[BlockRef{s.Id, i, min(testBlockSize, int(s.Size)-i*testBlockSize), hashPrefix}] = true
					}
				}
			}
			for ref := range want {
				if !objects[ref] {
					t.Errorf("committed block %+v is not stored", ref)
				}
			}
			for ref := range objects {
				if !want[ref] {
					t.Errorf("stored block %+v belongs to no committed slice", ref)
				}
			}
			e.checkRange(t, nil, ino, &m, 0, 4<<20)
			e.checkRange(t, nil, ino, &m, meta.ChunkSize-10, 100)
		})
	}
}

// TestSpecExample writes the spec's example, a 10 MiB slice with 4 MiB
// blocks, and checks the three keys.
func TestSpecExample(t *testing.T) {
	e := newEnv(t, nil, Config{BlockSize: 4 << 20})
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	var m fileModel
	e.write(t, w, &m, pattern(1, 10<<20), 0)
	e.flush(t, w)
	ss := e.slices(t, ino, 0)
	if len(ss) != 1 {
		t.Fatalf("slices = %+v, want one", ss)
	}
	id := ss[0].Id
	var got []string
	for _, info := range listAll(t, e.ctx, e.obj) {
		got = append(got, info.Key)
	}
	dir := fmt.Sprintf("chunks/%d/%d/", id/1000_000, id/1000)
	want := []string{
		fmt.Sprintf("%s%d_0_4194304", dir, id),
		fmt.Sprintf("%s%d_1_4194304", dir, id),
		fmt.Sprintf("%s%d_2_2097152", dir, id),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("keys = %q, want %q", got, want)
	}
	e.check(t, nil, ino, &m)
}

func TestDelete(t *testing.T) {
	e := newEnv(t, nil, Config{})
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	var m fileModel
	e.write(t, w, &m, pattern(1, 5*testBlockSize+100), 0)
	e.write(t, w, &m, pattern(2, 1000), 2*testBlockSize) // a second slice
	e.flush(t, w)
	e.check(t, nil, ino, &m) // fills the block cache

	ss := e.slices(t, ino, 0)
	if len(ss) != 2 {
		t.Fatalf("slices = %+v, want two", ss)
	}
	victim, kept := ss[0], ss[1]
	for range 2 { // deleting twice is fine
		if err := e.s.Delete(e.ctx, victim.Id, victim.Size); err != nil {
			t.Fatalf("Delete(%d, %d): %v", victim.Id, victim.Size, err)
		}
	}
	for _, info := range listAll(t, e.ctx, e.obj) {
		if ref := parseKey(t, info.Key, false); ref.ID == victim.Id {
			t.Errorf("block %q survived Delete", info.Key)
		}
	}
	// Cached blocks go too: reading the deleted slice must fail.
	p := make([]byte, 10)
	if err := e.s.ReadSlice(e.ctx, victim.Id, victim.Size, 0, p); !errors.Is(err, object.ErrNotFound) {
		t.Errorf("ReadSlice of a deleted slice: err = %v, want ErrNotFound", err)
	}
	// The other slice is untouched.
	got := make([]byte, kept.Len)
	if err := e.s.ReadSlice(e.ctx, kept.Id, kept.Size, kept.Off, got); err != nil {
		t.Fatalf("ReadSlice of the kept slice: %v", err)
	}
	assertBytes(t, got, m.bytes(uint64(kept.Pos), int(kept.Len)), uint64(kept.Pos))
	// A slice that never existed deletes cleanly too.
	if err := e.s.Delete(e.ctx, 987654, 3*testBlockSize); err != nil {
		t.Errorf("Delete of a missing slice: %v", err)
	}
}

// faultStore wraps an object.Store and injects failures.
type faultStore struct {
	object.Store

	// failPut, when set, makes Put of key fail; n counts Puts from 1.
	failPut func(key string, n int) bool
	// shortGet, when set, truncates Get results of matching keys to the
	// returned number of bytes.
	shortGet func(key string) (keep int, ok bool)
	// failGet, when set, makes Get of matching keys fail.
	failGet func(key string) bool

	mu struct {
		sync.Mutex
		puts   int
		failed []string // keys whose Put failed
	}
}

var errInjected = errors.New("injected fault")

func (f *faultStore) Put(ctx context.Context, key string, r io.Reader) error {
	f.mu.Lock()
	f.mu.puts++
	fail := f.failPut != nil && f.failPut(key, f.mu.puts)
	if fail {
		f.mu.failed = append(f.mu.failed, key)
	}
	f.mu.Unlock()
	if fail {
		return fmt.Errorf("put %q: %w", key, errInjected)
	}
	return f.Store.Put(ctx, key, r)
}

func (f *faultStore) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	if f.failGet != nil && f.failGet(key) {
		return nil, fmt.Errorf("get %q: %w", key, errInjected)
	}
	r, err := f.Store.Get(ctx, key, off, limit)
	if err != nil || f.shortGet == nil {
		return r, err
	}
	if keep, ok := f.shortGet(key); ok {
		return struct {
			io.Reader
			io.Closer
		}{io.LimitReader(r, int64(keep)), r}, nil
	}
	return r, nil
}

func (f *faultStore) failedKeys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.mu.failed...)
}

func newMemStore() object.Store { return objmem.New("x") }

func (f *faultStore) Unwrap() object.Store { return f.Store }

var (
	_ object.Store     = (*faultStore)(nil)
	_ object.Unwrapper = (*faultStore)(nil)
)
