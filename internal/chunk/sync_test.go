package chunk

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/mem"
	"github.com/sluicefs/sluice/internal/meta/metatest"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/meta/store/storetest"
	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/file"
	"github.com/sluicefs/sluice/internal/object/prefix"
)

// unsynced returns every unsynced slice record of the volume.
func unsynced(t *testing.T, st store.Store) []meta.UnsyncedSlice {
	t.Helper()
	_, recs := storetest.Unsynced(t, st)
	return recs
}

// syncVolume is a volume on a local-directory bucket, behind a decorator
// as a mount has it.
type syncVolume struct {
	st     store.Store
	bucket string
	obj    object.Store
}

func newSyncVolume(t *testing.T) *syncVolume {
	t.Helper()
	st := kvstore.New(mem.New(t.Name()))
	if _, err := meta.FormatVolume(context.Background(), st, &meta.Format{Name: "test", UUID: "u", Storage: "file",
		Bucket: "b", BlockSize: testBlockSize >> 10}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fs, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &syncVolume{st: st, bucket: filepath.Join(dir, "vol"), obj: prefix.New(fs, "vol/")}
}

// open returns a client and a chunk store wired as a mount wires them.
func (v *syncVolume) open(t *testing.T, conf meta.Config) (*meta.Session, *Store) {
	t.Helper()
	s := New(v.obj, Config{BlockSize: testBlockSize, CachePartialOnly: true})
	conf.RestoreSlice = s.RestoreSlice
	c, err := meta.NewSession(context.Background(), v.st, conf)
	if err != nil {
		t.Fatal(err)
	}
	if !s.TrackSyncs(c.Synced) {
		t.Fatal("a local-directory bucket does not defer syncs")
	}
	return c, s
}

// TestDeferredSyncs checks that a writer on a local-directory bucket
// commits slices unsynced and that a round of the syncer forgets them,
// and that the end of a session leaves none.
func TestDeferredSyncs(t *testing.T) {
	ctx := context.Background()
	v := newSyncVolume(t)
	c, s := v.open(t, meta.Config{})
	a, err := c.Mknod(ctx, meta.RootIno, []byte("f"), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	w := s.NewWriter(a.Ino, metatest.Committer{Session: c})
	data := bytes.Repeat([]byte("0123456789"), testBlockSize/5+3) // two full blocks and a short one
	if err := w.Write(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := unsynced(t, v.st)
	if len(got) != 1 || got[0].Ino != a.Ino || got[0].Idx != 0 || got[0].Size != uint32(len(data)) {
		t.Fatalf("unsynced records after a flush = %+v; want the one slice of inode %d", got, a.Ino)
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if err := s.syncRound(ctx); err != nil {
		t.Fatalf("sync round: %v", err)
	}
	if got := unsynced(t, v.st); len(got) != 0 {
		t.Fatalf("unsynced records after a round = %+v; want none", got)
	}
	// A slice of full blocks alone defers its syncs too.
	if err := w.Write(ctx, data[:testBlockSize], 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := unsynced(t, v.st); len(got) != 1 || got[0].Size != testBlockSize {
		t.Fatalf("unsynced records after a slice of one full block = %+v; want that slice", got)
	}
	if err := s.syncRound(ctx); err != nil {
		t.Fatalf("sync round: %v", err)
	}
	if err := w.Write(ctx, data[:100], 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.StopSyncs(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("close after StopSyncs: %v", err)
	}
	if got := unsynced(t, v.st); len(got) != 0 {
		t.Fatalf("unsynced records after the session ended = %+v", got)
	}

	// With writeback blocks are staged durably: nothing to defer.
	wb := New(v.obj, Config{BlockSize: testBlockSize, CacheDirs: []string{t.TempDir()}, Writeback: true, VolumeUUID: "u"})
	defer wb.Close(ctx)
	if wb.TrackSyncs(c.Synced) {
		t.Error("a store with writeback defers syncs")
	}
}

// TestRestoreAfterCrash loses blocks of slices a session committed
// unsynced, as a crash of its host before the sync would, and checks that
// the client that cleans up after the dead session restores them (zeros
// of the full length), leaves intact blocks and slices no file holds
// alone, and forgets the records.
func TestRestoreAfterCrash(t *testing.T) {
	ctx := context.Background()
	v := newSyncVolume(t)
	dead, ds := v.open(t, meta.Config{})
	defer dead.Close(ctx)
	close(ds.syncs.stop) // the host dies before any round
	<-ds.syncs.done
	write := func(name string, data []byte) meta.Ino {
		t.Helper()
		a, err := dead.Mknod(ctx, meta.RootIno, []byte(name), meta.NewNode{Type: store.TypeFile, Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		w := ds.NewWriter(a.Ino, metatest.Committer{Session: dead})
		if err := w.Write(ctx, data, 0); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		return a.Ino
	}
	two := bytes.Repeat([]byte("ab"), testBlockSize-10) // a full block and a short one
	torn := write("torn", two)
	missing := write("missing", []byte("small file"))
	intact := write("intact", []byte("kept"))
	over := write("over", []byte("first version"))
	full := write("full", bytes.Repeat([]byte("c"), testBlockSize)) // full blocks defer their syncs too
	recs := unsynced(t, v.st)
	if len(recs) != 5 {
		t.Fatalf("unsynced records = %+v; want 5", recs)
	}
	blockFile := func(ino meta.Ino, index int) string {
		t.Helper()
		for _, u := range recs {
			if u.Ino == ino {
				return filepath.Join(v.bucket, filepath.FromSlash(ds.key(u.Id, u.Size, index)))
			}
		}
		t.Fatalf("no record of inode %d", ino)
		return ""
	}
	// The crash: a block cut short, a block gone, and a file overwritten
	// since (its first slice's block lost too, but no file holds it).
	if err := os.Truncate(blockFile(torn, 1), 3); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(blockFile(missing, 0)); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(blockFile(full, 0), testBlockSize/2); err != nil {
		t.Fatal(err)
	}
	overBlock := blockFile(over, 0)
	if _, err := dead.SetAttr(ctx, over, meta.SetSize, &meta.Attr{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(overBlock); err != nil {
		t.Fatal(err)
	}

	later := func() time.Time { return time.Now().Add(time.Hour) }
	c, s := v.open(t, meta.Config{Now: later})
	defer func() {
		s.StopSyncs(ctx)
		c.Close(ctx)
	}()
	if err := c.CleanStaleSessions(ctx); err != nil {
		t.Fatalf("CleanStaleSessions: %v", err)
	}
	if got := unsynced(t, v.st); len(got) != 0 {
		t.Fatalf("unsynced records after the clean-up = %+v; want none", got)
	}
	read := func(ino meta.Ino, n int) []byte {
		t.Helper()
		out := make([]byte, n)
		if err := s.ReadFile(ctx, c, ino, out, 0); err != nil {
			t.Fatalf("read inode %d: %v", ino, err)
		}
		return out
	}
	want := append(append([]byte{}, two[:testBlockSize]...), make([]byte, len(two)-testBlockSize)...)
	if got := read(torn, len(two)); !bytes.Equal(got, want) {
		t.Error("a file whose second block was cut short does not read as its first block, then zeros")
	}
	if got := read(missing, 10); !bytes.Equal(got, make([]byte, 10)) {
		t.Errorf("a file whose block was lost reads %q; want zeros", got)
	}
	if got := read(full, testBlockSize); !bytes.Equal(got, make([]byte, testBlockSize)) {
		t.Error("a file of one full block cut short does not read as zeros")
	}
	if got := read(intact, 4); string(got) != "kept" {
		t.Errorf("an intact file reads %q after the clean-up", got)
	}
	if _, err := os.Stat(overBlock); !os.IsNotExist(err) {
		t.Errorf("the block of a slice no file holds was restored (stat: %v)", err)
	}
}

// TestRestoreLeavesIntactBlocks checks RestoreSlice on blocks that are
// all there: nothing counted, nothing rewritten.
func TestRestoreLeavesIntactBlocks(t *testing.T) {
	ctx := context.Background()
	v := newSyncVolume(t)
	s := New(v.obj, Config{BlockSize: testBlockSize})
	data := []byte(strings.Repeat("x", 100))
	if err := s.putBlock(ctx, 9, 0, data); err != nil {
		t.Fatal(err)
	}
	lost, err := s.RestoreSlice(ctx, 9, 100)
	if err != nil || lost != 0 {
		t.Fatalf("RestoreSlice of an intact slice = %d, %v; want 0, nil", lost, err)
	}
	r, err := v.obj.Get(ctx, s.key(9, 100, 0), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var b bytes.Buffer
	b.ReadFrom(r)
	if b.String() != string(data) {
		t.Fatal("RestoreSlice changed an intact block")
	}
}

// TestStopSyncsGivesUp checks that StopSyncs returns once its context
// ends while a background round is stuck (on an engine that stopped
// answering), instead of waiting for the round.
func TestStopSyncsGivesUp(t *testing.T) {
	v := newSyncVolume(t)
	_, s := v.open(t, meta.Config{})
	y := s.syncs
	y.round.Lock() // the background round that starts now cannot end
	select {
	case y.kick <- struct{}{}:
	default:
	}
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.StopSyncs(ctx) }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("StopSyncs reported success with a round still under way")
		}
	case <-time.After(10 * time.Second):
		t.Error("StopSyncs still waits for a stuck round 10 s after its context ended")
	}
	y.round.Unlock()
}
