package objbench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/conformance"
	"github.com/sluicefs/sluice/internal/object/mem"
	"github.com/sluicefs/sluice/internal/object/s3"
)

// tiny returns options small enough for a unit test: the big object is
// not a whole number of blocks.
func tiny() Options {
	return Options{Threads: 3, BlockSize: 256 << 10, BigObjectSize: 1<<20 + 12345, SmallObjectSize: 3 << 10, SmallObjects: 25}
}

// keys returns the keys of every object of s.
func keys(t *testing.T, s object.Store) []string {
	t.Helper()
	infos, err := s.List(context.Background(), "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, info := range infos {
		ks = append(ks, info.Key)
	}
	return ks
}

func TestDefaults(t *testing.T) {
	d := Defaults()
	if d != (Options{Threads: 4, BlockSize: 4 << 20, BigObjectSize: 1 << 30, SmallObjectSize: 128 << 10, SmallObjects: 100}) {
		t.Errorf("defaults = %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
}

func TestValidate(t *testing.T) {
	const small = "--small-objects must be at least 1 and --small-object-size at least 0"
	tests := []struct {
		name string
		set  func(o *Options)
		want string
	}{
		{"no threads", func(o *Options) { o.Threads = 0 }, "--threads 0: must be at least 1"},
		{"block size 0", func(o *Options) { o.BlockSize = 0 }, "--block-size 0: must be from 1 byte to 1G"},
		{"block size over 1G", func(o *Options) { o.BlockSize = 1<<30 + 1 }, "--block-size 1073741825: must be from 1 byte to 1G"},
		{"big object size 0", func(o *Options) { o.BigObjectSize = 0 }, "--big-object-size 0: must be at least 1 byte"},
		{"no small objects", func(o *Options) { o.SmallObjects = 0 }, small},
		{"negative small object size", func(o *Options) { o.SmallObjectSize = -1 }, small},
		{"empty small objects", func(o *Options) { o.SmallObjectSize = 0 }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tiny()
			tt.set(&o)
			err := o.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Validate = %v, want %q", err, tt.want)
			}
			// Measure checks the options before it writes anything.
			s := mem.New("bucket")
			if _, err := New(s).Measure(context.Background(), o); err == nil || err.Error() != tt.want {
				t.Errorf("Measure = %v, want %q", err, tt.want)
			}
			if ks := keys(t, s); len(ks) != 0 {
				t.Errorf("Measure with bad options wrote %q", ks)
			}
		})
	}
}

func TestCheckConfig(t *testing.T) {
	tests := []struct {
		storage string
		want    conformance.Config
	}{
		{"file", conformance.Config{ExactSizes: true}},
		{"mem", conformance.Config{ExactSizes: true}},
		{"s3", conformance.Config{ExactSizes: true, PartSize: s3.DefaultPartSize}},
	}
	for _, tt := range tests {
		if got := CheckConfig(tt.storage); got != tt.want {
			t.Errorf("CheckConfig(%q) = %+v, want %+v", tt.storage, got, tt.want)
		}
	}
}

func TestNewPrefix(t *testing.T) {
	a, b := New(mem.New("bucket")), New(mem.New("bucket"))
	for _, p := range []string{a.Prefix(), b.Prefix()} {
		if len(p) != len("objbench-")+12+1 || !strings.HasPrefix(p, "objbench-") || !strings.HasSuffix(p, "/") {
			t.Errorf("prefix %q, want objbench-XXXXXXXXXXXX/", p)
		}
	}
	if a.Prefix() == b.Prefix() {
		t.Errorf("two runs share the prefix %s", a.Prefix())
	}
}

// TestCheckMeasureClean runs the checks and the measurements on a mem
// store, then cleans up: only what the run wrote is deleted.
func TestCheckMeasureClean(t *testing.T) {
	ctx := context.Background()
	s := mem.New("bucket")
	if err := s.Put(ctx, "other", strings.NewReader("not the run's")); err != nil {
		t.Fatal(err)
	}
	b := New(s)
	var checks []CheckResult
	if err := b.Check(ctx, CheckConfig("mem"), func(c CheckResult) { checks = append(checks, c) }); err != nil {
		t.Fatalf("Check on a mem store: %v", err)
	}
	all := conformance.Checks(CheckConfig("mem"))
	if len(checks) != len(all) {
		t.Fatalf("%d checks reported, want %d", len(checks), len(all))
	}
	for i, c := range checks {
		if c.Name != all[i].Name || c.Doc != all[i].Doc || c.Err != nil || c.Elapsed <= 0 {
			t.Errorf("check %d: %+v, want %s passed", i, c, all[i].Name)
		}
	}

	o := tiny()
	results, err := b.Measure(ctx, o)
	if err != nil {
		t.Fatalf("Measure: %v", err)
	}
	const blocks, big = 5, 1<<20 + 12345 // 1M+12345 is 5 blocks of 256K
	want := []Result{
		{Op: "put block", Size: 256 << 10, Count: blocks, Bytes: big, Objects: blocks},
		{Op: "get block", Size: 256 << 10, Count: blocks, Bytes: big, Objects: blocks},
		{Op: "ranged get (1/4 block)", Size: 64 << 10, Count: blocks, Bytes: 4*64<<10 + 12345, Objects: blocks},
		{Op: "put big object (one put)", Size: big, Count: 1, Bytes: big, Objects: 1},
		{Op: "get big object", Size: big, Count: 1, Bytes: big, Objects: 1},
		{Op: "put small object", Size: 3 << 10, Count: 25, Objects: 25},
		{Op: "get small object", Size: 3 << 10, Count: 25, Objects: 25},
		{Op: "head small object", Size: -1, Count: 25, Objects: 25},
		{Op: "list small objects (pages of 1000)", Size: -1, Count: 3, Objects: 3 * 25},
		{Op: "delete small object", Size: -1, Count: 25, Objects: 25},
	}
	if len(results) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(results), len(want), results)
	}
	for i, r := range results {
		if r.Wall <= 0 || r.Median <= 0 || r.P99 < r.Median || r.Rate() <= 0 {
			t.Errorf("%s: wall %v, median %v, p99 %v, rate %v", r.Op, r.Wall, r.Median, r.P99, r.Rate())
		}
		r.Wall, r.Median, r.P99 = 0, 0, 0
		if r != want[i] {
			t.Errorf("result %d = %+v, want %+v", i, r, want[i])
		}
	}

	written := 0
	for _, k := range keys(t, s) {
		if strings.HasPrefix(k, b.Prefix()) {
			written++
		}
	}
	// The blocks and the big object at least (the small objects were
	// deleted), and what the checks left.
	if written < blocks+1 {
		t.Errorf("%d objects under %s, want the %d blocks and the big object at least", written, b.Prefix(), blocks)
	}
	n, err := b.Clean(ctx)
	if err != nil {
		t.Fatalf("Clean: %v", err)
	}
	if n != written {
		t.Errorf("Clean removed %d objects, want the %d the run wrote", n, written)
	}
	if ks := keys(t, s); fmt.Sprint(ks) != "[other]" {
		t.Errorf("objects after Clean: %q, want only the one the run did not write", ks)
	}
}

