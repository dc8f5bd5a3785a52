package redis

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

var (
	consistencySeed = flag.Uint64("consistency.seed", 0, "seed of TestCacheConsistency (0: a fresh one)")
	consistencyOps  = flag.Int("consistency.ops", 300, "operations per goroutine of TestCacheConsistency")
)

// TestCacheConsistency checks the promises of store.Store.View on two
// cached handles of one volume, written and read at random by several
// goroutines each:
//
//   - a handle never reads a value older than one it has already read
//     (a read that ended before another began), nor older than one it
//     has committed (it reads its own writes);
//   - a read that begins more than store.MaxLag after a commit returned,
//     through either handle, sees that commit or a later one;
//   - an Update that commits read values current at its commit.
//
// Every key carries a version: each logical key has a counter key, read
// and bumped by every Update that writes it (so writes of one logical key
// are serialized by the commit's checks), and a data key that holds the
// version when it exists. Whether a version exists is a function of the
// version (see absent), so a read of a missing key still says which
// versions it may be. Data keys are directory entries (so the cache's
// known-whole directories answer missing names) and node records (which
// reads of entries fetch ahead when an entry's value names them).
//
// The "churn" runs also keep the caches tiny, so that they forget keys
// all the time, and now and then drop a handle's cache connection, so
// that the cache empties and comes back while commits run on it.
func TestCacheConsistency(t *testing.T) {
	for _, s := range servers {
		for _, churn := range []bool{false, true} {
			name := s.name
			if churn {
				name += "/churn"
			}
			t.Run(name, func(t *testing.T) {
				seed := *consistencySeed
				if seed == 0 {
					seed = rand.Uint64()
				}
				if churn {
					defer func(n int) { cacheMax = n }(cacheMax)
					cacheMax = 4
				}
				d1, d2 := cachedHandlesOn(t, s.env)
				waitFor(t, "the second cache live", func() bool { return live(d2) })
				c := newConsistency(t, seed)
				c.churn = churn
				c.run(t, []*DB{d1, d2}, *consistencyOps)
				if t.Failed() {
					t.Logf("seed %d (rerun with -consistency.seed=%d)", seed, seed)
				}
			})
		}
	}
}

// ckey is one logical key of the consistency test.
type ckey struct {
	name    string
	data    []byte // holds the version, when the version is not absent
	counter []byte // holds the version; missing only at version 0
}

// absent reports whether the data key of a logical key is missing at
// version v: every fourth version deletes it.
func absent(v uint64) bool { return v%4 == 0 }

// nextAbsent returns the smallest absent version at or above v.
func nextAbsent(v uint64) uint64 { return (v + 3) / 4 * 4 }

// dataValue encodes version v as a value of key k: a directory entry's
// value (type, then the version where the inode goes) or eight bytes.
func (k *ckey) dataValue(v uint64) []byte {
	if followsValue(string(k.data)) {
		return binary.BigEndian.AppendUint64([]byte{store.TypeFile}, v)
	}
	return binary.BigEndian.AppendUint64(nil, v)
}

// decode returns the version a value of data key (or, with counter, the
// counter key) of k encodes.
func (k *ckey) decode(b []byte, counter bool) (uint64, error) {
	if !counter && followsValue(string(k.data)) {
		if len(b) != 9 || b[0] != store.TypeFile {
			return 0, fmt.Errorf("%s: bad entry value %x", k.name, b)
		}
		b = b[1:]
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("%s: bad value %x", k.name, b)
	}
	return binary.BigEndian.Uint64(b), nil
}

// obs is what one read showed of one key: a version, or a missing key.
type obs struct {
	present bool
	ver     uint64
}

// chandle is the test's knowledge of one handle: for each key (data or
// counter), the lowest version its next read may show.
type chandle struct {
	d    *DB
	name string
	mu   sync.Mutex
	low  map[string]uint64
}

func (h *chandle) lowOf(k string) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.low[k]
}

func (h *chandle) raise(k string, v uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.low[k] = max(h.low[k], v)
}

// commitRec is a commit of one version of a logical key, and when the
// Update that made it had returned.
type commitRec struct {
	ver  uint64
	done time.Time
}

