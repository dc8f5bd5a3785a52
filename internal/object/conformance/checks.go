package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/sluicefs/sluice/internal/object"
)

func (c checker) roundTrip(ctx context.Context, s object.Store) error {
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
	var p problems
	for _, tt := range tests {
		// Block keys end in their length, the way the chunk layer names them.
		for _, key := range []string{"plain/" + tt.name, fmt.Sprintf("chunks/0/0/1_0_%d", len(tt.data))} {
			if err := put(ctx, s, key, tt.data); err != nil {
				return errors.Join(p.err(), err)
			}
			got, err := get(ctx, s, key, 0, -1)
			if err != nil {
				return errors.Join(p.err(), err)
			}
			p.checkBytes(fmt.Sprintf("Get(%q)", key), got, tt.data)
			info, err := s.Head(ctx, key)
			switch {
			case err != nil:
				p.addf("Head(%q): %w", key, err)
			case info.Key != key || info.ModTime.IsZero():
				p.addf("Head(%q) = %+v, want Key %q and a ModTime", key, info, key)
			case c.cfg.ExactSizes && info.Size != int64(len(tt.data)):
				p.addf("Head(%q) reports size %d, want %d", key, info.Size, len(tt.data))
			}
		}
	}
	return p.err()
}

func overwrite(ctx context.Context, s object.Store) error {
	if err := put(ctx, s, "dir/obj", Data(1, 1000)); err != nil {
		return err
	}
	if err := put(ctx, s, "dir/obj", []byte("short")); err != nil {
		return err
	}
	var p problems
	got, err := get(ctx, s, "dir/obj", 0, -1)
	if err != nil {
		return err
	}
	p.checkBytes("Get after overwrite", got, []byte("short"))
	infos, err := s.List(ctx, "", "", 0)
	if err != nil {
		return errors.Join(p.err(), fmt.Errorf("List: %w", err))
	}
	if len(infos) != 1 || infos[0].Key != "dir/obj" {
		p.addf("List after overwrite = %q, want only dir/obj", keys(infos))
	}
	return p.err()
}

func ranges(ctx context.Context, s object.Store) error {
	data := Data(2, 10000)
	var p problems
	for _, key := range []string{"r/obj", "r/1_0_10000"} {
		if err := put(ctx, s, key, data); err != nil {
			return errors.Join(p.err(), err)
		}
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
			got, err := get(ctx, s, key, tt.off, tt.limit)
			if err != nil {
				p.add(err)
				continue
			}
			p.checkBytes(fmt.Sprintf("Get(%q, %d, %d)", key, tt.off, tt.limit), got, tt.want)
		}
	}
	return p.err()
}

func notFound(ctx context.Context, s object.Store) error {
	if err := put(ctx, s, "exists/obj", []byte("x")); err != nil {
		return err
	}
	var p problems
	for _, key := range []string{"missing", "exists/missing", "exists", "exists/obj/below"} {
		if _, err := s.Get(ctx, key, 0, -1); !errors.Is(err, object.ErrNotFound) {
			p.addf("Get(%q) error = %v, want ErrNotFound", key, err)
		}
		if _, err := s.Head(ctx, key); !errors.Is(err, object.ErrNotFound) {
			p.addf("Head(%q) error = %v, want ErrNotFound", key, err)
		}
	}
	return p.err()
}

func deleteKeys(ctx context.Context, s object.Store) error {
	if err := put(ctx, s, "d/e/obj", []byte("x")); err != nil {
		return err
	}
	if err := put(ctx, s, "d/other", []byte("y")); err != nil {
		return err
	}
	for range 2 {
		if err := s.Delete(ctx, "d/e/obj"); err != nil {
			return fmt.Errorf("Delete: %w", err)
		}
	}
	var p problems
	if err := s.Delete(ctx, "never/was"); err != nil {
		p.addf("Delete of a missing key: %w", err)
	}
	if _, err := s.Head(ctx, "d/e/obj"); !errors.Is(err, object.ErrNotFound) {
		p.addf("Head after Delete error = %v, want ErrNotFound", err)
	}
	if got, err := get(ctx, s, "d/other", 0, -1); err != nil {
		p.add(err)
	} else {
		p.checkBytes("sibling after Delete", got, []byte("y"))
	}
	// A deleted key's directory can hold a new object.
	if err := put(ctx, s, "d/e/again", []byte("z")); err != nil {
		return errors.Join(p.err(), err)
	}
	if got, err := get(ctx, s, "d/e/again", 0, -1); err != nil {
		p.add(err)
	} else {
		p.checkBytes("Get after re-Put", got, []byte("z"))
	}
	return p.err()
}

