package meta_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// memVolume returns a volume formatted on a fresh in-memory engine.
func memVolume(t *testing.T) store.Store {
	t.Helper()
	st := kvstore.New(mem.New(t.Name()))
	if _, err := meta.FormatVolume(context.Background(), st, &meta.Format{Name: "test", UUID: "u", Storage: "mem", Bucket: "x", BlockSize: 4096}); err != nil {
		t.Fatal(err)
	}
	return st
}

// client opens a client of the volume in st, closed when the test ends.
func client(t *testing.T, st store.Store, conf meta.Config) *meta.Session {
	t.Helper()
	ctx := context.Background()
	c, err := meta.NewSession(ctx, st, conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(ctx) })
	return c
}

// countingStore counts the read transactions run on it.
type countingStore struct {
	store.Store
	views int
}

func (s *countingStore) View(ctx context.Context, fn func(store.Tx) error) error {
	s.views++
	return s.Store.View(ctx, fn)
}

// TestStatahead checks what LookupAhead answers once a directory walked
// name after name has been listed (Config.Statahead): names from the
// listing without a read of the engine and with their age; this client's
// own changes (mode, unlink, rename, a directory closed to others) at
// once; a name another mount created, found; another mount's changes no
// later than Statahead after the listing; and Lookup always the engine's.
func TestStatahead(t *testing.T) {
	ctx := context.Background()
	base := memVolume(t)
	clk := &testClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	const ttl = time.Second
	st := &countingStore{Store: base}
	a := client(t, st, meta.Config{Now: clk.now, Statahead: ttl})
	b := client(t, base, meta.Config{Now: clk.now}) // another mount

	d, err := b.Mknod(ctx, meta.RootIno, []byte("d"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*meta.Attr{}
	for i := range 10 {
		name := fmt.Sprintf("f%d", i)
		f, err := b.Mknod(ctx, d.Ino, []byte(name), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	lookup := func(c context.Context, name string) (*meta.Attr, time.Duration, error) {
		t.Helper()
		return a.LookupAhead(c, d.Ino, []byte(name))
	}
	found := func(name string, wantAge time.Duration) *meta.Attr {
		t.Helper()
		got, age, err := lookup(ctx, name)
		if err != nil {
			t.Fatalf("lookup %s: %v", name, err)
		}
		if age != wantAge {
			t.Fatalf("lookup %s: age %v, want %v", name, age, wantAge)
		}
		return got
	}
	missing := func(name string) {
		t.Helper()
		if _, _, err := lookup(ctx, name); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("lookup %s: %v, want ENOENT", name, err)
		}
	}

	// Three lookups the engine answers list the directory.
	for _, name := range []string{"f0", "f1", "f2"} {
		found(name, 0)
	}
	clk.advance(100 * time.Millisecond)
	views := st.views
	if got := found("f3", 100*time.Millisecond); got.Ino != files["f3"].Ino {
		t.Fatalf("f3 is inode %d, want %d", got.Ino, files["f3"].Ino)
	}
	found("f4", 100*time.Millisecond)
	if st.views != views {
		t.Fatalf("%d reads of the engine for names listed, want 0", st.views-views)
	}

	// This client's own changes show at once.
	if _, err := a.SetAttr(ctx, files["f5"].Ino, meta.SetMode, &meta.Attr{Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	if got := found("f5", 0); got.Mode != 0o600 {
		t.Fatalf("f5 mode %o after this client's chmod, want 600", got.Mode)
	}
	if err := a.Unlink(ctx, d.Ino, []byte("f6")); err != nil {
		t.Fatal(err)
	}
	missing("f6")
	if err := a.Rename(ctx, d.Ino, []byte("f7"), d.Ino, []byte("g7"), 0); err != nil {
		t.Fatal(err)
	}
	missing("f7")
	if got := found("g7", 0); got.Ino != files["f7"].Ino {
		t.Fatalf("g7 is inode %d, want %d", got.Ino, files["f7"].Ino)
	}
	// The unlink and rename wrote the directory's times: the listing
	// still answers the other names.
	found("f8", 100*time.Millisecond)

	// A name another mount created is found; what another mount changed
	// may be seen as listed, but never for longer than the listing lasts.
	if _, err := b.Mknod(ctx, d.Ino, []byte("h"), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	found("h", 0)
	if _, err := b.SetAttr(ctx, files["f8"].Ino, meta.SetMode, &meta.Attr{Mode: 0o640}); err != nil {
		t.Fatal(err)
	}
	if err := b.Unlink(ctx, d.Ino, []byte("f9")); err != nil {
		t.Fatal(err)
	}
	clk.advance(800 * time.Millisecond)
	if got := found("f8", 900*time.Millisecond); got.Mode != 0o644 {
		t.Fatalf("f8 mode %o from the listing, want 644", got.Mode)
	}
	if got, err := a.Lookup(ctx, d.Ino, []byte("f8")); err != nil || got.Mode != 0o640 {
		t.Fatalf("Lookup f8: %v, mode %o, want 640 from the engine", err, got.Mode)
	}
	clk.advance(100 * time.Millisecond)
	if got := found("f8", 0); got.Mode != 0o640 {
		t.Fatalf("f8 mode %o once the listing expired, want 640", got.Mode)
	}
	missing("f9")

	// List again, then close the directory to others: a caller who may
	// no longer search it is refused at once.
	for _, name := range []string{"f0", "f1", "f2"} {
		found(name, 0)
	}
	found("f3", 0)
	user := meta.WithCred(ctx, meta.Cred{Uid: 1000, Gid: 1000})
	if _, _, err := lookup(user, "f4"); err != nil {
		t.Fatalf("lookup as a user: %v", err)
	}
	if _, err := a.SetAttr(ctx, d.Ino, meta.SetMode, &meta.Attr{Mode: 0o700}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := lookup(user, "f4"); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("lookup as a user in a closed directory: %v, want EACCES", err)
	}
	// Listed again by root, the closed directory still refuses the user.
	for _, name := range []string{"f0", "f1", "f2"} {
		found(name, 0)
	}
	views = st.views
	found("f3", 0)
	if st.views != views {
		t.Fatal("the directory was not listed again")
	}
	if _, _, err := lookup(user, "f4"); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("lookup as a user in a closed, listed directory: %v, want EACCES", err)
	}
}

// TestStataheadNotWhileWriting: a listing read while this client writes
// names is not kept, so a listing never predates the client's own change.
func TestStataheadNotWhileWriting(t *testing.T) {
	ctx := context.Background()
	base := memVolume(t)
	st := &countingStore{Store: base}
	a := client(t, st, meta.Config{Statahead: time.Hour})
	for i := range 5 {
		if _, err := a.Mknod(ctx, meta.RootIno, fmt.Appendf(nil, "f%d", i), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
	}
	// A write of an entry under way while the third lookup lists: the
	// listing is dropped, and the next lookups read the engine.
	release := make(chan struct{})
	writing := make(chan struct{})
	done := make(chan error)
	go func() {
		done <- a.Store().Update(ctx, func(tx store.Tx) error {
			tx.SetEdge(meta.RootIno, store.Edge{Name: []byte("x"), Ino: 999, Type: store.TypeFile})
			close(writing)
			<-release
			return errors.New("rolled back")
		})
	}()
	<-writing
	for i := range 3 {
		if _, _, err := a.LookupAhead(ctx, meta.RootIno, fmt.Appendf(nil, "f%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	<-done
	views := st.views
	if _, age, err := a.LookupAhead(ctx, meta.RootIno, []byte("f3")); err != nil || age != 0 {
		t.Fatalf("lookup f3: age %v, %v", age, err)
	}
	if st.views == views {
		t.Fatal("f3 answered from a listing read while a write was under way")
	}
}

// TestStataheadRests: a directory whose listing answered few of its names
// before it expired, or that is too big to list, is not listed again for
// a while, so lookups of a few names over and over do not pay a listing
// each time.
func TestStataheadRests(t *testing.T) {
	ctx := context.Background()
	base := memVolume(t)
	clk := &testClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	st := &countingStore{Store: base}
	c := client(t, st, meta.Config{Now: clk.now, Statahead: time.Second})
	mkdir := func(name string, files int) meta.Ino {
		t.Helper()
		d, err := c.Mknod(ctx, meta.RootIno, []byte(name), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
		if err != nil {
			t.Fatal(err)
		}
		for i := range files {
			if _, err := c.Mknod(ctx, d.Ino, fmt.Appendf(nil, "f%04d", i), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
				t.Fatal(err)
			}
		}
		return d.Ino
	}
	// reads returns how many engine reads three rounds of lookups of
	// f0000-f0007 in dir take, the listing expiring between rounds.
	reads := func(dir meta.Ino) int {
		t.Helper()
		views := st.views
		for range 3 {
			for i := range 8 {
				if _, _, err := c.LookupAhead(ctx, dir, fmt.Appendf(nil, "f%04d", i)); err != nil {
					t.Fatal(err)
				}
			}
			clk.advance(1100 * time.Millisecond)
		}
		return st.views - views
	}
	few := mkdir("few", 100)
	// Round 1: three lookups, the listing, five answers from it; rounds
	// 2 and 3: the listing answered 5 of 100 names, so eight lookups each.
	if got := reads(few); got != 4+8+8 {
		t.Errorf("%d engine reads for 24 lookups of 8 names of 100, want 20 (one listing, then none)", got)
	}
	clk.advance(10 * time.Second)
	views := st.views
	for i := range 3 {
		c.LookupAhead(ctx, few, fmt.Appendf(nil, "f%04d", i))
	}
	if _, _, err := c.LookupAhead(ctx, few, []byte("f0003")); err != nil || st.views != views+4 {
		t.Errorf("after the rest: %d engine reads for 4 lookups (%v), want 4: three lookups and a listing", st.views-views, err)
	}
	big := mkdir("big", 1025)
	if got := reads(big); got != 24+1 {
		t.Errorf("%d engine reads for 24 lookups in a directory too big to list, want 25 (one listing tried)", got)
	}
}

// gatedStore holds the first listing (a read of a directory's entries)
// until gate closes, once armed.
type gatedStore struct {
	store.Store
	armed   atomic.Bool
	entered chan struct{}
	gate    chan struct{}
}

type gatedTx struct {
	store.Tx
	s *gatedStore
}

func (t gatedTx) Edges(parent meta.Ino, after []byte, limit int) ([]store.Edge, error) {
	if t.s.armed.CompareAndSwap(true, false) {
		close(t.s.entered)
		<-t.s.gate
	}
	return t.Tx.Edges(parent, after, limit)
}

func (s *gatedStore) View(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.View(ctx, func(tx store.Tx) error { return fn(gatedTx{tx, s}) })
}

// TestStataheadForgetDuringListing: a listing read while ForgetAhead
// dropped its directory (a lock taken meanwhile) is not kept.
func TestStataheadForgetDuringListing(t *testing.T) {
	ctx := context.Background()
	counted := &countingStore{Store: memVolume(t)}
	st := &gatedStore{Store: counted, entered: make(chan struct{}), gate: make(chan struct{})}
	c := client(t, st, meta.Config{Statahead: time.Hour})
	for i := range 5 {
		if _, err := c.Mknod(ctx, meta.RootIno, fmt.Appendf(nil, "f%d", i), meta.NewNode{Type: store.TypeFile, Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"f0", "f1"} {
		if _, _, err := c.LookupAhead(ctx, meta.RootIno, []byte(name)); err != nil {
			t.Fatal(err)
		}
	}
	st.armed.Store(true)
	done := make(chan error)
	go func() {
		_, _, err := c.LookupAhead(ctx, meta.RootIno, []byte("f2")) // lists, held at the gate
		done <- err
	}()
	<-st.entered
	c.ForgetAhead(meta.RootIno)
	close(st.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	views := counted.views
	if _, _, err := c.LookupAhead(ctx, meta.RootIno, []byte("f3")); err != nil {
		t.Fatal(err)
	}
	if counted.views == views {
		t.Fatal("f3 answered from a listing read while ForgetAhead dropped its directory")
	}
}
