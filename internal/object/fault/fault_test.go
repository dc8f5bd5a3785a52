package fault_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/fault"
	"github.com/sluicefs/sluice/internal/object/file"
	"github.com/sluicefs/sluice/internal/object/objecttest"
)

// newFile returns a file store in a fresh temporary directory.
func newFile(t testing.TB) *file.Store {
	t.Helper()
	s, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newFault returns a fault store over a fresh file store.
func newFault(t testing.TB, cfg fault.Config) (*fault.Store, *file.Store) {
	t.Helper()
	inner := newFile(t)
	s, err := fault.New(inner, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, inner
}

func TestSuite(t *testing.T) {
	// With no faults, or only latency, the decorator is transparent.
	for _, cfg := range []string{"", "all:delay=100us"} {
		t.Run(cfg, func(t *testing.T) {
			c, err := fault.Parse(cfg)
			if err != nil {
				t.Fatal(err)
			}
			objecttest.Run(t, func(t *testing.T) object.Store {
				s, _ := newFault(t, c)
				return s
			})
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
		_, err = io.ReadAll(rc)
		return err
	case fault.Put:
		return s.Put(ctx, "k", bytes.NewReader([]byte("value")))
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

func TestFailNext(t *testing.T) {
	for _, op := range fault.Ops() {
		t.Run(op.String(), func(t *testing.T) {
			s, inner := newFault(t, fault.Config{Rules: map[fault.Op]fault.Rule{op: {FailNext: 2}}})
			objecttest.Put(t, inner, "k", []byte("old"))
			s.FailNext(op, 1)
			for i := range 3 {
				err := call(s, op)
				var fe *fault.Error
				if !errors.As(err, &fe) || fe.Op != op || !errors.Is(err, object.ErrTransient) {
					t.Fatalf("call %d: error %v, want an injected transient fault.Error", i, err)
				}
			}
			if op == fault.Put || op == fault.Delete {
				// A failed call changed nothing.
				if got := objecttest.Get(t, inner, "k", 0, -1); string(got) != "old" {
					t.Errorf("after failed %s calls the object holds %q, want old", op, got)
				}
			}
			if err := call(s, op); err != nil {
				t.Fatalf("call after the failures: %v", err)
			}
			if c, i := s.Calls(op), s.Injected(op); c != 4 || i != 3 {
				t.Errorf("Calls, Injected = %d, %d; want 4, 3", c, i)
			}
		})
	}
}

// failures runs n Heads on a store with cfg and reports which failed.
func failures(t *testing.T, cfg fault.Config, n int) []bool {
	t.Helper()
	s, inner := newFault(t, cfg)
	objecttest.Put(t, inner, "k", []byte("x"))
	out := make([]bool, n)
	for i := range out {
		_, err := s.Head(context.Background(), "k")
		out[i] = err != nil
		if err != nil && !errors.Is(err, object.ErrTransient) {
			t.Fatalf("Head: %v", err)
		}
	}
	return out
}

func TestErrRateIsSeeded(t *testing.T) {
	cfg := fault.Config{Seed: 42, Rules: map[fault.Op]fault.Rule{fault.Head: {Err: 0.3}}}
	a, b := failures(t, cfg, 500), failures(t, cfg, 500)
	if !slices.Equal(a, b) {
		t.Errorf("two stores with seed 42 failed different calls")
	}
	cfg.Seed = 43
	if slices.Equal(a, failures(t, cfg, 500)) {
		t.Errorf("seeds 42 and 43 failed the same calls")
	}
	n := 0
	for _, f := range a {
		if f {
			n++
		}
	}
	// 500 draws at p=0.3: the mean is 150 and the standard deviation about 10.
	if n < 100 || n > 200 {
		t.Errorf("%d of 500 calls failed at rate 0.3", n)
	}
}

func TestHang(t *testing.T) {
	t.Run("until the context is done", func(t *testing.T) {
		s, _ := newFault(t, fault.Config{Rules: map[fault.Op]fault.Rule{fault.Head: {Hang: 1}}})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := s.Head(ctx, "k")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Head error = %v, want DeadlineExceeded", err)
		}
	})
	t.Run("then a timeout", func(t *testing.T) {
		s, _ := newFault(t, fault.Config{Rules: map[fault.Op]fault.Rule{fault.Head: {Hang: 1, HangFor: time.Millisecond}}})
		_, err := s.Head(context.Background(), "k")
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, object.ErrTransient) {
			t.Errorf("Head error = %v, want a transient net.Error timeout", err)
		}
	})
}

func TestDelayHonoursContext(t *testing.T) {
	s, _ := newFault(t, fault.Config{Rules: map[fault.Op]fault.Rule{fault.Put: {Delay: time.Hour}}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Put(ctx, "k", bytes.NewReader(nil))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Put error = %v, want Canceled", err)
	}
	if _, err := s.Unwrap().Head(context.Background(), "k"); !errors.Is(err, object.ErrNotFound) {
		t.Errorf("a cancelled delayed Put wrote the object: Head error %v", err)
	}
}

func TestBrokenReads(t *testing.T) {
	data := objecttest.Data(1, 100_000)
	tests := []struct {
		name    string
		rule    fault.Rule
		wantErr func(error) bool
	}{
		{"short", fault.Rule{Short: 1}, func(err error) bool { return err == io.ErrUnexpectedEOF }},
		{"readerr", fault.Rule{ReadErr: 1}, func(err error) bool {
			var fe *fault.Error
			return errors.As(err, &fe) && fe.Kind == "read error"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, inner := newFault(t, fault.Config{Seed: 1, Rules: map[fault.Op]fault.Rule{fault.Get: tt.rule}})
			objecttest.Put(t, inner, "k", data)
			objecttest.Put(t, inner, "empty", nil)
			for i := range 20 {
				off := int64(i * 1000)
				rc, err := s.Get(context.Background(), "k", off, -1)
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(rc)
				rc.Close()
				if !tt.wantErr(err) {
					t.Fatalf("read error = %v", err)
				}
				// What arrives is a strict prefix of the right bytes.
				if want := data[off:]; len(got) >= len(want) || !bytes.Equal(got, want[:len(got)]) {
					t.Fatalf("read %d bytes of %d, not a strict prefix", len(got), len(want))
				}
			}
			// An empty object cannot be cut short.
			if got := objecttest.Get(t, s, "empty", 0, -1); len(got) != 0 {
				t.Errorf("empty object read as %d bytes", len(got))
			}
			if got := s.Injected(fault.Get); got != 20 {
				t.Errorf("Injected(Get) = %d, want 20", got)
			}
		})
	}
}

func TestSetAtRuntime(t *testing.T) {
	s, inner := newFault(t, fault.Config{})
	objecttest.Put(t, inner, "k", []byte("x"))
	on := fault.Config{Rules: map[fault.Op]fault.Rule{fault.Head: {Err: 1}}}
	for i, cfg := range []fault.Config{on, {}, on} {
		if err := s.Set(cfg); err != nil {
			t.Fatal(err)
		}
		_, err := s.Head(context.Background(), "k")
		if want := cfg.Rules != nil; (err != nil) != want {
			t.Errorf("step %d: Head error = %v, want failure %v", i, err, want)
		}
	}
	if err := s.Set(fault.Config{Rules: map[fault.Op]fault.Rule{fault.Head: {Err: 2}}}); err == nil {
		t.Errorf("Set accepted err=2")
	}
}

func TestWrapFromEnv(t *testing.T) {
	inner := newFile(t)
	t.Setenv(fault.EnvVar, "")
	if s, err := fault.WrapFromEnv(inner); err != nil || s != object.Store(inner) {
		t.Errorf("WrapFromEnv without faults = %v, %v; want the store itself", s, err)
	}
	t.Setenv(fault.EnvVar, "seed=1,put:fail=1")
	s, err := fault.WrapFromEnv(inner)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(context.Background(), "k", bytes.NewReader(nil)); !errors.Is(err, object.ErrTransient) {
		t.Errorf("first Put error = %v, want an injected fault", err)
	}
	objecttest.Put(t, s, "k", nil)
}
