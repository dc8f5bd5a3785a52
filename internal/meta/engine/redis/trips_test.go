package redis

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// tripCounter is a go-redis hook that counts the round trips (single
// commands and pipelines) sent with a context carrying it, so that the
// meta client's background work is not counted.
type tripCounter struct{ n atomic.Int64 }

type tripKey struct{}

func (c *tripCounter) counted(ctx context.Context) bool { return ctx.Value(tripKey{}) == c }

func (c *tripCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if c.counted(ctx) {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if c.counted(ctx) {
			c.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// countTrips adds a tripCounter to d and returns it with a context whose
// commands it counts. It loads the scripts first, so that no first call
// takes a second round trip for EVAL after EVALSHA failed.
func countTrips(tb testing.TB, ctx context.Context, d *DB) (*tripCounter, context.Context) {
	tb.Helper()
	for _, s := range []*redis.Script{commitScript, fetchScript} {
		if err := s.Load(ctx, d.c).Err(); err != nil {
			tb.Fatalf("load script: %v", err)
		}
	}
	c := &tripCounter{}
	d.c.AddHook(c)
	return c, context.WithValue(ctx, tripKey{}, c)
}

// newBenchClient formats a volume in a fresh namespace of the server env
// names and returns a meta client on it, the database, and a directory.
func newBenchClient(tb testing.TB, env string) (*meta.Session, *DB, meta.Ino) {
	tb.Helper()
	ctx := context.Background()
	d := openDBNoCache(tb, freshURL(tb, env))
	st := kvstore.New(d)
	tb.Cleanup(func() { st.Close() })
	if _, err := meta.FormatVolume(ctx, st, &meta.Format{Name: "bench", UUID: "u", Storage: "mem", Bucket: "x", BlockSize: 4096}); err != nil {
		tb.Fatal(err)
	}
	c, err := meta.NewSession(ctx, st, meta.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close(ctx) })
	dir, err := c.Mknod(ctx, meta.RootIno, []byte("bench"), meta.NewNode{Type: store.TypeDir, Mode: 0o755})
	if err != nil {
		tb.Fatal(err)
	}
	return c, d, dir.Ino
}

// TestRoundTrips bounds the number of round trips of the operations behind
// a FUSE create, stat and unlink, the way the kernel sends them: a LOOKUP
// of the name, then the operation. (Bounds, not exact counts, so that the
// meta core may read less.)
func TestRoundTrips(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			c, d, dir := newBenchClient(t, s.env)
			trips, ctx := countTrips(t, context.Background(), d)
			file := meta.NewNode{Type: store.TypeFile, Mode: 0o644}
			// The first create allocates a batch of inode numbers.
			if _, err := c.Mknod(ctx, dir, []byte("warm"), file); err != nil {
				t.Fatal(err)
			}
			name := func(i int) []byte { return fmt.Appendf(nil, "f%d", i) }
			lookup := func(i int, want syscall.Errno) error {
				if _, err := c.Lookup(ctx, dir, name(i)); meta.Errno(err) != want {
					return fmt.Errorf("lookup: %v, want errno %d", err, want)
				}
				return nil
			}
			steps := []struct {
				op   string
				want int64
				fn   func(i int) error
			}{
				// The create reads the entry and directory the lookup has
				// just read, and commits.
				{"create (LOOKUP, CREATE)", 2, func(i int) error {
					if err := lookup(i, syscall.ENOENT); err != nil {
						return err
					}
					_, err := c.Mknod(ctx, dir, name(i), file)
					return err
				}},
				// The node of the entry comes in the same round trip.
				{"stat (LOOKUP)", 1, func(i int) error { return lookup(i, 0) }},
				{"getattr", 1, func(i int) error {
					_, err := c.GetAttr(ctx, dir)
					return err
				}},
				// The unlink scans the file's xattrs and commits.
				{"unlink (LOOKUP, UNLINK)", 3, func(i int) error {
					if err := lookup(i, 0); err != nil {
						return err
					}
					return c.Unlink(ctx, dir, name(i))
				}},
				// Without the lookup, a create of a name not seen before
				// reads the entry (1 round trip) and commits.
				{"create", 2, func(i int) error {
					_, err := c.Mknod(ctx, dir, name(1000+i), file)
					return err
				}},
				// A rename reads each name with its node (Tx.Lookup):
				// the source, just created, from what the handle
				// committed, the destination in one round trip; and
				// commits.
				{"rename", 2, func(i int) error {
					return c.Rename(ctx, dir, name(1000+i), dir, name(2000+i), 0)
				}},
			}
			const n = 20
			for _, st := range steps {
				before := trips.n.Load()
				for i := range n {
					if err := st.fn(i); err != nil {
						t.Fatalf("%s %d: %v", st.op, i, err)
					}
				}
				got := float64(trips.n.Load()-before) / n
				t.Logf("%s: %.2f round trips", st.op, got)
				if got > float64(st.want) {
					t.Errorf("%s: %.2f round trips, want at most %d", st.op, got, st.want)
				}
			}
		})
	}
}
