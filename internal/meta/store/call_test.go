package store

import (
	"context"
	"testing"
)

func TestCallTag(t *testing.T) {
	tagged := WithCall(context.Background(), CallTag{Session: 3, Call: 9})
	for _, c := range []struct {
		name string
		ctx  context.Context
		want CallTag
		ok   bool
	}{
		{"untagged", context.Background(), CallTag{}, false},
		{"tagged", tagged, CallTag{3, 9}, true},
		{"tag stripped", WithoutCall(tagged), CallTag{}, false},
		{"tagged again", WithCall(WithoutCall(tagged), CallTag{4, 1}), CallTag{4, 1}, true},
		{"no session", WithCall(context.Background(), CallTag{Call: 9}), CallTag{Call: 9}, false},
	} {
		got, ok := CallOf(c.ctx)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: CallOf = %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
	if ctx := context.Background(); WithoutCall(ctx) != ctx {
		t.Error("WithoutCall of an untagged context made a new one")
	}
}
