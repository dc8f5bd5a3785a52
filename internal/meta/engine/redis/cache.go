package redis

import (
	"sync"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// cache keeps values of kvstore keys that the server promises to report
// changes of, so that reads need no round trip. The promise is Redis's
// CLIENT TRACKING in broadcast mode, held by one dedicated connection per
// handle (see watcher): the server sends on it the name of every key of
// the volume that anybody modifies. That connection also does the
// cache's reads, so replies and invalidations arrive in one stream, in
// the order the server produced them, and a value is known to be current
// as of its place in that stream:
//
//   - An invalidation makes the key's value unusable and queues a read of
//     it on the connection (sent within refetchDelay), unless one is
//     already under way: a read sent
//     before an invalidation arrived but answered after it was executed
//     after the write the invalidation reports (the server flushes a
//     write's broadcast before it executes the next batch of commands).
//   - A reply makes the key's value usable again.
//
// So no value is used after the connection has seen an invalidation of
// it, and the cache lags the server by no more than the connection does.
// The lag is bounded: the watcher pings every pingEvery, and values are
// used only while a ping sent less than lease ago has been answered, so
// a stalled or partitioned connection stops the cache within lease. A
// broken connection empties it.
//
// Reads of this handle that miss go through other connections (the
// pool), which may be ahead of the cache's: a value read there may be
// newer than a reply still on its way to the cache. So a key read through
// the pool is unusable until a read sent after that read returned has
// been answered (resync), and the handle never goes back in time. A range
// read through the pool (a directory listing) fences its scan group
// instead: no key of the group is served until a command sent after the
// range read returned has been answered, by which time the invalidation
// of every write the range read saw has arrived.
//
// Writes of this handle go through other connections. So that the handle
// reads its own writes, a key being committed is unusable from the start
// of the commit until a read sent after the commit returned has been
// answered: replies to reads sent before are ignored (epoch).
//
// Values enter the cache only through the watcher's reads: a transaction
// that missed asks for the keys it read (want), and a commit for the keys
// it wrote, so that the next operation on the same names (a stat after a
// create, a LOOKUP after a readdir) finds them.
type cache struct {
	mu       sync.Mutex
	cur, old map[string]*centry   // two generations; see lookup
	max      int                  // entries per generation
	writing  map[string]int       // commits of this handle in flight, per key
	queue    []string             // keys to read, in order
	later    []string             // keys to read after refetchDelay
	dirs     map[string]*dirNames // directories known whole, by scan group
	names    int                  // entry keys in dirs
	lists    []string             // directories to list
	fences   map[string]int       // scan groups not served, with their fences in flight
	marks    []string             // fences to send
	listed   map[string]time.Time // directories listed or refused lately
	live     bool                 // the watcher's connection is tracking
	acked    time.Time            // when the last answered ping was sent
	kick     chan struct{}        // wakes the watcher's writer
	lateKick chan struct{}        // tells the writer that later is no longer empty
}

// centry is the cache's knowledge of one key.
type centry struct {
	v      []byte // the value when valid; nil for a missing key
	valid  bool
	queued bool   // in cache.queue
	sent   int    // reads of this epoch sent and not yet answered
	epoch  uint32 // bumped by commits; replies of an older epoch are ignored
}

// dirNames is a directory whose entries the cache knows: from a listing
// read on the watcher's connection, then from every invalidation and read
// of its entry keys. A name of such a directory that is neither in names
// nor being read again or written is missing, without a round trip; that
// answers the LOOKUP that precedes every create.
type dirNames struct {
	names  map[string]struct{} // entry keys that exist
	unsure map[string]struct{} // entry keys changed since, being read
}

// Bounds on the directories known whole: entries per directory, entries
// in all, and how long a directory that was too big is not listed again.
const (
	dirMax      = 1 << 17
	namesMax    = 1 << 18
	relistAfter = 30 * time.Second
)

// How long values are used after the last answered ping was sent, and
// how often the watcher pings.
const (
	lease     = store.MaxLag
	pingEvery = 250 * time.Millisecond
)

func newCache(max int) *cache {
	return &cache{
		cur:      map[string]*centry{},
		max:      max,
		writing:  map[string]int{},
		dirs:     map[string]*dirNames{},
		listed:   map[string]time.Time{},
		fences:   map[string]int{},
		kick:     make(chan struct{}, 1),
		lateKick: make(chan struct{}, 1),
	}
}

// lookup returns the entry of k, moving it to the current generation; with
// create, it makes a missing one. When the current generation is full it
// becomes the old one, and the previous old one is forgotten.
func (c *cache) lookup(k string, create bool) *centry {
	if e, ok := c.cur[k]; ok {
		return e
	}
	e, ok := c.old[k]
	if !ok && !create {
		return nil
	}
	if !ok {
		e = &centry{}
	} else {
		delete(c.old, k)
	}
	if len(c.cur) >= c.max {
		c.old, c.cur = c.cur, make(map[string]*centry, c.max)
	}
	c.cur[k] = e
	return e
}

// get returns the cached value of k (nil for a missing key) if it may be
// used.
func (c *cache) get(k string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live || time.Since(c.acked) > lease {
		return nil, false
	}
	if len(c.fences) > 0 {
		if g := scanGroup([]byte(k)); g != nil && c.fences[string(g)] > 0 {
			return nil, false
		}
	}
	e := c.lookup(k, false)
	if e != nil && e.valid {
		return e.v, true
	}
	if e == nil && c.writing[k] == 0 && followsValue(k) {
		if d := c.dirs[k[:entryGroupLen]]; d != nil {
			_, exists := d.names[k]
			_, unsure := d.unsure[k]
			if !exists && !unsure {
				return nil, true
			}
		}
	}
	return nil, false
}

// entryGroupLen is the length of the scan group of an entry key: "A" ino
// "D" (see scanGroup).
const entryGroupLen = 1 + 8 + 1

// listDir queues a listing of directory g unless it is known or was
// listed lately. The caller holds mu.
func (c *cache) listDir(g string) {
	if c.dirs[g] != nil {
		return
	}
	if t, ok := c.listed[g]; ok && time.Since(t) < relistAfter {
		return
	}
	if len(c.listed) > 4096 {
		c.listed = map[string]time.Time{}
	}
	c.listed[g] = time.Now()
	c.lists = append(c.lists, g)
	c.wake()
}

// wake tells the watcher that there is something to read. The caller
// holds mu.
func (c *cache) wake() { notify(c.kick) }

// notify sends on ch, a channel of capacity one, unless a send is pending.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// takeLists returns the directories to list.
func (c *cache) takeLists() []string { return c.drain(&c.lists) }

// drain empties the list *p of the cache and returns what it held.
func (c *cache) drain(p *[]string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := *p
	*p = nil
	return g
}

// listedDir stores the entry keys of directory g that a listing returned;
// more than dirMax (or too many in all) leave the directory unknown.
func (c *cache) listedDir(g string, keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live || c.dirs[g] != nil || len(keys) > dirMax || c.names+len(keys) > namesMax {
		return
	}
	d := &dirNames{names: make(map[string]struct{}, len(keys)), unsure: map[string]struct{}{}}
	for _, k := range keys {
		d.names[k] = struct{}{}
	}
	c.dirs[g] = d
	c.names += len(keys)
}

// dirChanged records that entry key k of a known directory changed, or,
// with known, that it has value v.
func (c *cache) dirChanged(k string, known bool, v []byte) {
	if !followsValue(k) {
		return
	}
	g := k[:entryGroupLen]
	d := c.dirs[g]
	if d == nil {
		return
	}
	if !known {
		d.unsure[k] = struct{}{}
		return
	}
	delete(d.unsure, k)
	_, had := d.names[k]
	switch {
	case v == nil && had:
		delete(d.names, k)
		c.names--
	case v != nil && !had:
		if len(d.names) >= dirMax || c.names >= namesMax {
			c.names -= len(d.names)
			delete(c.dirs, g)
			c.listed[g] = time.Now()
			return
		}
		d.names[k] = struct{}{}
		c.names++
	}
}

// enqueue queues a read of k, with later after refetchDelay, unless one
// is queued or under way, or a commit of k is. The caller holds mu.
func (c *cache) enqueue(k string, e *centry, later bool) {
	if e.queued || e.sent > 0 || c.writing[k] > 0 {
		return
	}
	e.queued = true
	if !later {
		c.queue = append(c.queue, k)
		c.wake()
		return
	}
	c.later = append(c.later, k)
	if len(c.later) == 1 {
		notify(c.lateKick)
	}
}

// want asks for keys that a transaction read through the pool, with the
// values it read: the cache reads them again on its own connection. A
// missing directory entry also has its directory listed, so that the next
// missing names in it are answered by the cache.
func (c *cache) want(keys []string, vals [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live {
		return
	}
	for i, k := range keys {
		c.resync(k, c.lookup(k, true))
		if vals[i] == nil && followsValue(k) {
			c.listDir(k[:entryGroupLen])
		}
	}
}

// fence stops serving the keys of scan group g, which a range read
// through the pool has just shown, until the watcher's connection has
// answered a command sent from now on (see unfence).
func (c *cache) fence(g string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live {
		return
	}
	c.fences[g]++
	c.marks = append(c.marks, g)
	c.wake()
}

// takeMarks returns the fences to send.
func (c *cache) takeMarks() []string { return c.drain(&c.marks) }

// unfence ends a fence of g: its command was answered.
func (c *cache) unfence(g string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fences[g]--; c.fences[g] <= 0 {
		delete(c.fences, g)
	}
}

// refresh stops using the cached values of keys, which a commit found
// stale, and reads them again.
func (c *cache) refresh(keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if e := c.lookup(k, false); e != nil {
			c.resync(k, e)
		}
	}
}

// resync makes e, the entry of k, unusable until a read sent from now on
// has been answered, because the handle has just seen k's value through
// another connection. That value may be newer than what the cache's
// connection has shown so far: a read already sent may have run on the
// server before it, and the invalidation of the write in between may
// still be on its way. So replies to reads sent before are ignored
// (epoch), even one that already arrived. The caller holds mu.
func (c *cache) resync(k string, e *centry) {
	e.valid = false
	e.epoch++
	e.sent = 0
	c.enqueue(k, e, false)
}

// beginWrite marks keys as being committed by this handle.
func (c *cache) beginWrite(keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		c.writing[k]++
		if e := c.lookup(k, false); e != nil {
			e.valid = false
			e.epoch++
			e.sent = 0
		}
	}
}

