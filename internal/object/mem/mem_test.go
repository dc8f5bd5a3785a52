package mem_test

import (
	"testing"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/conformance"
	"github.com/sluicefs/sluice/internal/object/mem"
	"github.com/sluicefs/sluice/internal/object/objecttest"
)

func TestSuite(t *testing.T) {
	objecttest.RunConfig(t, conformance.Config{ExactSizes: true}, func(t *testing.T) object.Store { return mem.New(t.Name()) })
}

func TestString(t *testing.T) {
	if got := mem.New("vol").String(); got != "mem://vol/" {
		t.Errorf("String() = %q, want mem://vol/", got)
	}
}

func BenchmarkStore(b *testing.B) {
	objecttest.Bench(b, mem.New("bench"))
}
