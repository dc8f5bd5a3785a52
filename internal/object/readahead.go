package object

import "context"

type readAheadKey struct{}

// ReadAhead returns a context under which a Get is a read ahead of a
// sequential reader: the object is read once, whole and in order, and the
// caller caches it, so the store need not keep a copy (the local
// directory then reads it with direct I/O, bypassing the page cache).
// Decorators pass the context on; other stores ignore it.
func ReadAhead(ctx context.Context) context.Context {
	return context.WithValue(ctx, readAheadKey{}, true)
}

// IsReadAhead reports whether ctx came from ReadAhead.
func IsReadAhead(ctx context.Context) bool {
	v, _ := ctx.Value(readAheadKey{}).(bool)
	return v
}
