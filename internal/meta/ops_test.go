package meta_test

import (
	"reflect"
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
)

// TestClientIsTheOperations holds the POSIX core to the declared list:
// every exported method of *meta.Client is an operation of meta.Ops or
// of one of its optional capabilities. A service of the session belongs
// on *meta.Session; a helper for tests, in the suites.
func TestClientIsTheOperations(t *testing.T) {
	declared := map[string]bool{}
	for _, iface := range []reflect.Type{
		reflect.TypeFor[meta.Ops](),
		reflect.TypeFor[meta.Creator](),
		reflect.TypeFor[meta.TmpfileCreator](),
		reflect.TypeFor[meta.CopyCommitter](),
		reflect.TypeFor[meta.LookerAhead](),
		reflect.TypeFor[meta.OpenCacher](),
	} {
		for i := 0; i < iface.NumMethod(); i++ {
			declared[iface.Method(i).Name] = true
		}
	}
	client := reflect.TypeFor[*meta.Client]()
	for i := 0; i < client.NumMethod(); i++ {
		if name := client.Method(i).Name; !declared[name] {
			t.Errorf("*meta.Client has method %s, which is not an operation of meta.Ops or a capability declared beside it (ops.go)", name)
		}
	}
}
