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

type coldKey struct{}

// ReportCold returns a context under which a ranged Get of a store that
// reads from a local device tells through *cold whether its bytes had to
// come from the device: it sets *cold when they were not all in memory
// (the page cache), or when it cannot tell. The local directory reports
// it; stores that keep objects in memory never set it, and remote stores
// ignore it, so only a caller that knows its bucket is local asks.
// Decorators pass the context on.
func ReportCold(ctx context.Context, cold *bool) context.Context {
	return context.WithValue(ctx, coldKey{}, cold)
}

// ColdReport returns the flag a Get under ReportCold sets, or nil.
func ColdReport(ctx context.Context) *bool {
	v, _ := ctx.Value(coldKey{}).(*bool)
	return v
}
