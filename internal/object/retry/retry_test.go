package retry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/fault"
	"github.com/sluicefs/sluice/internal/object/file"
	"github.com/sluicefs/sluice/internal/object/mem"
	"github.com/sluicefs/sluice/internal/object/objecttest"
	"github.com/sluicefs/sluice/internal/object/retry"
)

// fast retries quickly, so tests spend little time waiting.
var fast = retry.Config{Attempts: 5, MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}

func newFile(t testing.TB) *file.Store {
	t.Helper()
	s, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newStack returns retry(fault(file)) with the given faults.
func newStack(t testing.TB, rcfg retry.Config, fcfg fault.Config) (*retry.Store, *fault.Store, *file.Store) {
	t.Helper()
	inner := newFile(t)
	f, err := fault.New(inner, fcfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := retry.New(f, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	return r, f, inner
}

func TestSuite(t *testing.T) {
	objecttest.Run(t, func(t *testing.T) object.Store {
		s, _, _ := newStack(t, retry.Config{}, fault.Config{})
		return s
	})
}

// TestSuiteWithFaults runs the suite with every call failing 30% of the
// time before it reaches the file store: the retries hide every fault.
func TestSuiteWithFaults(t *testing.T) {
	cfg, err := fault.Parse("seed=1,all:err=0.3,get:hang=0.05,get:hangfor=1ms")
	if err != nil {
		t.Fatal(err)
	}
	objecttest.Run(t, func(t *testing.T) object.Store {
		s, _, _ := newStack(t, retry.Config{Attempts: 20, MinBackoff: 100 * time.Microsecond, MaxBackoff: time.Millisecond}, cfg)
		return s
	})
}

type tempErr struct{ temp bool }

func (e tempErr) Error() string   { return fmt.Sprintf("temporary %v", e.temp) }
func (e tempErr) Temporary() bool { return e.temp }

type retryableErr struct{ tempErr }

func (e retryableErr) Retryable() bool { return false }

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return false }

func TestRetryable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"not found", fmt.Errorf("get: %w", object.ErrNotFound), false},
		{"canceled", fmt.Errorf("get: %w", context.Canceled), false},
		{"plain", errors.New("403 Forbidden: access denied"), false},
		{"permission", &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrPermission}, false},
		{"no space", &fs.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}, false},
		{"unexpected EOF", io.ErrUnexpectedEOF, false}, // only for Get streams
		{"transient", fmt.Errorf("503 SlowDown: %w", object.ErrTransient), true},
		{"joined transient", errors.Join(errors.New("500"), object.ErrTransient), true},
		{"deadline", context.DeadlineExceeded, true},
		{"os deadline", fmt.Errorf("read: %w", os.ErrDeadlineExceeded), true},
		{"net timeout", fmt.Errorf("dial: %w", timeoutErr{}), true},
		{"connection reset", &fs.PathError{Op: "read", Path: "/x", Err: syscall.ECONNRESET}, true},
		{"temporary", tempErr{true}, true},
		{"not temporary", tempErr{false}, false},
		{"Retryable decides first", retryableErr{tempErr{true}}, false},
		{"not found beats transient", errors.Join(object.ErrNotFound, object.ErrTransient), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retry.Retryable(tt.err); got != tt.want {
				t.Errorf("Retryable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// call runs op once on s and returns its error.
func call(s object.Store, op fault.Op) error {
	ctx := context.Background()
	switch op {
	case fault.Get:
		rc, err := s.Get(ctx, "k", 0, -1)
		if err != nil {
			return err
		}
		defer rc.Close()
		got, err := io.ReadAll(rc)
		if err == nil && string(got) != "value" {
			return fmt.Errorf("read %q, want value", got)
		}
		return err
	case fault.Put:
		return s.Put(ctx, "k", strings.NewReader("value"))
	case fault.Head:
		_, err := s.Head(ctx, "k")
		return err
	case fault.List:
		_, err := s.List(ctx, "", "", 0)
		return err
	case fault.Delete:
		return s.Delete(ctx, "k")
	}
	panic("unknown op")
}

func TestAttemptCounts(t *testing.T) {
	tests := []struct {
		fail      int
		wantCalls int64
		wantErr   bool
	}{
		{0, 1, false},
		{1, 2, false},
		{4, 5, false},
		{5, 5, true},
		{9, 5, true},
	}
	for _, op := range fault.Ops() {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/fail%d", op, tt.fail), func(t *testing.T) {
				var retries []int
				cfg := fast
				cfg.OnRetry = func(_, _ string, attempt int, _ error, _ time.Duration) { retries = append(retries, attempt) }
				s, f, inner := newStack(t, cfg, fault.Config{Rules: map[fault.Op]fault.Rule{op: {FailNext: tt.fail}}})
				objecttest.Put(t, inner, "k", []byte("value"))
				err := call(s, op)
				if got := f.Calls(op); got != tt.wantCalls {
					t.Errorf("%d calls reached the store, want %d", got, tt.wantCalls)
				}
				if len(retries) != int(tt.wantCalls)-1 {
					t.Errorf("OnRetry called for attempts %v, want %d calls", retries, tt.wantCalls-1)
				}
				if !tt.wantErr {
					if err != nil {
						t.Errorf("error %v after %d faults, want success", err, tt.fail)
					}
					return
				}
				if !errors.Is(err, object.ErrTransient) || !strings.Contains(err.Error(), "giving up after 5 attempts") {
					t.Errorf("error = %v, want the last fault after 5 attempts", err)
				}
			})
		}
	}
}