// endWrite ends what beginWrite began, whether or not the commit applied
// the writes, and reads the keys again.
func (c *cache) endWrite(keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if c.writing[k]--; c.writing[k] <= 0 {
			delete(c.writing, k)
		}
		e := c.lookup(k, c.live)
		if e == nil {
			continue
		}
		c.resync(k, e)
	}
}

// refetchDelay is how long the read of a key the server reported changed
// waits, so that the reads of many changes share one command. The key is
// unusable from the moment the report arrives; the delay only postpones
// when it becomes usable again.
//
// Most reports are of the handle's own commits: Redis 7.0 (7.0.15
// tested) ignores NOLOOP for writes a script makes, and sends the mount
// an invalidation of each key its commit wrote. Those
// cannot be told from another client's write of the same key in the same
// event-loop turn, which the server folds into the same report, so they
// are read again like any other; reading them at once costs a command
// and two wake-ups per commit, which the delay shares among all commits
// of a few milliseconds.
const refetchDelay = 2 * time.Millisecond

// due moves the delayed reads to the queue; the writer calls it when
// refetchDelay has passed, or when it sends reads anyway.
func (c *cache) due() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue = append(c.queue, c.later...)
	c.later = nil
}

// invalidated handles the server's report that keys changed.
func (c *cache) invalidated(keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		e := c.lookup(k, false)
		if e == nil && followsValue(k) && c.dirs[k[:entryGroupLen]] != nil {
			e = c.lookup(k, true)
		}
		if e != nil {
			e.valid = false
			c.dirChanged(k, false, nil)
			c.enqueue(k, e, true)
		}
	}
}

