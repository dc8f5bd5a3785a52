package store

import "context"

// CallTag names one call of a mount's session on the metadata server:
// the session id and the call's number in it.
type CallTag struct {
	Session, Call uint64
}

type callTagKey struct{}

// WithCall tags ctx with the call it runs. An engine that can keep it
// (the metadata server's, package engine/sluice) records the tag with
// every commit made under ctx, in the same durable record as the
// commit's writes, so that after a restart the server can tell a call
// it applied from one it never saw. Engines that cannot keep it ignore
// it.
func WithCall(ctx context.Context, t CallTag) context.Context {
	return context.WithValue(ctx, callTagKey{}, t)
}

// WithoutCall returns ctx without its call tag, for a commit made on the
// way to a call's effect rather than being it (an id reservation): its
// record must not say that the call was applied.
func WithoutCall(ctx context.Context) context.Context {
	if _, ok := CallOf(ctx); !ok {
		return ctx
	}
	return context.WithValue(ctx, callTagKey{}, CallTag{})
}

// CallOf returns the call ctx is tagged with.
func CallOf(ctx context.Context) (CallTag, bool) {
	t, _ := ctx.Value(callTagKey{}).(CallTag)
	return t, t.Session != 0
}
