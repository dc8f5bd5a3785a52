package chunk

import (
	"bytes"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
	objmem "github.com/sluicefs/sluice/internal/object/mem"
)

func TestFetchPool(t *testing.T) {
	g := newReadGuard()
	p := newFetchPool(8, g)
	if b, gen := p.get(5); len(b) != 5 || gen != 0 || !p.live(b, gen) {
		t.Fatalf("get(5) = %d bytes, generation %d: want a buffer outside the pool", len(b), gen)
	}
	a, genA := p.get(8)
	if !p.live(a, genA) {
		t.Fatal("a buffer just handed out is not live")
	}
	p.put(make([]byte, 8)) // not the pool's: ignored
	read := g.enter()      // a read that may still use a
	p.put(a)
	p.put(a) // twice: once only
	if p.live(a, genA) {
		t.Fatal("a buffer let go of is still live")
	}
	if b, _ := p.get(8); &b[0] == &a[0] {
		t.Fatal("a buffer was reused while a read that entered before its release was under way")
	}
	later := g.enter() // entered after a was let go of: does not hold it
	g.leave(read)
	b, genB := p.get(8)
	if &b[0] != &a[0] {
		t.Fatal("the released buffer was not reused once the reads before its release had left")
	}
	if p.live(a, genA) || !p.live(b, genB) {
		t.Fatal("a reused buffer is live under its old generation, or not under its new one")
	}
	g.leave(later)
	if c, _ := p.get(8); &c[0] == &a[0] {
		t.Fatal("a buffer handed out again was handed out twice")
	}
}

// TestFetchedBuffersWhileRead reads a file through a memory cache of two
// blocks while a vectored read holds the pieces of the first: the blocks
// fetched meanwhile evict it, yet its memory must stay as it was until
// the read releases it, and be reused after.
func TestFetchedBuffersWhileRead(t *testing.T) {
	const bs, blocks = testBlockSize, 8
	e := newEnv(t, nil, Config{MemoryCacheSize: 2 * bs, CachePartialOnly: true})
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	data := pattern(21, blocks*bs)
	e.write(t, w, nil, data, 0)
	e.flush(t, w)
	if e.s.fetched == nil {
		t.Fatal("a memory-only store has no pool for fetched blocks")
	}

	p := make([]byte, bs)
	pieces, release, err := e.s.ReadFileVec(e.ctx, e.c, ino, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pieces) != 1 || &pieces[0][0] == &p[0] {
		t.Fatalf("%d pieces; want the fetched block itself", len(pieces))
	}
	held := pieces[0]
	for round := 0; round < 2; round++ {
		for i := 1; i < blocks; i++ {
			e.checkRangeOf(t, ino, data, uint64(i*bs), bs)
		}
	}
	if !bytes.Equal(held, data[:bs]) {
		t.Fatal("the memory of a block held by a read was reused before the read released it")
	}
	release()
	reused := false
	for i := 0; i < maxRetiredBufs+maxFreeBufs && !reused; i++ {
		b, _ := e.s.fetched.get(bs)
		reused = &b[0] == &held[0]
	}
	if !reused {
		t.Error("the buffer of a released block was never reused")
	}
}

// checkRangeOf reads n bytes of ino at off and compares them with data.
func (e *env) checkRangeOf(t *testing.T, ino meta.Ino, data []byte, off uint64, n int) {
	t.Helper()
	got := e.read(t, nil, ino, off, n)
	if !bytes.Equal(got, data[off:off+uint64(n)]) {
		t.Fatalf("%d bytes at %d differ", n, off)
	}
}

// TestFetchedBlockDroppedBeforeHandedOut drops a fetched block from the
// memory cache before the readers waiting for the fetch have it: its
// buffer may be reused by then, so the read fetches the block again.
func TestFetchedBlockDroppedBeforeHandedOut(t *testing.T) {
	obj := &countStore{faultStore: faultStore{Store: objmem.New("x")}, gets: map[string]int{}}
	e := newEnv(t, obj, Config{CachePartialOnly: true})
	ino := e.newFile(t, "f")
	w := e.s.NewWriter(ino, e.c)
	data := pattern(22, testBlockSize)
	e.write(t, w, nil, data, 0)
	e.flush(t, w)
	drops := 0
	testHookFetched = func(s *Store, key string) {
		if drops == 0 {
			drops++
			s.mem.Remove(key)
		}
	}
	defer func() { testHookFetched = nil }()
	p := make([]byte, testBlockSize)
	if err := e.s.ReadFile(e.ctx, e.c, ino, p, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p, data) {
		t.Fatal("read wrong bytes")
	}
	key := e.blockKeys(t, ino)[0]
	if n := obj.count(key); n != 2 {
		t.Errorf("block fetched %d times, want 2: once more after it was dropped before the read had it", n)
	}
}
