package redis

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// Whole-family listings for fsck and gc. Scans stay inside one sorted set
// (see scanGroup), and node records, slice references and the chunks of
// all inodes together are in none, so kvstore lists families through
// kvstore.Lister: a SCAN of the keyspace with a MATCH on the family. SCAN
// returns every key that exists throughout the listing, possibly twice,
// in no order; the cursor is SCAN's, valid across calls.

var _ kvstore.Lister = (*txn)(nil)

// List pages through the keys starting with prefix outside the
// transaction; buffered writes are not merged.
func (t *txn) List(prefix, cursor []byte, limit int) ([]kvstore.Pair, []byte, error) {
	var cur uint64
	if cursor != nil {
		if len(cursor) != 8 {
			return nil, nil, fmt.Errorf("redis: bad list cursor %q", cursor)
		}
		cur = binary.BigEndian.Uint64(cursor)
	}
	node, err := t.d.nodeClient(t.ctx)
	if err != nil {
		return nil, nil, err
	}
	pattern := globEscape(t.d.dataKey(string(prefix))) + "*"
	keys, next, err := node.Scan(t.ctx, cur, pattern, int64(limit)).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("redis: scan %q: %w", prefix, err)
	}
	var out []kvstore.Pair
	if len(keys) > 0 {
		vals, err := node.MGet(t.ctx, keys...).Result()
		if err != nil {
			return nil, nil, fmt.Errorf("redis: %w", err)
		}
		skip := len(t.d.dataKey(""))
		for i, v := range vals {
			s, ok := v.(string)
			if !ok {
				continue // deleted since the SCAN
			}
			out = append(out, kvstore.Pair{Key: []byte(keys[i][skip:]), Value: []byte(s)})
		}
	}
	if next == 0 {
		return out, nil, nil
	}
	return out, binary.BigEndian.AppendUint64(nil, next), nil
}

// nodeClient returns the server holding the volume's keys: all of them
// share one hash tag, so in a cluster they live on one master.
func (d *DB) nodeClient(ctx context.Context) (*redis.Client, error) {
	switch c := d.c.(type) {
	case *redis.ClusterClient:
		n, err := c.MasterForKey(ctx, d.anchorKey())
		if err != nil {
			return nil, fmt.Errorf("redis: find the volume's master: %w", err)
		}
		return n, nil
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("redis: unexpected client %T", d.c)
}

// globEscape quotes the characters MATCH patterns treat specially.
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