// listKeys are chosen so that a per-directory walk in name order differs
// from key order: "a-c" < "a/b-c" < "a/b/c" although the directory "a"
// sorts before the file "a-c" and "b" before "b-c".
var listKeys = []string{
	"a-c", "a/b-c", "a/b/c", "a/b/d", "a/bc", "a0", "b", "chunks/0/0/1_0_100", "chunks/0/0/1_1_100", "chunks/0/1/1000_0_5",
}

func list(ctx context.Context, s object.Store) error {
	for i, k := range slices.Backward(listKeys) {
		if err := put(ctx, s, k, Data(uint64(i), i)); err != nil {
			return err
		}
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
	var p problems
	for _, tt := range tests {
		infos, err := s.List(ctx, tt.prefix, tt.marker, tt.limit)
		if err != nil {
			return errors.Join(p.err(), fmt.Errorf("List(%q, %q, %d): %w", tt.prefix, tt.marker, tt.limit, err))
		}
		if got := keys(infos); !slices.Equal(got, tt.want) {
			p.addf("List(%q, %q, %d) = %q, want %q", tt.prefix, tt.marker, tt.limit, got, tt.want)
		}
	}
	// Sizes are whatever Head reports: a compressing decorator reports
	// stored sizes.
	infos, err := s.List(ctx, "", "", 0)
	if err != nil {
		return errors.Join(p.err(), fmt.Errorf("List: %w", err))
	}
	for _, info := range infos {
		h, err := s.Head(ctx, info.Key)
		if err != nil {
			return errors.Join(p.err(), fmt.Errorf("Head(%q): %w", info.Key, err))
		}
		if h.Size != info.Size || info.ModTime.IsZero() {
			p.addf("List entry %+v, but Head reports size %d", info, h.Size)
		}
	}
	return p.err()
}

func listPages(ctx context.Context, s object.Store) error {
	var want []string
	for i := range 3 {
		for j := range 7 {
			k := fmt.Sprintf("p/%d/%d_%d", i, j, j*10)
			want = append(want, k)
			if err := put(ctx, s, k, nil); err != nil {
				return err
			}
		}
		k := fmt.Sprintf("p/%d-x", i)
		want = append(want, k)
		if err := put(ctx, s, k, nil); err != nil {
			return err
		}
	}
	if err := put(ctx, s, "q", nil); err != nil {
		return err
	}
	slices.Sort(want)
	var p problems
	for _, limit := range []int{1, 2, 5, len(want), 100} {
		var got []string
		for marker := ""; ; {
			if len(got) > len(want) {
				p.addf("pages of %d: more keys than stored (%q...): the marker is not honoured", limit, got[:len(want)+1])
				break
			}
			infos, err := s.List(ctx, "p/", marker, limit)
			if err != nil {
				return errors.Join(p.err(), fmt.Errorf("List(%q, %d): %w", marker, limit, err))
			}
			if len(infos) > limit {
				return errors.Join(p.err(), fmt.Errorf("List(%q, %d) returned %d keys", marker, limit, len(infos)))
			}
			got = append(got, keys(infos)...)
			if len(infos) < limit {
				break
			}
			marker = infos[len(infos)-1].Key
		}
		if !slices.Equal(got, want) {
			p.addf("pages of %d = %q, want %q", limit, got, want)
		}
	}
	return p.err()
}

func concurrent(ctx context.Context, s object.Store) error {
	const workers, perWorker = 4, 16
	var p problems
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				key := fmt.Sprintf("c/%d/%d", w, i)
				data := Data(uint64(w*perWorker+i), 1000+i)
				if err := put(ctx, s, key, data); err != nil {
					p.add(err)
					return
				}
				got, err := Get(ctx, s, key, 0, -1)
				if err != nil || !bytes.Equal(got, data) {
					p.addf("Get(%q) = %d bytes, %v; want %d bytes", key, len(got), err, len(data))
				}
			}
		})
	}
	wg.Wait()
	infos, err := s.List(ctx, "c/", "", 0)
	if err != nil {
		return errors.Join(p.err(), fmt.Errorf("List: %w", err))
	}
	if len(infos) != workers*perWorker {
		p.addf("List found %d keys, want %d", len(infos), workers*perWorker)
	}
	return p.err()
}

