package redis

import (
	"bufio"
	"context"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/testserver"
)

// BenchmarkTrip compares one round trip to the server as the engine makes
// it with the bare round trip of a PING on a plain connection: a PING
// through go-redis's pool, a command on the cache's stream (Tracker.Call,
// where commits run), and a whole Update that reads a key and writes it
// (a commit script, with the cache's read again of the key riding on the
// next one). Run with SLUICE_TEST_REDIS set:
//
//	go test ./internal/meta/engine/redis -run XX -bench Trip -benchtime 5000x
func BenchmarkTrip(b *testing.B) {
	raw := freshURL(b, testserver.Redis)
	u, _ := url.Parse(raw)
	d := openDB(b, raw)
	defer d.Close()
	ctx := context.Background()
	if d.cache == nil {
		b.Fatal("no cache")
	}
	for !d.cache.Live() {
		time.Sleep(time.Millisecond)
	}
	b.Run("raw-ping", func(b *testing.B) {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		r := bufio.NewReader(c)
		ping := []byte("PING\r\n")
		for b.Loop() {
			if _, err := c.Write(ping); err != nil {
				b.Fatal(err)
			}
			if _, err := r.ReadString('\n'); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("go-redis-ping", func(b *testing.B) {
		for b.Loop() {
			if err := d.c.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stream-call", func(b *testing.B) {
		for b.Loop() {
			if _, err := d.watch.Call(ctx, []string{"EXISTS", d.anchorKey()}, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("update-read-write", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			err := d.Update(ctx, func(t kvstore.Txn) error {
				if _, err := t.Get([]byte("Ibench")); err != nil {
					return err
				}
				t.Set([]byte("Ibench"), []byte{byte(i)})
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