// committed stores what a commit on the watcher's connection read and
// (with apply) wrote: the reply showed them current, and no invalidation
// of them precedes it (see watcher.runOnWatch).
func (c *cache) committed(reads, writes map[string][]byte, apply bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live {
		return
	}
	put := func(k string, v []byte) {
		if c.writing[k] > 0 {
			return
		}
		e := c.lookup(k, true)
		e.v, e.valid = v, true
		c.dirChanged(k, true, v)
	}
	for k, v := range reads {
		if _, w := writes[k]; !w || !apply {
			put(k, v)
		}
	}
	if apply {
		for k, v := range writes {
			put(k, v)
		}
	}
}

// take returns up to max queued keys to read, with their epochs, and
// counts them as sent.
func (c *cache) take(max int) ([]string, []uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []string
	var epochs []uint32
	n := 0
	for ; n < len(c.queue) && len(keys) < max; n++ {
		k := c.queue[n]
		e := c.lookup(k, false)
		if e == nil || !e.queued {
			continue
		}
		e.queued = false
		if e.valid || c.writing[k] > 0 {
			continue
		}
		e.sent++
		keys = append(keys, k)
		epochs = append(epochs, e.epoch)
	}
	c.queue = c.queue[n:]
	if len(c.queue) == 0 {
		c.queue = nil
	}
	return keys, epochs
}

// filled stores the reply to a read that take handed out.
func (c *cache) filled(keys []string, epochs []uint32, vals [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, k := range keys {
		e := c.lookup(k, false)
		if e == nil || e.epoch != epochs[i] {
			continue
		}
		e.sent--
		if c.writing[k] == 0 {
			e.v, e.valid = vals[i], true
			c.dirChanged(k, true, vals[i])
		}
	}
}

// up marks the cache usable: the watcher's connection tracks changes
// since a moment before sent.
func (c *cache) up(sent time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live, c.acked = true, sent
}

// acked records that a ping sent at sent was answered.
func (c *cache) ack(sent time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sent.After(c.acked) {
		c.acked = sent
	}
}

// reset forgets every value: the connection broke or the server flushed
// its keys. With down, values are not used or gathered until up.
func (c *cache) reset(down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur, c.old, c.queue, c.later = map[string]*centry{}, nil, nil, nil
	c.dirs, c.names, c.lists = map[string]*dirNames{}, 0, nil
	c.fences, c.marks = map[string]int{}, nil
	if down {
		c.live = false
	}
}