// lyingStore reports every key as present: the checks must catch it.
type lyingStore struct{ object.Store }

func (s lyingStore) Head(ctx context.Context, key string) (object.Info, error) {
	info, err := s.Store.Head(ctx, key)
	if err != nil {
		return object.Info{Key: key}, nil
	}
	return info, nil
}

func TestCheckFails(t *testing.T) {
	ctx := context.Background()
	s := mem.New("bucket")
	b := New(lyingStore{s})
	failed := map[string]string{}
	err := b.Check(ctx, CheckConfig("mem"), func(c CheckResult) {
		if c.Err != nil {
			failed[c.Name] = c.Err.Error()
		}
	})
	if err == nil || err.Error() != fmt.Sprintf("%d functional checks failed on mem://bucket/", len(failed)) {
		t.Fatalf("Check on a store with a broken Head: error %v; failed %v", err, failed)
	}
	if msg := failed["NotFound"]; !strings.Contains(msg, `Head("missing") error = <nil>, want ErrNotFound`) {
		t.Errorf("NotFound: %q", msg)
	}
	if _, err := b.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	if ks := keys(t, s); len(ks) != 0 {
		t.Errorf("objects after Clean: %q", ks)
	}
}

// corruptStore returns a byte changed in every read of key.
type corruptStore struct {
	object.Store
	key string
}

func (s corruptStore) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	rc, err := s.Store.Get(ctx, key, off, limit)
	if err != nil || !strings.HasSuffix(key, s.key) {
		return rc, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	if len(b) > 0 {
		b[len(b)/2]++
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func TestMeasureChecksReads(t *testing.T) {
	tests := []struct{ key, want string }{
		{"big/object", "get big object: get big/object: content differs from what was put, near byte 0"},
		{"small/000007", "get small object: get small/000007 returned 3072 bytes, want 3072 (different content)"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			s := mem.New("bucket")
			b := New(corruptStore{s, tt.key})
			_, err := b.Measure(context.Background(), tiny())
			if err == nil || err.Error() != tt.want {
				t.Errorf("Measure = %v, want %q", err, tt.want)
			}
			if _, err := b.Clean(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRemoveAllPages(t *testing.T) {
	ctx := context.Background()
	s := mem.New("bucket")
	for i := range 2345 {
		if err := s.Put(ctx, fmt.Sprintf("k/%05d", i), strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	n, err := RemoveAll(ctx, s)
	if err != nil || n != 2345 {
		t.Fatalf("RemoveAll = %d, %v; want 2345", n, err)
	}
	if ks := keys(t, s); len(ks) != 0 {
		t.Errorf("%d objects left", len(ks))
	}
}

func TestRate(t *testing.T) {
	tests := []struct {
		name string
		r    Result
		want float64
	}{
		{"bytes", Result{Bytes: 8 << 20, Objects: 2, Wall: 2 * time.Second}, 4},
		{"objects", Result{Objects: 50, Wall: 500 * time.Millisecond}, 100},
		{"no time", Result{Objects: 1}, math.Inf(1)},
	}
	for _, tt := range tests {
		if got := tt.r.Rate(); got != tt.want {
			t.Errorf("%s: Rate = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Millisecond
		}
		return d
	}
	tests := []struct {
		d    []time.Duration
		q    float64
		want time.Duration
	}{
		{nil, 0.5, 0},
		{ms(7), 0.99, 7 * time.Millisecond},
		{ms(5, 1, 4, 2, 3), 0.5, 3 * time.Millisecond},
		{ms(4, 3, 2, 1), 0.5, 3 * time.Millisecond},
		{ms(4, 3, 2, 1), 0.99, 4 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := percentile(tt.d, tt.q); got != tt.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", tt.d, tt.q, got, tt.want)
		}
	}
}

func TestCyclicReader(t *testing.T) {
	for _, size := range []int64{0, 1, 3, 4, 10} {
		got, err := io.ReadAll(&cyclicReader{data: []byte("abcd"), left: size})
		want := strings.Repeat("abcd", 3)[:size]
		if err != nil || string(got) != want {
			t.Errorf("cyclicReader of %d bytes = %q, %v; want %q", size, got, err, want)
		}
	}
}