// failWith is a fault injector that fails every call with err.
type failWith struct {
	object.Store
	err   error
	calls int
}

func (f *failWith) Head(ctx context.Context, key string) (object.Info, error) {
	f.calls++
	return object.Info{}, f.err
}

func (f *failWith) Put(ctx context.Context, key string, r io.Reader) error {
	f.calls++
	return f.err
}

func TestPassThrough(t *testing.T) {
	denied := errors.New("403 AccessDenied")
	tests := []struct {
		name string
		err  error
	}{
		{"not found", fmt.Errorf("head: %w", object.ErrNotFound)},
		{"auth", denied},
		{"canceled", context.Canceled},
		{"permission", &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrPermission}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner := &failWith{Store: newFile(t), err: tt.err}
			s, err := retry.New(inner, fast)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Head(context.Background(), "k"); err != tt.err {
				t.Errorf("Head error = %v, want %v unchanged", err, tt.err)
			}
			if err := s.Put(context.Background(), "k", strings.NewReader("x")); err != tt.err {
				t.Errorf("Put error = %v, want %v unchanged", err, tt.err)
			}
			if inner.calls != 2 {
				t.Errorf("%d calls reached the store, want 2", inner.calls)
			}
		})
	}
	// A missing key through the real file store.
	s, f, _ := newStack(t, fast, fault.Config{})
	if _, err := s.Get(context.Background(), "missing", 0, -1); !errors.Is(err, object.ErrNotFound) {
		t.Errorf("Get(missing) error = %v, want ErrNotFound", err)
	}
	if f.Calls(fault.Get) != 1 {
		t.Errorf("Get(missing) made %d calls, want 1", f.Calls(fault.Get))
	}
}

func TestContext(t *testing.T) {
	t.Run("hang until deadline", func(t *testing.T) {
		s, f, _ := newStack(t, fast, fault.Config{Rules: map[fault.Op]fault.Rule{fault.Head: {Hang: 1}}})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if _, err := s.Head(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Head error = %v, want DeadlineExceeded", err)
		}
		if f.Calls(fault.Head) != 1 {
			t.Errorf("%d calls after the deadline, want 1", f.Calls(fault.Head))
		}
	})
	t.Run("cancel during backoff", func(t *testing.T) {
		cfg := retry.Config{Attempts: 5, MinBackoff: time.Hour, MaxBackoff: time.Hour}
		ctx, cancel := context.WithCancel(context.Background())
		cfg.OnRetry = func(string, string, int, error, time.Duration) { cancel() }
		s, f, _ := newStack(t, cfg, fault.Config{Rules: map[fault.Op]fault.Rule{fault.Put: {FailNext: 1}}})
		err := s.Put(ctx, "k", strings.NewReader("x"))
		if !errors.Is(err, context.Canceled) || !errors.Is(err, object.ErrTransient) {
			t.Errorf("Put error = %v, want Canceled wrapping the fault", err)
		}
		if f.Calls(fault.Put) != 1 {
			t.Errorf("%d calls, want 1", f.Calls(fault.Put))
		}
	})
}

