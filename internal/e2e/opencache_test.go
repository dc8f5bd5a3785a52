package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestOpenCache mounts a volume twice, one mount with --open-cache and
// five-minute kernel caches. Its own rewrite of a file shows at its next
// open; opens of an unchanged file do not read the engine; after another
// mount's rewrite it reads one version or the other whole, never the new
// bytes cut to the old length; a lock brings the new one, and so does
// every open after the lock.
func TestOpenCache(t *testing.T) {
	v := newVolume(t)
	a, b := v.mnt, filepath.Join(v.dir, "mnt2")
	v.mountAt(t, a, "--open-cache", "300", "--attr-cache", "300", "--entry-cache", "300")
	v.mountAt(t, b)
	fa, fb := filepath.Join(a, "f"), filepath.Join(b, "f")

	write(t, fa, []byte("one"))
	if got := readFile(t, fa); got != "one" {
		t.Fatalf("a reads %q, want %q", got, "one")
	}
	write(t, fa, []byte("two!"))
	if got := readFile(t, fa); got != "two!" {
		t.Fatalf("a reads %q after its own rewrite, want %q", got, "two!")
	}
	if got := readFile(t, fb); got != "two!" {
		t.Fatalf("b reads %q, want %q", got, "two!")
	}

	// Opens of an unchanged file do not read the engine.
	before := readTransactions(t, a)
	for range 20 {
		f, err := os.Open(fa)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if n := readTransactions(t, a) - before; n > 2 {
		t.Errorf("20 opens of an unchanged file read the engine %d times, want at most 2", n)
	}

	// After b's rewrite, a reads one version or the other, whole: the
	// kernel fetches the attributes again after a read (the access time)
	// and its handle follows them.
	write(t, fb, []byte("three"))
	if got := readFile(t, fa); got != "two!" && got != "three" {
		t.Fatalf("a reads %q after b's rewrite, want %q or %q", got, "two!", "three")
	}

	f, err := os.Open(fa)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	n, err := f.ReadAt(buf, 0)
	if string(buf[:n]) != "three" {
		t.Fatalf("a reads %q, %v under a lock, want %q", buf[:n], err, "three")
	}
	f.Close()
	if got := readFile(t, fa); got != "three" {
		t.Fatalf("a reads %q after the lock, want %q", got, "three")
	}
}

// readTransactions returns how many read transactions the mount at mnt
// has run in the metadata engine.
func readTransactions(t *testing.T, mnt string) int {
	t.Helper()
	const prefix = `sluice_meta_transaction_duration_seconds_count{kind="read"} `
	for _, line := range strings.Split(readFile(t, filepath.Join(mnt, ".stats")), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("stats line %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("no %q in %s/.stats", prefix, mnt)
	return 0
}
