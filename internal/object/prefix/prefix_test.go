package prefix_test

import (
	"context"
	"testing"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/mem"
	"github.com/sluicefs/sluice/internal/object/objecttest"
	"github.com/sluicefs/sluice/internal/object/prefix"
)

func TestSuite(t *testing.T) {
	objecttest.Run(t, func(t *testing.T) object.Store {
		inner := mem.New("bucket")
		// Keys outside the prefix must stay invisible.
		objecttest.Put(t, inner, "vol", []byte("x"))
		objecttest.Put(t, inner, "vol-other/a", []byte("x"))
		objecttest.Put(t, inner, "other/a", []byte("x"))
		return prefix.New(inner, "vol/")
	})
}

func TestLayout(t *testing.T) {
	inner := mem.New("bucket")
	s := prefix.New(inner, "vol/")
	if got := s.String(); got != "mem://bucket/vol/" {
		t.Errorf("String() = %q, want mem://bucket/vol/", got)
	}
	if u, ok := s.(object.Unwrapper); !ok || u.Unwrap() != inner {
		t.Errorf("Unwrap does not return the inner store")
	}
	objecttest.Put(t, s, "chunks/0/0/1_0_1", []byte("x"))
	info, err := inner.Head(context.Background(), "vol/chunks/0/0/1_0_1")
	if err != nil {
		t.Fatalf("inner Head: %v", err)
	}
	if info.Size != 1 {
		t.Errorf("inner size = %d, want 1", info.Size)
	}
}

func BenchmarkStore(b *testing.B) {
	objecttest.Bench(b, prefix.New(mem.New("bench"), "vol/"))
}
