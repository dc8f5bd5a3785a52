// Package objecttest is the conformance suite every object.Store runs:
// backends and decorators alike. A backend's test file calls Run with a
// constructor for a fresh, empty store, and Bench from a benchmark.
//
// The suite never uses a key that is a path prefix of another key ("a/b"
// and "a/b/c"): a directory-backed store cannot hold both.
package objecttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/sluicefs/sluice/internal/object"
)

// Run runs the conformance suite. newStore must return a fresh, empty
// store each time it is called; every subtest calls it once.
func Run(t *testing.T, newStore func(t *testing.T) object.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s object.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"Overwrite", testOverwrite},
		{"Ranges", testRanges},
		{"NotFound", testNotFound},
		{"Delete", testDelete},
		{"List", testList},
		{"ListPages", testListPages},
		{"Concurrent", testConcurrent},
		{"AtomicOverwrite", testAtomicOverwrite},
		{"Large", testLarge},
		{"FailedPut", testFailedPut},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newStore(t)) })
	}
}

// Data returns n deterministic pseudo-random (incompressible) bytes.
func Data(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Put stores data under key and fails the test on error.
func Put(t testing.TB, s object.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), key, bytes.NewReader(data)); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

// Get reads key with off and limit and fails the test on error.
func Get(t testing.TB, s object.Store, key string, off, limit int64) []byte {
	t.Helper()
	b, err := get(s, key, off, limit)
	if err != nil {
		t.Fatalf("Get(%q, %d, %d): %v", key, off, limit, err)
	}
	return b
}

// get reads key with off and limit.
func get(s object.Store, key string, off, limit int64) ([]byte, error) {
	rc, err := s.Get(context.Background(), key, off, limit)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// checkBytes fails the test if got differs from want, without printing
// megabytes of data.
func checkBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s: got %d bytes, want %d bytes (equal prefix %d)", what, len(got), len(want), commonPrefix(got, want))
	}
}

// commonPrefix returns the length of the common prefix of a and b.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func testRoundTrip(t *testing.T, s object.Store) {
	ctx := context.Background()
	compressible := bytes.Repeat([]byte("sluice block "), 10000)
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"small", []byte("hello")},
		{"compressible", compressible},
		{"5MiB", Data(1, 5<<20)},
	}
	for _, tt := range tests {
		// Block keys end in their length, the way the chunk layer names them.
		for _, key := range []string{"plain/" + tt.name, fmt.Sprintf("chunks/0/0/1_0_%d", len(tt.data))} {
			t.Run(tt.name+"/"+key, func(t *testing.T) {
				Put(t, s, key, tt.data)
				checkBytes(t, "Get", Get(t, s, key, 0, -1), tt.data)
				info, err := s.Head(ctx, key)
				if err != nil {
					t.Fatalf("Head(%q): %v", key, err)
				}
				if info.Key != key || info.ModTime.IsZero() {
					t.Errorf("Head(%q) = %+v, want Key %q and a ModTime", key, info, key)
				}
			})
		}
	}
}

func testOverwrite(t *testing.T, s object.Store) {
	Put(t, s, "dir/obj", Data(1, 1000))
	Put(t, s, "dir/obj", []byte("short"))
	checkBytes(t, "Get after overwrite", Get(t, s, "dir/obj", 0, -1), []byte("short"))
	infos, err := s.List(context.Background(), "", "", 0)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(infos) != 1 || infos[0].Key != "dir/obj" {
		t.Errorf("List after overwrite = %v, want only dir/obj", keys(infos))
	}
}

func testRanges(t *testing.T, s object.Store) {
	data := Data(2, 10000)
	for _, key := range []string{"r/obj", "r/1_0_10000"} {
		Put(t, s, key, data)
		tests := []struct {
			off, limit int64
			want       []byte
		}{
			{0, -1, data},
			{0, 10, data[:10]},
			{100, 50, data[100:150]},
			{5000, -1, data[5000:]},
			{9990, 100, data[9990:]},
			{10000, -1, nil},
			{10000, 10, nil},
			{20000, 10, nil},
			{100, 0, nil},
		}
		for _, tt := range tests {
			got := Get(t, s, key, tt.off, tt.limit)
			checkBytes(t, fmt.Sprintf("Get(%q, %d, %d)", key, tt.off, tt.limit), got, tt.want)
		}
	}
}

