package file_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/file"
	"github.com/sluicefs/sluice/internal/object/objecttest"
)

// TestReportCold checks that a ranged Get under object.ReportCold reads
// the right bytes and tells whether they came from the page cache or the
// disk: fresh after a Put, cold once the file's pages were dropped.
func TestReportCold(t *testing.T) {
	dir := t.TempDir()
	s, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10/16) // 64 KiB: buffered, not direct I/O
	objecttest.Put(t, s, "chunks/b", data)
	get := func(off, n int64) ([]byte, bool) {
		t.Helper()
		var cold bool
		r, err := s.Get(object.ReportCold(context.Background(), &cold), "chunks/b", off, n)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		got, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return got, cold
	}
	got, cold := get(5000, 4096)
	if !bytes.Equal(got, data[5000:5000+4096]) {
		t.Fatalf("ranged read gave %d wrong bytes", len(got))
	}
	if cold {
		t.Errorf("a read of a file just written reported the disk")
	}
	dropPages(t, filepath.Join(dir, "chunks", "b"))
	got, cold = get(40000, 4096)
	if !bytes.Equal(got, data[40000:40000+4096]) {
		t.Fatalf("ranged read after dropping the pages gave wrong bytes")
	}
	if !cold {
		t.Errorf("a read of a file whose pages were dropped did not report the disk")
	}
	if got, _ := get(int64(len(data))-10, 4096); !bytes.Equal(got, data[len(data)-10:]) {
		t.Errorf("a range past the end gave %q, want the last 10 bytes", got)
	}
}

// dropPages writes back and drops the page cache of the file at path.
func dropPages(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatalf("fadvise: %v", err)
	}
}
