package object

import "context"

// Syncer is implemented by stores whose Put makes an object durable by
// itself at a cost per object (a local directory syncs every file it
// writes) and that can leave that to a later Sync instead: a Put whose
// context carries DeferSync returns once the object is stored whole and
// readable, and a crash of the host may lose it until the next Sync
// returns. Sync makes every Put that returned before it began durable.
// Stores that are durable on return (S3) or never durable (memory) do not
// implement it.
type Syncer interface {
	Sync(ctx context.Context) error
}

type deferSyncKey struct{}

// DeferSync returns a context under which a Syncer's Put may return
// before the object is durable. Decorators pass the context on unchanged,
// so the request reaches the store that can honour it; other stores
// ignore it.
func DeferSync(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferSyncKey{}, true)
}

// SyncDeferred reports whether ctx came from DeferSync.
func SyncDeferred(ctx context.Context) bool {
	v, _ := ctx.Value(deferSyncKey{}).(bool)
	return v
}

// FindSyncer returns the Syncer at the bottom of s's chain of decorators,
// or nil when that store is not one.
func FindSyncer(s Store) Syncer {
	for s != nil {
		if y, ok := s.(Syncer); ok {
			return y
		}
		u, ok := s.(Unwrapper)
		if !ok {
			return nil
		}
		s = u.Unwrap()
	}
	return nil
}