func testNotFound(t *testing.T, s object.Store) {
	ctx := context.Background()
	Put(t, s, "exists/obj", []byte("x"))
	for _, key := range []string{"missing", "exists/missing", "exists", "exists/obj/below"} {
		if _, err := s.Get(ctx, key, 0, -1); !errors.Is(err, object.ErrNotFound) {
			t.Errorf("Get(%q) error = %v, want ErrNotFound", key, err)
		}
		if _, err := s.Head(ctx, key); !errors.Is(err, object.ErrNotFound) {
			t.Errorf("Head(%q) error = %v, want ErrNotFound", key, err)
		}
	}
}

func testDelete(t *testing.T, s object.Store) {
	ctx := context.Background()
	Put(t, s, "d/e/obj", []byte("x"))
	Put(t, s, "d/other", []byte("y"))
	for range 2 {
		if err := s.Delete(ctx, "d/e/obj"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	if err := s.Delete(ctx, "never/was"); err != nil {
		t.Errorf("Delete of a missing key: %v", err)
	}
	if _, err := s.Head(ctx, "d/e/obj"); !errors.Is(err, object.ErrNotFound) {
		t.Errorf("Head after Delete error = %v, want ErrNotFound", err)
	}
	checkBytes(t, "sibling after Delete", Get(t, s, "d/other", 0, -1), []byte("y"))
	// A deleted key's directory can hold a new object.
	Put(t, s, "d/e/again", []byte("z"))
	checkBytes(t, "Get after re-Put", Get(t, s, "d/e/again", 0, -1), []byte("z"))
}

// listKeys are chosen so that a per-directory walk in name order differs
// from key order: "a-c" < "a/b-c" < "a/b/c" although the directory "a"
// sorts before the file "a-c" and "b" before "b-c".
var listKeys = []string{
	"a-c", "a/b-c", "a/b/c", "a/b/d", "a/bc", "a0", "b", "chunks/0/0/1_0_100", "chunks/0/0/1_1_100", "chunks/0/1/1000_0_5",
}

func testList(t *testing.T, s object.Store) {
	ctx := context.Background()
	for i, k := range slices.Backward(listKeys) {
		Put(t, s, k, Data(uint64(i), i))
	}
	tests := []struct {
		prefix, marker string
		limit          int
		want           []string
	}{
		{"", "", 0, listKeys},
		{"", "", 3, listKeys[:3]},
		{"", "a-c", 2, []string{"a/b-c", "a/b/c"}},
		{"", "a/b", 0, listKeys[1:]},
		{"", "a/b/c", 0, listKeys[3:]},
		{"", "a/b/", 1, []string{"a/b/c"}},
		{"a", "", 0, listKeys[:6]},
		{"a/", "", 0, []string{"a/b-c", "a/b/c", "a/b/d", "a/bc"}},
		{"a/b", "", 0, []string{"a/b-c", "a/b/c", "a/b/d", "a/bc"}},
		{"a/b/", "", 0, []string{"a/b/c", "a/b/d"}},
		{"a/b/", "a/b/c", 0, []string{"a/b/d"}},
		{"a/b/", "z", 0, nil},
		{"chunks/0/", "", 0, listKeys[7:]},
		{"chunks/0/0/", "chunks/0/0/1_0_100", 5, []string{"chunks/0/0/1_1_100"}},
		{"chunks/0/0/1_0_100", "", 0, []string{"chunks/0/0/1_0_100"}},
		{"chunks/1/", "", 0, nil},
		{"nothing", "", 0, nil},
		{"b", "", 10, []string{"b"}},
	}
	for _, tt := range tests {
		infos, err := s.List(ctx, tt.prefix, tt.marker, tt.limit)
		if err != nil {
			t.Fatalf("List(%q, %q, %d): %v", tt.prefix, tt.marker, tt.limit, err)
		}
		if got := keys(infos); !slices.Equal(got, tt.want) {
			t.Errorf("List(%q, %q, %d) = %q, want %q", tt.prefix, tt.marker, tt.limit, got, tt.want)
		}
	}
	// Sizes are whatever Head reports: a compressing decorator reports
	// stored sizes.
	infos, err := s.List(ctx, "", "", 0)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, info := range infos {
		h, err := s.Head(ctx, info.Key)
		if err != nil {
			t.Fatalf("Head(%q): %v", info.Key, err)
		}
		if h.Size != info.Size || info.ModTime.IsZero() {
			t.Errorf("List entry %+v, but Head reports size %d", info, h.Size)
		}
	}
}

func testListPages(t *testing.T, s object.Store) {
	ctx := context.Background()
	var want []string
	for i := range 3 {
		for j := range 7 {
			k := fmt.Sprintf("p/%d/%d_%d", i, j, j*10)
			want = append(want, k)
			Put(t, s, k, nil)
		}
		want = append(want, fmt.Sprintf("p/%d-x", i))
		Put(t, s, fmt.Sprintf("p/%d-x", i), nil)
	}
	Put(t, s, "q", nil)
	slices.Sort(want)
	for _, limit := range []int{1, 2, 5, len(want), 100} {
		var got []string
		for marker := ""; ; {
			infos, err := s.List(ctx, "p/", marker, limit)
			if err != nil {
				t.Fatalf("List(%q, %d): %v", marker, limit, err)
			}
			if len(infos) > limit {
				t.Fatalf("List(%q, %d) returned %d keys", marker, limit, len(infos))
			}
			got = append(got, keys(infos)...)
			if len(infos) < limit {
				break
			}
			marker = infos[len(infos)-1].Key
		}
		if !slices.Equal(got, want) {
			t.Errorf("pages of %d = %q, want %q", limit, got, want)
		}
	}
}

func testConcurrent(t *testing.T, s object.Store) {
	const workers, perWorker = 4, 16
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				key := fmt.Sprintf("c/%d/%d", w, i)
				data := Data(uint64(w*perWorker+i), 1000+i)
				if err := s.Put(context.Background(), key, bytes.NewReader(data)); err != nil {
					t.Errorf("Put(%q): %v", key, err)
					return
				}
				got, err := get(s, key, 0, -1)
				if err != nil || !bytes.Equal(got, data) {
					t.Errorf("Get(%q) = %d bytes, %v; want %d bytes", key, len(got), err, len(data))
				}
			}
		})
	}
	wg.Wait()
	infos, err := s.List(context.Background(), "c/", "", 0)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(infos) != workers*perWorker {
		t.Errorf("List found %d keys, want %d", len(infos), workers*perWorker)
	}
}

