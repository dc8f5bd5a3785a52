package meta

import "context"

type sentAgainKey struct{}

// WithSentAgain marks ctx as the context of an operation that may have
// been applied already: a call the metadata server runs for a mount,
// which the mount sent again after losing the reply, and which the
// server no longer remembers because it restarted in between. (The
// calls that change names, and slice writes, are run so only when the
// server's table of applied calls no longer holds them: see
// store.WithCall.)
// Such a run finds what the first one did in the records: an operation
// whose second run would change them again checks for it first. So far
// that is WriteSliceAttr, which does not append a slice its chunk names
// already at the same place (a newly written slice has a new id, so only
// a first run of the same call can have put it there). The others set
// what they set before.
func WithSentAgain(ctx context.Context) context.Context {
	return context.WithValue(ctx, sentAgainKey{}, true)
}

func sentAgain(ctx context.Context) bool {
	again, _ := ctx.Value(sentAgainKey{}).(bool)
	return again
}
