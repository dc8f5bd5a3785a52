package wire

import (
	"math/rand"
	"reflect"
	"slices"
	"testing"
	"testing/quick"

	"github.com/sluicefs/sluice/internal/meta"
)

// TestTable checks the operation table against meta.Ops: every operation
// a mount uses has an entry, or is answered by the mount alone (Local);
// every entry is complete, its class agrees with it, and no number or
// name is given twice.
func TestTable(t *testing.T) {
	names := map[string]bool{}
	methods := map[uint64]string{}
	for _, e := range table {
		m, name, _ := e.info()
		if err := e.check(); err != nil {
			t.Error(err)
		}
		if other, dup := methods[m]; dup {
			t.Errorf("method %d given to %s and %s", m, other, name)
		}
		if names[name] {
			t.Errorf("name %s given twice", name)
		}
		methods[m], names[name] = name, true
	}
	entries := map[string]bool{}
	for name := range table {
		entries[name] = true
	}
	for _, iface := range []reflect.Type{reflect.TypeFor[meta.Ops](), reflect.TypeFor[meta.Creator](), reflect.TypeFor[meta.TmpfileCreator]()} {
		for i := 0; i < iface.NumMethod(); i++ {
			name := iface.Method(i).Name
			switch {
			case entries[name] && slices.Contains(Local, name):
				t.Errorf("%s is both in the table and answered locally", name)
			case !entries[name] && !slices.Contains(Local, name):
				t.Errorf("operation %s of meta.Ops has no entry in the operation table (ops.go) and is not Local", name)
			}
		}
	}
}

// roundTrip encodes random arguments and results of op and decodes them
// again, through Request and Decode for the arguments.
func (op *Op[A, R]) roundTrip(t *testing.T, rnd *rand.Rand) {
	t.Helper()
	a := randomValue[A](t, rnd)
	b := NewBuf(64)
	op.Request(b, meta.Cred{Uid: 1, Gid: 2, Pid: 3, Gids: []uint32{4, 5}}, a)
	raw := b.Raw()
	call, err := Decode(NewReader(raw))
	if err != nil {
		t.Fatalf("Decode of a request: %v", err)
	}
	if call.Name != op.Name || call.Class != op.Class || (call.Applied != nil) != (op.Applied != nil) {
		t.Fatalf("Decode = %s (%v, applied %v), want %s (%v)", call.Name, call.Class, call.Applied != nil, op.Name, op.Class)
	}
	r := NewReader(raw)
	if m := r.Uvarint(); m != op.Method {
		t.Fatalf("request of method %d, want %d", m, op.Method)
	}
	if c := getCred(r); c.Uid != 1 || c.Gid != 2 || c.Pid != 3 || len(c.Gids) != 2 {
		t.Fatalf("credentials = %+v", c)
	}
	if got := op.Args.Get(r); !sameValue(reflect.ValueOf(got), reflect.ValueOf(a)) {
		t.Errorf("arguments = %+v, sent %+v", got, a)
	}
	if err := r.Done(); err != nil {
		t.Errorf("arguments left over: %v", err)
	}
	res := randomValue[R](t, rnd)
	out := NewBuf(64)
	op.Result.Put(out, res)
	var sent []*meta.Attr
	if op.Dirs != nil {
		sent = []*meta.Attr{{Ino: 7, Type: 2, Nlink: 3}}
		out.Uvarint(1)
		putAttr(out, sent[0])
	}
	r = NewReader(out.Raw())
	got, dirs := op.Reply(r)
	if !sameValue(reflect.ValueOf(got), reflect.ValueOf(res)) {
		t.Errorf("results = %+v, sent %+v", got, res)
	}
	if !sameValue(reflect.ValueOf(dirs), reflect.ValueOf(sent)) {
		t.Errorf("directories = %+v, sent %+v", dirs, sent)
	}
	if err := r.Done(); err != nil {
		t.Errorf("results left over: %v", err)
	}
}

func randomValue[T any](t *testing.T, rnd *rand.Rand) T {
	t.Helper()
	var v T
	rv, ok := quick.Value(reflect.TypeOf(v), rnd)
	if !ok {
		t.Fatalf("no random %T", v)
	}
	return rv.Interface().(T)
}

// sameValue is reflect.DeepEqual with a nil slice equal to an empty one,
// and a nil pointer to one to a zero value.
func sameValue(a, b reflect.Value) bool {
	if a.Kind() != b.Kind() {
		return false
	}
	switch a.Kind() {
	case reflect.Slice:
		if a.Len() != b.Len() {
			return false
		}
		for i := 0; i < a.Len(); i++ {
			if !sameValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Pointer:
		if a.IsNil() && b.IsNil() {
			return true
		}
		if a.IsNil() || b.IsNil() {
			// attributes that must be present decode as the zero ones
			// (attrValue)
			nonNil := a
			if a.IsNil() {
				nonNil = b
			}
			return nonNil.Elem().IsZero()
		}
		return sameValue(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if !sameValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// TestOpsRoundTrip sends random arguments and results of every operation
// through its codecs: what one side encodes, the other decodes the same.
func TestOpsRoundTrip(t *testing.T) {
	rnd := rand.New(rand.NewSource(1))
	for name, e := range table {
		t.Run(name, func(t *testing.T) {
			for i := 0; i < 20; i++ {
				e.(interface {
					roundTrip(*testing.T, *rand.Rand)
				}).roundTrip(t, rnd)
			}
		})
	}
}

// TestReadDirFrom tells a listing from the start (nil) from one after the
// empty name.
func TestReadDirFrom(t *testing.T) {
	for _, after := range [][]byte{nil, {}, []byte("x")} {
		b := NewBuf(16)
		ReadDir.Args.Put(b, T4[meta.Ino, []byte, int, bool]{A: 1, B: after, C: 10})
		got := ReadDir.Args.Get(NewReader(b.Raw()))
		if (got.B == nil) != (after == nil) || string(got.B) != string(after) {
			t.Errorf("after %q (nil %v) decoded as %q (nil %v)", after, after == nil, got.B, got.B == nil)
		}
	}
}