func TestBackoff(t *testing.T) {
	var waits []time.Duration
	cfg := retry.Config{Attempts: 6, MinBackoff: 2 * time.Millisecond, MaxBackoff: 8 * time.Millisecond,
		OnRetry: func(_, _ string, _ int, _ error, d time.Duration) { waits = append(waits, d) }}
	s, _, _ := newStack(t, cfg, fault.Config{Rules: map[fault.Op]fault.Rule{fault.List: {FailNext: 10}}})
	if _, err := s.List(context.Background(), "", "", 0); err == nil {
		t.Fatal("List succeeded despite 10 faults")
	}
	// Exponential from 2ms, capped at 8ms, jittered in the upper half.
	caps := []time.Duration{2, 4, 8, 8, 8}
	if len(waits) != len(caps) {
		t.Fatalf("waits = %v, want %d", waits, len(caps))
	}
	for i, c := range caps {
		c *= time.Millisecond
		if waits[i] < c/2 || waits[i] > c {
			t.Errorf("wait %d = %v, want between %v and %v", i+1, waits[i], c/2, c)
		}
	}
}

// consumeThenFail is a fault injector whose first n Puts read part of
// the content and then fail, so a retry must rewind the reader.
type consumeThenFail struct {
	object.Store
	n int
}

func (c *consumeThenFail) Put(ctx context.Context, key string, r io.Reader) error {
	if c.n > 0 {
		c.n--
		io.CopyN(io.Discard, r, 3)
		return fmt.Errorf("connection reset mid-upload: %w", object.ErrTransient)
	}
	return c.Store.Put(ctx, key, r)
}

func TestPutRewinds(t *testing.T) {
	data := objecttest.Data(1, 10_000)
	tests := []struct {
		name string
		r    func() io.Reader
		want []byte
	}{
		{"bytes.Reader", func() io.Reader { return bytes.NewReader(data) }, data},
		{"seeker not at start", func() io.Reader {
			r := bytes.NewReader(data)
			r.Seek(100, io.SeekStart)
			return r
		}, data[100:]},
		{"not seekable", func() io.Reader { return io.MultiReader(bytes.NewReader(data)) }, data},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner := newFile(t)
			s, err := retry.New(&consumeThenFail{Store: inner, n: 2}, fast)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Put(context.Background(), "k", tt.r()); err != nil {
				t.Fatalf("Put: %v", err)
			}
			if got := objecttest.Get(t, inner, "k", 0, -1); !bytes.Equal(got, tt.want) {
				t.Errorf("stored %d bytes, want %d (equal: false)", len(got), len(tt.want))
			}
		})
	}
}

// TestReadsResume reads random ranges while Get streams break midway: the
// retry reader resumes them and every read returns the right bytes.
func TestReadsResume(t *testing.T) {
	var mu sync.Mutex
	resumes := 0
	cfg := retry.Config{Attempts: 30, MinBackoff: time.Microsecond, MaxBackoff: 10 * time.Microsecond,
		OnRetry: func(op, _ string, _ int, _ error, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			if op == "read" {
				resumes++
			}
		}}
	s, f, inner := newStack(t, cfg, fault.Config{Seed: 5, Rules: map[fault.Op]fault.Rule{
		fault.Get: {Short: 0.3, ReadErr: 0.2, Err: 0.1},
	}})
	data := objecttest.Data(9, 1<<20)
	objecttest.Put(t, inner, "chunks/0/0/1_0_1048576", data)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		off := rng.Int64N(int64(len(data)))
		limit := rng.Int64N(int64(len(data))) - 1000
		want := data[off:]
		if limit >= 0 && limit < int64(len(want)) {
			want = want[:limit]
		}
		got := objecttest.Get(t, s, "chunks/0/0/1_0_1048576", off, limit)
		if !bytes.Equal(got, want) {
			t.Fatalf("Get(%d, %d) returned %d wrong bytes, want %d", off, limit, len(got), len(want))
		}
	}
	if resumes == 0 || f.Injected(fault.Get) == 0 {
		t.Errorf("no stream was resumed (%d resumes, %d faults): the test tested nothing", resumes, f.Injected(fault.Get))
	}
	t.Logf("%d faults injected, %d streams resumed", f.Injected(fault.Get), resumes)
}

