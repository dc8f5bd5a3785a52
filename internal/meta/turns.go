package meta

import (
	"context"
	"fmt"
	"sync"
)

// turns makes the slice commits of one inode through one Client wait
// their turn, first come first served, instead of racing.
//
// Every slice commit of a file writes the file's node (its length and
// mtime), so two commits of one file in flight at once always conflict,
// whichever chunks they write: the engine lets one win and sends the
// other back to start again. With several writers in one mount (a
// database's checkpointer and background writer writing one file, with
// --writeback; or, on the metadata server, the commits of one mount's
// session, which the server runs concurrently) the commits that lost
// raced again with the ones that arrived meanwhile, and a commit could
// lose until store.Retry gave up on it: the write failed with EIO
// although nothing was wrong with it. Taking turns inside the Client
// costs those commits nothing they would not have lost to conflicts,
// and leaves engine conflicts to commits of different mounts.
type turns struct {
	mu sync.Mutex
	m  map[Ino]*turn
}

// turn is the queue of one inode's commits: ch holds a token while one
// runs, and senders blocked on it are served in the order they came.
type turn struct {
	ch    chan struct{}
	users int // holders and waiters; the turn is dropped at zero
}

// take waits for ino's turn and returns the function that ends it. A
// caller whose ctx ends while it waits gets ctx's error, and no turn.
func (ts *turns) take(ctx context.Context, ino Ino) (func(), error) {
	ts.mu.Lock()
	if ts.m == nil {
		ts.m = map[Ino]*turn{}
	}
	t := ts.m[ino]
	if t == nil {
		t = &turn{ch: make(chan struct{}, 1)}
		ts.m[ino] = t
	}
	t.users++
	ts.mu.Unlock()
	done := func() {
		<-t.ch
		ts.leave(ino, t)
	}
	select {
	case t.ch <- struct{}{}:
		return done, nil // nobody had it: ctx.Done, which may cost a timer, not asked for
	default:
	}
	select {
	case t.ch <- struct{}{}:
		return done, nil
	case <-ctx.Done():
		ts.leave(ino, t)
		return nil, fmt.Errorf("wait for the other commits of inode %d: %w", ino, ctx.Err())
	}
}

// leave forgets t once nobody holds or waits for it.
func (ts *turns) leave(ino Ino, t *turn) {
	ts.mu.Lock()
	if t.users--; t.users == 0 {
		delete(ts.m, ino)
	}
	ts.mu.Unlock()
}