// consistency is the shared state of one run.
type consistency struct {
	seed  uint64
	churn bool // drop cache connections now and then
	keys  []*ckey
	// byKey maps every data and counter key to its logical key.
	byKey map[string]*ckey

	mu        sync.Mutex
	commits   map[string][]commitRec // by logical key name
	attempted map[string]uint64      // highest version an Update tried to commit
	errs      []string
}

func newConsistency(t *testing.T, seed uint64) *consistency {
	c := &consistency{seed: seed, byKey: map[string]*ckey{},
		commits: map[string][]commitRec{}, attempted: map[string]uint64{}}
	add := func(name string, data []byte) {
		k := &ckey{name: name, data: data, counter: []byte("Cver-" + name)}
		c.keys = append(c.keys, k)
		c.byKey[string(k.data)], c.byKey[string(k.counter)] = k, k
	}
	for i := range 6 {
		add(fmt.Sprintf("entry%d", i), dirKey(fmt.Sprintf("n%d", i)))
	}
	for ino := uint64(1); ino <= 4; ino++ {
		// The nodes that entries at versions 1 to 4 name.
		add(fmt.Sprintf("node%d", ino), append(binary.BigEndian.AppendUint64([]byte("A"), ino), 'I'))
	}
	return c
}

// fail records a violation; the run reports the first few.
func (c *consistency) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

// required returns the lowest version of k a read that began at start
// must show: that of every commit returned more than MaxLag before.
func (c *consistency) required(k *ckey, start time.Time) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var v uint64
	for _, r := range c.commits[k.name] {
		if start.Sub(r.done) > store.MaxLag {
			v = max(v, r.ver)
		}
	}
	return v
}

func (c *consistency) attemptedOf(k *ckey) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attempted[k.name]
}

// observe checks what handle h read of key (a data or counter key) in a
// read that began at start, when h's bound for the key was low, and
// raises the bound.
func (c *consistency) observe(h *chandle, key string, o obs, start time.Time, low uint64, what string) {
	k := c.byKey[key]
	isCounter := key == string(k.counter)
	req := c.required(k, start)
	top := c.attemptedOf(k)
	min := max(low, req)
	var now uint64 // the lowest version the read can have shown
	switch {
	case o.present && isCounter && o.ver == 0, o.present && !isCounter && absent(o.ver):
		c.fail("%s: %s read %q = version %d, which has no value", h.name, what, key, o.ver)
		return
	case o.present && o.ver > top:
		c.fail("%s: %s read %q = version %d, never written (highest attempted %d)", h.name, what, key, o.ver, top)
		return
	case o.present:
		now = o.ver
	case isCounter:
		now = 0
	default:
		now = nextAbsent(min)
		if now > top {
			now = 0 // no absent version at or above min was written
		}
	}
	if now < min || (!o.present && isCounter && min > 0) {
		why := "an older version than the handle had already read or written"
		if req > low {
			why = fmt.Sprintf("a version older than one committed more than %v before the read began", store.MaxLag)
		}
		c.fail("%s: %s read %q = %v: %s (at least %d; own bound %d, required by lag %d)",
			h.name, what, key, o, why, min, low, req)
		return
	}
	h.raise(key, now)
}

func (o obs) String() string {
	if !o.present {
		return "missing"
	}
	return fmt.Sprint("version ", o.ver)
}

