package kvcache

import "testing"

func TestTwoGen(t *testing.T) {
	m := NewTwoGen[int, string](2)
	steps := []struct {
		op      string // "put", "use", "get", "del"
		k       int
		rotated bool   // put, use
		want    string // get, use: "" for missing
	}{
		{op: "put", k: 1},
		{op: "put", k: 2},
		{op: "put", k: 3, rotated: true}, // 1 and 2 are old now
		{op: "get", k: 1, want: "v1"},
		{op: "use", k: 2, want: "v2"}, // back to the current generation with 3
		{op: "put", k: 4, rotated: true},
		{op: "get", k: 1},             // dropped
		{op: "get", k: 2, want: "v2"}, // old
		{op: "get", k: 4, want: "v4"},
		{op: "del", k: 2},
		{op: "get", k: 2},
		{op: "put", k: 4}, // already current: no rotation
	}
	for i, s := range steps {
		v := "v" + string(rune('0'+s.k))
		switch s.op {
		case "put":
			if r := m.Put(s.k, v) != nil; r != s.rotated {
				t.Fatalf("step %d: put %d rotated %v, want %v", i, s.k, r, s.rotated)
			}
		case "use":
			got, ok, dropped := m.Use(s.k)
			if r := dropped != nil; got != s.want || ok != (s.want != "") || r != s.rotated {
				t.Fatalf("step %d: use %d = %q, %v, %v; want %q, rotated %v", i, s.k, got, ok, r, s.want, s.rotated)
			}
		case "get":
			if got, ok := m.Get(s.k); got != s.want || ok != (s.want != "") {
				t.Fatalf("step %d: get %d = %q, %v; want %q", i, s.k, got, ok, s.want)
			}
		case "del":
			m.Delete(s.k)
		}
	}
	if m.Len() != 2 { // 3 (old) and 4
		t.Fatalf("len = %d, want 2", m.Len())
	}
	m.Clear()
	if m.Len() != 0 {
		t.Fatalf("len after clear = %d", m.Len())
	}
}