// atomicOverwrite checks that readers racing with writers of one key see
// a whole object, never a mix or a partial one.
func atomicOverwrite(ctx context.Context, s object.Store) error {
	const size, rounds = 64 << 10, 20
	const key = "atomic/obj"
	if err := put(ctx, s, key, bytes.Repeat([]byte{0}, size)); err != nil {
		return err
	}
	var p problems
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := range rounds {
				data := bytes.Repeat([]byte{byte(1 + w*rounds + i)}, size)
				if err := put(ctx, s, key, data); err != nil {
					p.add(err)
					return
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range rounds {
				got, err := get(ctx, s, key, 0, -1)
				if err != nil {
					p.add(err)
					return
				}
				if len(got) != size || bytes.Count(got, got[:1]) != size {
					p.addf("Get returned a torn object of %d bytes", len(got))
					return
				}
			}
		})
	}
	wg.Wait()
	return p.err()
}

// onlyReader hides every method of a reader but Read, so a store cannot
// learn the length in advance and must stream it.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// large stores objects of more than two multipart parts, with and
// without a known length, and of exactly two parts, and reads ranges
// across part boundaries.
func (c checker) large(ctx context.Context, s object.Store) error {
	part := c.cfg.PartSize
	size := 2*part + 2<<20 + 12345
	data := Data(3, int(size))
	tests := []struct {
		name string
		want []byte
		r    io.Reader
	}{
		{"streamed", data, onlyReader{bytes.NewReader(data)}},
		{"sized", data, bytes.NewReader(data)},
		{"exactParts", data[:2*part], onlyReader{bytes.NewReader(data[:2*part])}},
	}
	var p problems
	for _, tt := range tests {
		key := "large/" + tt.name
		if err := s.Put(ctx, key, tt.r); err != nil {
			p.addf("Put(%q): %w", key, err)
			continue
		}
		got, err := get(ctx, s, key, 0, -1)
		if err != nil {
			p.add(err)
			continue
		}
		p.checkBytes(fmt.Sprintf("Get(%q)", key), got, tt.want)
		n := int64(len(tt.want))
		for _, r := range [][2]int64{{part - 10, 20}, {n - 100, -1}, {1, n - 2}, {n - 1, 10}} {
			got, err := get(ctx, s, key, r[0], r[1])
			if err != nil {
				p.add(err)
				continue
			}
			end := n
			if r[1] >= 0 {
				end = min(n, r[0]+r[1])
			}
			p.checkBytes(fmt.Sprintf("Get(%q, %d, %d)", key, r[0], r[1]), got, tt.want[r[0]:end])
		}
		info, err := s.Head(ctx, key)
		switch {
		case err != nil:
			p.addf("Head(%q): %w", key, err)
		case info.Size <= 0:
			p.addf("Head(%q).Size = %d", key, info.Size)
		case c.cfg.ExactSizes && info.Size != n:
			p.addf("Head(%q).Size = %d, want %d", key, info.Size, n)
		}
	}
	return p.err()
}

// failingReader returns n bytes of data and then an error.
type failingReader struct{ n int64 }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("injected read failure")
	}
	n := min(int64(len(p)), r.n)
	clear(p[:n])
	r.n -= n
	return int(n), nil
}

// failedPut checks that a Put whose reader fails, early or after more
// than two multipart parts, reports the error and leaves the key as it
// was.
func (c checker) failedPut(ctx context.Context, s object.Store) error {
	if err := put(ctx, s, "fail/old", []byte("old")); err != nil {
		return err
	}
	for _, n := range []int64{0, 100 << 10, 2*c.cfg.PartSize + 1<<20} {
		for _, key := range []string{"fail/old", "fail/new"} {
			if err := s.Put(ctx, key, &failingReader{n: n}); err == nil {
				return fmt.Errorf("Put(%q) with a reader failing after %d bytes succeeded", key, n)
			}
		}
	}
	var p problems
	if got, err := get(ctx, s, "fail/old", 0, -1); err != nil {
		p.add(err)
	} else {
		p.checkBytes("fail/old after failed overwrites", got, []byte("old"))
	}
	if _, err := s.Head(ctx, "fail/new"); !errors.Is(err, object.ErrNotFound) {
		p.addf("Head(fail/new) after failed Puts: error = %v, want ErrNotFound", err)
	}
	infos, err := s.List(ctx, "fail/", "", 0)
	if err != nil {
		return errors.Join(p.err(), fmt.Errorf("List: %w", err))
	}
	if got := keys(infos); !slices.Equal(got, []string{"fail/old"}) {
		p.addf("List(fail/) after failed Puts = %q, want only fail/old", got)
	}
	return p.err()
}