// testAtomicOverwrite checks that readers racing with writers of one key see
// a whole object, never a mix or a partial one.
func testAtomicOverwrite(t *testing.T, s object.Store) {
	const size, rounds = 64 << 10, 20
	const key = "atomic/obj"
	Put(t, s, key, bytes.Repeat([]byte{0}, size))
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := range rounds {
				data := bytes.Repeat([]byte{byte(1 + w*rounds + i)}, size)
				if err := s.Put(context.Background(), key, bytes.NewReader(data)); err != nil {
					t.Errorf("Put: %v", err)
					return
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range rounds {
				got, err := get(s, key, 0, -1)
				if err != nil {
					t.Errorf("Get: %v", err)
					return
				}
				if len(got) != size || bytes.Count(got, got[:1]) != size {
					t.Errorf("Get returned a torn object of %d bytes", len(got))
					return
				}
			}
		})
	}
	wg.Wait()
}

// onlyReader hides every method of a reader but Read, so a store cannot
// learn the length in advance and must stream it.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// testLarge stores objects bigger than a multipart part of S3-like stores
// (tests run them with 5 MiB parts), with and without a known length, and
// reads ranges across part boundaries.
func testLarge(t *testing.T, s object.Store) {
	const size = 12<<20 + 12345
	data := Data(3, size)
	tests := []struct {
		name string
		r    io.Reader
	}{
		{"streamed", onlyReader{bytes.NewReader(data)}},
		{"sized", bytes.NewReader(data)},
		{"exactParts", onlyReader{bytes.NewReader(data[:10<<20])}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "large/" + tt.name
			want := data
			if tt.name == "exactParts" {
				want = data[:10<<20]
			}
			if err := s.Put(context.Background(), key, tt.r); err != nil {
				t.Fatalf("Put(%q): %v", key, err)
			}
			checkBytes(t, "Get", Get(t, s, key, 0, -1), want)
			n := int64(len(want))
			for _, r := range [][2]int64{{5<<20 - 10, 20}, {n - 100, -1}, {1, n - 2}, {n - 1, 10}} {
				got := Get(t, s, key, r[0], r[1])
				end := n
				if r[1] >= 0 {
					end = min(n, r[0]+r[1])
				}
				checkBytes(t, fmt.Sprintf("Get(%d, %d)", r[0], r[1]), got, want[r[0]:end])
			}
			info, err := s.Head(context.Background(), key)
			if err != nil {
				t.Fatalf("Head(%q): %v", key, err)
			}
			if info.Size <= 0 {
				t.Errorf("Head(%q).Size = %d", key, info.Size)
			}
		})
	}
}