// run starts goroutines per handle doing ops operations each, and
// reports the violations found.
func (c *consistency) run(t *testing.T, dbs []*DB, ops int) {
	t.Helper()
	const perHandle = 3
	var wg sync.WaitGroup
	for i, d := range dbs {
		h := &chandle{d: d, name: fmt.Sprint("handle", i+1), low: map[string]uint64{}}
		for g := range perHandle {
			r := rand.New(rand.NewPCG(c.seed, uint64(i*perHandle+g)))
			wg.Go(func() {
				for range ops {
					if err := c.step(h, r); err != nil {
						c.fail("%s: %v", h.name, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	n := 0
	c.mu.Lock()
	for _, rs := range c.commits {
		n += len(rs)
	}
	c.mu.Unlock()
	t.Logf("seed %d: %d commits", c.seed, n)
	for i, e := range c.errs {
		if i == 20 {
			t.Errorf("... and %d more", len(c.errs)-i)
			break
		}
		t.Error(e)
	}
}

// step does one random operation through h.
func (c *consistency) step(h *chandle, r *rand.Rand) error {
	ctx := context.Background()
	p := r.IntN(100)
	if c.churn && p == 0 {
		h.d.watch.Drop()
		return nil
	}
	switch {
	case p < 2:
		time.Sleep(time.Duration(r.IntN(300)) * time.Millisecond) // let lag matter
		return nil
	case p < 30:
		return c.update(ctx, h, r)
	case p < 45:
		return c.viewScan(ctx, h)
	default:
		return c.viewGet(ctx, h, r)
	}
}

// pick returns n distinct random logical keys.
func (c *consistency) pick(r *rand.Rand, n int) []*ckey {
	idx := r.Perm(len(c.keys))[:n]
	out := make([]*ckey, n)
	for i, j := range idx {
		out[i] = c.keys[j]
	}
	return out
}

// viewGet reads a few data and counter keys in one View, with one
// GetMany or one Get each.
func (c *consistency) viewGet(ctx context.Context, h *chandle, r *rand.Rand) error {
	var keys []string
	for _, k := range c.pick(r, 1+r.IntN(3)) {
		switch r.IntN(3) {
		case 0:
			keys = append(keys, string(k.counter))
		case 1:
			keys = append(keys, string(k.data), string(k.counter))
		default:
			keys = append(keys, string(k.data))
		}
	}
	mode := r.IntN(3)
	if mode == 2 {
		return c.viewFollow(ctx, h, keys)
	}
	many := mode == 0
	return c.view(ctx, h, keys, func(tx kvstore.Txn) ([][]byte, error) {
		if many {
			bs := make([][]byte, len(keys))
			for i, k := range keys {
				bs[i] = []byte(k)
			}
			return tx.GetMany(bs)
		}
		vals := make([][]byte, len(keys))
		for i, k := range keys {
			v, err := tx.Get([]byte(k))
			if err != nil {
				return nil, err
			}
			vals[i] = v
		}
		return vals, nil
	})
}

// viewFollow reads keys with GetFollow, following the entries: an entry
// at version v names node v, which is one of the test's node keys for v
// from 1 to 4 and a key never written otherwise.
func (c *consistency) viewFollow(ctx context.Context, h *chandle, keys []string) error {
	bs := make([][]byte, len(keys))
	follow := make([]bool, len(keys))
	for i, k := range keys {
		bs[i], follow[i] = []byte(k), followsValue(k)
	}
	lows := make(map[string]uint64)
	for _, k := range c.keys {
		for _, key := range []string{string(k.data), string(k.counter)} {
			lows[key] = h.lowOf(key)
		}
	}
	start := time.Now()
	var vals, next [][]byte
	err := h.d.View(ctx, func(tx kvstore.Txn) error {
		var err error
		vals, next, err = tx.(kvstore.Follower).GetFollow(bs, follow, kvstore.EntryFollow)
		return err
	})
	if err != nil {
		return fmt.Errorf("view: %w", err)
	}
	for i, k := range keys {
		o, err := c.decode(k, vals[i])
		if err != nil {
			return err
		}
		c.observe(h, k, o, start, lows[k], "a view (GetFollow)")
		if !follow[i] || !o.present {
			continue
		}
		nk := string(kvstore.EntryFollow.Next(vals[i]))
		if _, ours := c.byKey[nk]; !ours {
			if next[i] != nil {
				c.fail("%s: GetFollow of %q = version %d followed to %q = %x, a key never written", h.name, k, o.ver, nk, next[i])
			}
			continue
		}
		n, err := c.decode(nk, next[i])
		if err != nil {
			return err
		}
		c.observe(h, nk, n, start, lows[nk], "a view (followed)")
	}
	return nil
}

// viewScan lists the directory of the entry keys: a name not listed is
// read as missing.
func (c *consistency) viewScan(ctx context.Context, h *chandle) error {
	var keys []string
	for _, k := range c.keys {
		if followsValue(string(k.data)) {
			keys = append(keys, string(k.data))
		}
	}
	return c.view(ctx, h, keys, func(tx kvstore.Txn) ([][]byte, error) {
		ps, err := tx.Scan(dirKey(""), dirKey("\xff"), 0)
		if err != nil {
			return nil, err
		}
		found := map[string][]byte{}
		for _, p := range ps {
			found[string(p.Key)] = p.Value
		}
		vals := make([][]byte, len(keys))
		for i, k := range keys {
			vals[i] = found[k]
		}
		return vals, nil
	})
}

// view runs read in a View and checks the values it returns for keys.
func (c *consistency) view(ctx context.Context, h *chandle, keys []string, read func(kvstore.Txn) ([][]byte, error)) error {
	lows := make([]uint64, len(keys))
	for i, k := range keys {
		lows[i] = h.lowOf(k)
	}
	start := time.Now()
	var vals [][]byte
	err := h.d.View(ctx, func(tx kvstore.Txn) error {
		var err error
		vals, err = read(tx)
		return err
	})
	if err != nil {
		return fmt.Errorf("view: %w", err)
	}
	for i, k := range keys {
		o, err := c.decode(k, vals[i])
		if err != nil {
			return err
		}
		c.observe(h, k, o, start, lows[i], "a view")
	}
	return nil
}

func (c *consistency) decode(key string, v []byte) (obs, error) {
	if v == nil {
		return obs{}, nil
	}
	k := c.byKey[key]
	ver, err := k.decode(v, key == string(k.counter))
	return obs{present: true, ver: ver}, err
}

// update bumps the versions of one or two logical keys in one Update,
// reading their counters and, at random, their data keys first. The
// values an Update that commits has read must be current: the data key
// must hold its counter's version.
func (c *consistency) update(ctx context.Context, h *chandle, r *rand.Rand) error {
	keys := c.pick(r, 1+r.IntN(2))
	readData := make([]bool, len(keys))
	del := make([]bool, len(keys))
	for i := range keys {
		readData[i] = r.IntN(2) == 0
		del[i] = r.IntN(3) == 0
	}
	many := r.IntN(2) == 0
	var lows []uint64 // the handle's bounds, in the order of read
	for i, k := range keys {
		lows = append(lows, h.lowOf(string(k.counter)))
		if readData[i] {
			lows = append(lows, h.lowOf(string(k.data)))
		}
	}
	start := time.Now()
	var read []obs // per key: the counter, then the data key when read
	var vers []uint64
	err := h.d.Update(ctx, func(tx kvstore.Txn) error {
		read, vers = read[:0], vers[:0]
		var want [][]byte
		for i, k := range keys {
			want = append(want, k.counter)
			if readData[i] {
				want = append(want, k.data)
			}
		}
		var vals [][]byte
		if many {
			var err error
			if vals, err = tx.GetMany(want); err != nil {
				return err
			}
		} else {
			for _, w := range want {
				v, err := tx.Get(w)
				if err != nil {
					return err
				}
				vals = append(vals, v)
			}
		}
		j := 0
		for i, k := range keys {
			o, err := c.decode(string(k.counter), vals[j])
			if err != nil {
				return err
			}
			read = append(read, o)
			j++
			if readData[i] {
				d, err := c.decode(string(k.data), vals[j])
				if err != nil {
					return err
				}
				read = append(read, d)
				j++
			}
			v := o.ver + 1
			if del[i] {
				v = nextAbsent(v)
			} else if absent(v) {
				v++
			}
			vers = append(vers, v)
			c.mu.Lock()
			c.attempted[k.name] = max(c.attempted[k.name], v)
			c.mu.Unlock()
			tx.Set(k.counter, binary.BigEndian.AppendUint64(nil, v))
			if absent(v) {
				tx.Delete(k.data)
			} else {
				tx.Set(k.data, k.dataValue(v))
			}
		}
		return nil
	})
	if errors.Is(err, store.ErrConflict) {
		return nil // kvstore.Store retries; the bare DB does not
	}
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	done := time.Now()
	j := 0
	for i, k := range keys {
		ctr := read[j]
		c.observe(h, string(k.counter), ctr, start, lows[j], "an update")
		j++
		if readData[i] {
			d := read[j]
			c.observe(h, string(k.data), d, start, lows[j], "an update")
			j++
			if d.present == absent(ctr.ver) || (d.present && d.ver != ctr.ver) {
				c.fail("%s: an update committed having read %q = %v and %q = %v", h.name,
					k.counter, ctr, k.data, d)
			}
		}
		c.mu.Lock()
		c.commits[k.name] = append(c.commits[k.name], commitRec{ver: vers[i], done: done})
		c.mu.Unlock()
		h.raise(string(k.counter), vers[i])
		h.raise(string(k.data), vers[i])
	}
	return nil
}