// cutOnce is a fault injector whose first Get stream stops after cut
// bytes with io.ErrUnexpectedEOF, after running onCut.
type cutOnce struct {
	object.Store
	cut   int
	onCut func()
	done  bool
}

func (c *cutOnce) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	if c.done {
		return c.Store.Get(ctx, key, off, limit)
	}
	c.done = true
	rc, err := c.Store.Get(ctx, key, off, limit)
	if err != nil {
		return nil, err
	}
	return &cutReader{rc: rc, left: c.cut, onCut: c.onCut}, nil
}

type cutReader struct {
	rc    io.ReadCloser
	left  int
	onCut func()
}

func (r *cutReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		r.onCut()
		return 0, io.ErrUnexpectedEOF
	}
	n, err := r.rc.Read(p[:min(len(p), r.left)])
	r.left -= n
	return n, err
}

func (r *cutReader) Close() error { return r.rc.Close() }

func TestResumeDetectsChange(t *testing.T) {
	old, changed := objecttest.Data(1, 10_000), objecttest.Data(2, 10_000)
	tests := []struct {
		name    string
		cut     int
		replace []byte
		wantErr error
	}{
		{"unchanged", 5000, old, nil},
		{"unchanged after a few bytes", 7, old, nil},
		{"unchanged before any byte", 0, changed, nil}, // nothing delivered yet: the new version is whole
		{"changed", 5000, changed, retry.ErrChanged},
		{"changed after a few bytes", 7, changed, retry.ErrChanged},
		{"truncated", 5000, old[:4000], io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner := newFile(t)
			objecttest.Put(t, inner, "k", old)
			cut := &cutOnce{Store: inner, cut: tt.cut, onCut: func() { objecttest.Put(t, inner, "k", tt.replace) }}
			s, err := retry.New(cut, fast)
			if err != nil {
				t.Fatal(err)
			}
			rc, err := s.Get(context.Background(), "k", 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("read error = %v, want %v", err, tt.wantErr)
			}
			want := old
			if tt.cut == 0 {
				want = tt.replace
			}
			if err != nil {
				want = want[:len(got)]
			}
			if !bytes.Equal(got, want) {
				t.Errorf("read %d bytes that are not the object's", len(got))
			}
		})
	}
}

func TestConfig(t *testing.T) {
	for _, cfg := range []retry.Config{
		{Attempts: -1},
		{MinBackoff: time.Second, MaxBackoff: time.Millisecond},
		{MinBackoff: -time.Second},
	} {
		if _, err := retry.New(newFile(t), cfg); err == nil {
			t.Errorf("New accepted %+v", cfg)
		}
	}
}

// hangFirst is a store whose first call of each kind hangs until its
// context ends.
type hangFirst struct {
	object.Store
	mu   sync.Mutex
	hung map[string]bool
}

func (h *hangFirst) hang(ctx context.Context, op string) error {
	h.mu.Lock()
	first := !h.hung[op]
	h.hung[op] = true
	h.mu.Unlock()
	if !first {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (h *hangFirst) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	if err := h.hang(ctx, "get"); err != nil {
		return nil, err
	}
	return h.Store.Get(ctx, key, off, limit)
}

func (h *hangFirst) Put(ctx context.Context, key string, r io.Reader) error {
	if err := h.hang(ctx, "put"); err != nil {
		return err
	}
	return h.Store.Put(ctx, key, r)
}

func TestTimeoutRetriesAHungAttempt(t *testing.T) {
	inner := &hangFirst{Store: mem.New("t"), hung: map[string]bool{}}
	s, err := retry.New(inner, retry.Config{Timeout: 50 * time.Millisecond, MinBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Put(ctx, "k", strings.NewReader("data")); err != nil {
		t.Fatalf("Put after a hung attempt: %v", err)
	}
	rc, err := s.Get(ctx, "k", 0, -1)
	if err != nil {
		t.Fatalf("Get after a hung attempt: %v", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil || string(b) != "data" {
		t.Fatalf("read %q, %v", b, err)
	}
}