// failingReader returns n bytes of data and then an error.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("injected read failure")
	}
	n := min(len(p), r.n)
	clear(p[:n])
	r.n -= n
	return n, nil
}

// testFailedPut checks that a Put whose reader fails, early or after more
// than a multipart part, reports the error and leaves the key as it was.
func testFailedPut(t *testing.T, s object.Store) {
	ctx := context.Background()
	Put(t, s, "fail/old", []byte("old"))
	for _, n := range []int{0, 100 << 10, 11 << 20} {
		for _, key := range []string{"fail/old", "fail/new"} {
			if err := s.Put(ctx, key, &failingReader{n: n}); err == nil {
				t.Fatalf("Put(%q) with a reader failing after %d bytes succeeded", key, n)
			}
		}
	}
	checkBytes(t, "fail/old after failed overwrites", Get(t, s, "fail/old", 0, -1), []byte("old"))
	if _, err := s.Head(ctx, "fail/new"); !errors.Is(err, object.ErrNotFound) {
		t.Errorf("Head(fail/new) after failed Puts: error = %v, want ErrNotFound", err)
	}
	infos, err := s.List(ctx, "fail/", "", 0)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if got := keys(infos); !slices.Equal(got, []string{"fail/old"}) {
		t.Errorf("List(fail/) after failed Puts = %q, want only fail/old", got)
	}
}

// keys returns the keys of infos.
func keys(infos []object.Info) []string {
	var out []string
	for _, i := range infos {
		out = append(out, i.Key)
	}
	return out
}

// Bench measures Put and Get of 4 MiB objects on s.
func Bench(b *testing.B, s object.Store) {
	const size = 4 << 20
	ctx := context.Background()
	data := Data(1, size)
	b.Run("Put4MiB", func(b *testing.B) {
		b.SetBytes(size)
		for i := 0; b.Loop(); i++ {
			key := fmt.Sprintf("bench/put/%d_0_%d", i%16, size)
			if err := s.Put(ctx, key, bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Get4MiB", func(b *testing.B) {
		key := fmt.Sprintf("bench/get/1_0_%d", size)
		if err := s.Put(ctx, key, bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(size)
		for b.Loop() {
			rc, err := s.Get(ctx, key, 0, -1)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, rc); err != nil {
				b.Fatal(err)
			}
			rc.Close()
		}
	})
}
