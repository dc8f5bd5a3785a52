package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// contendEngines are the engines TestContendedWrites runs on: the
// embedded default, an optimistic network engine, and the metadata
// server, which runs a mount's operations concurrently.
var contendEngines = []string{"sqlite3", "redis", "sluice"}

// Contended writes: each writer rewrites pages of its own and pages all
// writers share, fsyncing as it goes. The pages lie in several chunks:
// a mount commits the slices of one chunk of a file in order, and of
// different chunks at once, as a database's writers spread over a file
// of many chunks make it do.
const (
	contendChunk   = 64 << 20 // meta.ChunkSize
	contendPage    = 8192     // a database's page
	contendBlock   = 4096     // what is checked: one write's bytes, whole
	contendShared  = 4        // pages every writer writes: the first of chunks 0, 2, 4, 6
	contendOwn     = 4        // pages of each writer, after the first of chunk w
	contendWrites  = 160      // per writer
	contendSyncGap = 8        // writes between fsyncs
)

// TestContendedWrites is issue 51: PostgreSQL's checkpointer and
// background writer wrote one file through one --writeback mount on the
// metadata server, and got EIO when slice commits gave up after 50
// conflicting attempts. Eight writers, each with a descriptor of its own,
// write and fsync one file, through one mount and then through two:
// every write, fsync and close must succeed, and every block must then
// hold what some writer wrote there last.
func TestContendedWrites(t *testing.T) {
	for _, engine := range contendEngines {
		t.Run(engine, func(t *testing.T) {
			v := newVolumeOn(t, engine)
			a, b := v.mnt, filepath.Join(v.dir, "mnt2")
			// Short kernel caches: each mount sees the other's writes
			// soon after they are closed.
			args := []string{"--writeback", "--attr-cache", "0.1", "--entry-cache", "0.1", "--dir-entry-cache", "0.1"}
			v.mountAt(t, a, args...)
			v.mountAt(t, b, args...)
			t.Run("one-mount", func(t *testing.T) {
				contendWrite(t, "one", []string{a, a, a, a, a, a, a, a})
				contendCheck(t, filepath.Join(a, "one"), 8)
				contendCheck(t, filepath.Join(b, "one"), 8)
			})
			t.Run("two-mounts", func(t *testing.T) {
				contendWrite(t, "two", []string{a, b, a, b, a, b, a, b})
				contendCheck(t, filepath.Join(a, "two"), 8)
				contendCheck(t, filepath.Join(b, "two"), 8)
			})
			if log, err := os.ReadFile(v.log); err == nil && bytes.Contains(log, []byte("transaction conflict")) {
				t.Errorf("the mounts' log reports conflicts:\n%s", log)
			}
		})
	}
}

// contendWrite creates file name in the volume and has one writer per
// mount point in mnts write it at once, each through a descriptor of its
// own, failing t on any error.
func contendWrite(t *testing.T, name string, mnts []string) {
	t.Helper()
	f, err := os.Create(filepath.Join(mnts[0], name))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(mnts))
	for w, mnt := range mnts {
		wg.Go(func() {
			if err := contendWriter(filepath.Join(mnt, name), w); err != nil {
				errs <- fmt.Errorf("writer %d on %s: %w", w, mnt, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// contendWriter is writer w: write i goes to a shared page (odd i) or a
// page of its own (even i), and every contendSyncGap writes and at the
// end it fsyncs.
func contendWriter(path string, w int) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	for i := range contendWrites {
		off := contendOffset(contendPageOf(w, i))
		if _, err := f.WriteAt(contendData(w, i), off); err != nil {
			f.Close()
			return fmt.Errorf("write %d at %d: %w", i, off, err)
		}
		if i%contendSyncGap == contendSyncGap-1 {
			if err := f.Sync(); err != nil {
				f.Close()
				return fmt.Errorf("fsync after write %d: %w", i, err)
			}
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("last fsync: %w", err)
	}
	return f.Close()
}

// contendPage names a page: shared page s is {-1, s}, page k of writer
// w's own is {w, k}.
type contendPageID struct{ owner, k int }

// contendPageOf is the page write i of writer w writes: a shared one
// (odd i) or one of its own (even i).
func contendPageOf(w, i int) contendPageID {
	if i%2 == 1 {
		return contendPageID{-1, i / 2 % contendShared}
	}
	return contendPageID{w, i / 2 % contendOwn}
}

// contendOffset is where page p lies in the file.
func contendOffset(p contendPageID) int64 {
	if p.owner < 0 {
		return int64(2*p.k) * contendChunk
	}
	return int64(p.owner)*contendChunk + int64(1+p.k)*contendPage
}

// contendData is the page write i of writer w writes: blocks that each
// name the writer, the write and the block.
func contendData(w, i int) []byte {
	p := make([]byte, 0, contendPage)
	for blk := 0; blk < contendPage/contendBlock; blk++ {
		head := fmt.Appendf(nil, "writer %02d write %04d block %d\n", w, i, blk)
		for len(p) < (blk+1)*contendBlock {
			p = append(p, head[:min(len(head), (blk+1)*contendBlock-len(p))]...)
		}
	}
	return p
}

// contendCheck reads path, written by writers writers, and checks that
// each block written holds, whole, the last write of some writer over
// it, and that the file ends after the last page written. A mount may
// show the other mount's last writes only once its caches expire.
func contendCheck(t *testing.T, path string, writers int) {
	t.Helper()
	eventually(t, path, func() error { return contendVerify(path, writers) })
}

func contendVerify(path string, writers int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	// last[p] holds, for each writer that wrote page p, its last write
	// there.
	last := map[contendPageID]map[int]int{}
	var size int64
	for w := range writers {
		for i := range contendWrites {
			p := contendPageOf(w, i)
			if last[p] == nil {
				last[p] = map[int]int{}
			}
			last[p][w] = i
			size = max(size, contendOffset(p)+contendPage)
		}
	}
	if st, err := f.Stat(); err != nil {
		return err
	} else if st.Size() != size {
		return fmt.Errorf("%d bytes, want %d", st.Size(), size)
	}
	got := make([]byte, contendPage)
	for p, ws := range last {
		if _, err := f.ReadAt(got, contendOffset(p)); err != nil {
			return fmt.Errorf("read page %v: %w", p, err)
		}
		for blk := 0; blk < contendPage/contendBlock; blk++ {
			b := got[blk*contendBlock : (blk+1)*contendBlock]
			var ok bool
			var want []string
			for w, i := range ws {
				exp := contendData(w, i)[blk*contendBlock : (blk+1)*contendBlock]
				ok = ok || bytes.Equal(b, exp)
				want = append(want, fmt.Sprintf("writer %d write %d", w, i))
			}
			if !ok {
				slices.Sort(want)
				return fmt.Errorf("block %d of page %v starts %q, want the last write of one of: %v", blk, p, b[:min(40, len(b))], want)
			}
		}
	}
	return nil
}
