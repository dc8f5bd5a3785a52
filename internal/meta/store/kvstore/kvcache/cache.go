// Package kvcache keeps, on a client, values of kvstore keys that an
// engine promises to report changes of, so that reads need no round
// trip, and keeps the promises of store.Store.View while doing so.
//
// The protocol is engine-independent; an engine provides the stream (see
// Stream): one ordered channel that carries both the reports of changed
// keys (invalidations) and the replies to the reads the cache sends on
// it, plus a barrier whose reply proves that every report produced before
// it was delivered. Redis's CLIENT TRACKING on a RESP3 connection is one
// (internal/meta/engine/redis); an etcd watch with its progress
// notifications, or a metadata server's change stream, are others. A
// Tracker runs the stream's sessions and hands what arrives to the Cache,
// in stream order; the engine's transactions ask the Cache before reading
// and tell it what they read and committed elsewhere, and may run their
// commits on the stream (Tracker.Call).
//
// A value is known to be current as of its place in the stream:
//
//   - An invalidation makes the key's value unusable and queues a read of
//     it on the stream (sent within RefetchDelay), unless one is already
//     under way: a read sent before an invalidation arrived but answered
//     after it ran after the write the invalidation reports.
//   - A reply makes the key's value usable again.
//
// So no value is used after the stream has delivered an invalidation of
// it, and the cache lags the server by no more than the stream does. The
// lag is bounded: the Tracker sends a barrier every PingEvery, and values
// are used only while a barrier sent less than Lease ago has been
// answered, so a stalled or partitioned stream stops the cache within
// Lease. A broken stream empties it.
//
// Every command sent on the stream that tells the cache values (a read,
// a listing, a commit run on the stream) carries a sequence number, taken
// from the Cache when it is sent. Reads of this handle that miss go elsewhere (an
// engine's connection pool), which may be ahead of the stream: a value
// read there may be newer than a reply still on its way. So a key read
// elsewhere is unusable until a read sent after that read returned has
// been answered: replies to commands numbered before are ignored for it
// (Want), and the handle never goes back in time. A range read elsewhere
// (a directory listing) fences its group instead: no key of the group is
// served until a barrier sent after the range read returned has been
// answered, by which time the invalidation of every write the range read
// saw has arrived.
//
// Writes of this handle committed elsewhere are treated alike: a key
// being committed is unusable from the start of the commit until a read
// sent after the commit returned has been answered (BeginWrite,
// EndWrite).
//
// Values enter the cache only through replies on the stream: a
// transaction that missed asks for the keys it read (Want), and a commit
// run on the stream reports what it read and wrote (Committed), so that
// the next operation on the same names (a stat after a create, a LOOKUP
// after a readdir) finds them.
//
// Known-whole directories: after a directory entry was read missing, the
// cache lists the entry's directory on the stream, then keeps its set of
// names current from every invalidation and reply of its entry keys. A
// name of such a directory that is neither in the set nor being read
// again or written is missing, without a round trip; that answers the
// LOOKUP that precedes every create.
package kvcache

import (
	"slices"
	"sync"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Bounds on the directories known whole: entries per directory, entries
// in all, and how long a directory that was too big is not listed again.
const (
	DirMax      = 1 << 17
	namesMax    = 1 << 18
	relistAfter = 30 * time.Second
)

// Lease is how long values are used after the last answered barrier was
// sent; PingEvery is how often the Tracker sends a barrier.
const (
	Lease     = store.MaxLag
	PingEvery = 250 * time.Millisecond
)

// RefetchDelay is the longest the read of a key the stream reported
// changed waits, so that the reads of many changes share one command; a
// command sent on the stream before then (a commit) takes them along. The
// key is unusable from the moment the report arrives; the delay only
// postpones when it becomes usable again. (Redis reports a handle's own
// commits too, so most reports are of those; reading them at once would
// cost a command and two wake-ups per commit.)
const RefetchDelay = 2 * time.Millisecond

// Layout is what the cache needs to know of the keys.
type Layout struct {
	// Group returns the range group of a key: the keys a range read that
	// covers key may return, which a fence stops serving; "" when key is
	// never range-read.
	Group func(key string) string
	// Dir returns the directory of a directory entry key (a prefix of
	// key) and true, or false for any other key.
	Dir func(key string) (string, bool)
}

// Cache is the bookkeeping of one handle's cache. Its methods are safe
// for concurrent use.
type Cache struct {
	layout Layout
	kick   chan struct{} // wakes the stream's writer
	// onLater, when set (SetOnLater), is called when later stops being
	// empty.
	onLater func()

	mu      sync.Mutex
	m       *TwoGen[string, *entry]
	floor   uint64               // replies to commands numbered before do not create entries
	next    uint64               // the number of the next command sent
	writing map[string]int       // commits of this handle in flight elsewhere, per key
	queue   []string             // keys to read, in order
	later   []string             // keys to read after RefetchDelay
	dirs    map[string]*dirNames // directories known whole
	names   int                  // entry keys in dirs
	lists   []string             // directories to list
	fences  map[string]int       // groups not served, with their fences in flight
	marks   []string             // fences to send
	listed  map[string]time.Time // directories listed or refused lately
	live    bool                 // the stream is delivering reports
	acked   time.Time            // when the last answered barrier was sent
}

// entry is the cache's knowledge of one key.
type entry struct {
	v      []byte // the value when valid; nil for a missing key
	valid  bool
	queued bool   // in Cache.queue
	sent   int    // reads numbered from on sent and not answered yet
	from   uint64 // replies to commands numbered before are ignored
}

// dirNames is a directory whose entries the cache knows.
type dirNames struct {
	names  map[string]struct{} // entry keys that exist
	unsure map[string]struct{} // entry keys changed since, being read
}

// New returns a cache of up to max values per generation (see TwoGen),
// not live until Up.
func New(max int, layout Layout) *Cache {
	return &Cache{
		layout:  layout,
		m:       NewTwoGen[string, *entry](max),
		writing: map[string]int{},
		dirs:    map[string]*dirNames{},
		listed:  map[string]time.Time{},
		fences:  map[string]int{},
		kick:    make(chan struct{}, 1),
	}
}

// Kick receives when there is something to send on the stream (reads,
// listings, fences); the engine's writer then calls Due and the Take
// methods.
func (c *Cache) Kick() <-chan struct{} { return c.kick }

// SetOnLater sets the function called when a read is queued for after
// RefetchDelay and none was waiting: the writer is to call Due that long
// after, or earlier when it sends anyway. f runs with the cache locked
// and must not call it; it must not block. The Tracker sets it, so that
// a delayed read arms a timer rather than waking the writer.
func (c *Cache) SetOnLater(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onLater = f
}

// Live reports whether the stream is delivering reports.
func (c *Cache) Live() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live
}

// lookup returns the entry of k, moving it to the current generation;
// with create, it makes a missing one, which ignores replies to commands
// sent before the cache forgot anything (it may have forgotten that k
// was read elsewhere). The caller holds mu.
func (c *Cache) lookup(k string, create bool) *entry {
	e, ok, dropped := c.m.Use(k)
	c.forgot(dropped)
	if ok || !create {
		return e
	}
	e = &entry{from: c.floor}
	c.forgot(c.m.Put(k, e))
	return e
}

// forgot handles the entries the generations dropped, if any. Of an
// entry being read again the cache may know more than the names of its
// directory say (that it was read elsewhere, or reported changed): such
// a name is unsure until a reply tells its value. The caller holds mu.
func (c *Cache) forgot(dropped map[string]*entry) {
	if dropped == nil {
		return
	}
	c.floor = c.next
	if len(c.dirs) == 0 {
		return
	}
	for k, e := range dropped {
		if e.valid {
			continue // the names know its value
		}
		if g, ok := c.layout.Dir(k); ok {
			if d := c.dirs[g]; d != nil {
				d.unsure[k] = struct{}{}
			}
		}
	}
}

// Get returns the cached value of k (nil for a missing key) if it may be
// used.
func (c *Cache) Get(k string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live || time.Since(c.acked) > Lease {
		return nil, false
	}
	if len(c.fences) > 0 {
		if g := c.layout.Group(k); g != "" && c.fences[g] > 0 {
			return nil, false
		}
	}
	e := c.lookup(k, false)
	if e != nil && e.valid {
		return e.v, true
	}
	if e == nil && c.writing[k] == 0 {
		if g, ok := c.layout.Dir(k); ok {
			if d := c.dirs[g]; d != nil {
				_, exists := d.names[k]
				_, unsure := d.unsure[k]
				if !exists && !unsure {
					return nil, true
				}
			}
		}
	}
	return nil, false
}

// ListMax is the most entries a directory known whole may have for
// List to answer a listing of it: List looks at every name of the
// directory for each page.
const ListMax = 4096

// List returns, in key order, the entry keys of directory g from lo
// (included) to hi (excluded), at most limit of them (0: all), with
// their values, when the cache can answer the listing whole: g is known
// whole with at most ListMax names and none unsure, no fence stops its
// group, and every name in the range has a usable value. It returns
// false otherwise, and the listing goes to the server. The answer is as
// current as a Get's: the names of a known directory follow every
// invalidation and reply of its entries.
func (c *Cache) List(g, lo, hi string, limit int) (keys []string, vals [][]byte, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live || time.Since(c.acked) > Lease || c.fences[g] > 0 {
		return nil, nil, false
	}
	d := c.dirs[g]
	if d == nil || len(d.unsure) > 0 || len(d.names) > ListMax {
		return nil, nil, false
	}
	for k := range d.names {
		if k >= lo && k < hi {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	vals = make([][]byte, len(keys))
	for i, k := range keys {
		if c.writing[k] > 0 {
			return nil, nil, false
		}
		e := c.lookup(k, false)
		if e == nil || !e.valid || e.v == nil {
			return nil, nil, false
		}
		vals[i] = e.v
	}
	return keys, vals, true
}

// listDir queues a listing of directory g unless it is known or was
// listed lately. The caller holds mu.
func (c *Cache) listDir(g string) {
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

// wake tells the writer that there is something to send. The caller
// holds mu.
func (c *Cache) wake() { notify(c.kick) }

// notify sends on ch, a channel of capacity one, unless a send is pending.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// TakeLists returns the directories to list, in one command or several
// sent together, numbered seq; each listing's reply goes to Listed.
func (c *Cache) TakeLists() (dirs []string, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	dirs, c.lists = c.lists, nil
	seq = c.next
	if len(dirs) > 0 {
		c.next++
	}
	return dirs, seq
}

// drain empties the list *p of the cache and returns what it held.
func (c *Cache) drain(p *[]string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := *p
	*p = nil
	return g
}

// Listed stores the entry keys of directory g that a listing on the
// stream, numbered seq, returned; more than DirMax (or too many in all)
// leave the directory unknown. So does a listing sent before the cache
// last forgot entries: it may lack a name the handle has seen since,
// whose entry is gone.
func (c *Cache) Listed(seq uint64, g string, keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if seq < c.floor {
		delete(c.listed, g) // may be listed again at once
		return
	}
	if !c.live || c.dirs[g] != nil || len(keys) > DirMax || c.names+len(keys) > namesMax {
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
// with known, that it has value v. The caller holds mu.
func (c *Cache) dirChanged(k string, known bool, v []byte) {
	g, ok := c.layout.Dir(k)
	if !ok {
		return
	}
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
		if len(d.names) >= DirMax || c.names >= namesMax {
			c.names -= len(d.names)
			delete(c.dirs, g)
			c.listed[g] = time.Now()
			return
		}
		d.names[k] = struct{}{}
		c.names++
	}
}

// enqueue queues a read of k, with later after RefetchDelay, unless one
// is queued or under way, or a commit of k is. The caller holds mu.
func (c *Cache) enqueue(k string, e *entry, later bool) {
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
	if len(c.later) == 1 && c.onLater != nil {
		c.onLater()
	}
}

// Want asks for keys that a transaction read elsewhere, with the values
// it read: the cache reads them again on the stream. A missing directory
// entry also has its directory listed, so that the next missing names in
// it are answered by the cache.
func (c *Cache) Want(keys []string, vals [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live {
		return
	}
	for i, k := range keys {
		c.resync(k, c.lookup(k, true), false)
		if vals[i] == nil {
			if g, ok := c.layout.Dir(k); ok {
				c.listDir(g)
			}
		}
	}
}

// Fence stops serving the keys of group g, which a range read elsewhere
// has just shown, until the stream has answered a barrier sent from now
// on (see Unfence).
func (c *Cache) Fence(g string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live {
		return
	}
	c.fences[g]++
	c.marks = append(c.marks, g)
	c.wake()
}

// TakeFences returns the fences to send: a barrier each, whose reply
// goes to Unfence.
func (c *Cache) TakeFences() []string { return c.drain(&c.marks) }

// Unfence ends a fence of g: its barrier was answered.
func (c *Cache) Unfence(g string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fences[g]--; c.fences[g] <= 0 {
		delete(c.fences, g)
	}
}

// Refresh stops using the cached values of keys, which a commit found
// stale, and reads them again.
func (c *Cache) Refresh(keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if e := c.lookup(k, false); e != nil {
			c.resync(k, e, false)
		}
	}
}

// resync makes e, the entry of k, unusable until a read sent from now on
// has been answered, because the handle has just seen k's value
// elsewhere. That value may be newer than what the stream has shown so
// far: a command already sent may have run before it, and the
// invalidation of the write in between may still be on its way. So
// replies to commands sent before are ignored, even one that already
// arrived. With later, the read waits for RefetchDelay or the next
// command sent. The caller holds mu.
func (c *Cache) resync(k string, e *entry, later bool) {
	e.valid = false
	e.from = c.next
	e.sent = 0
	c.dirChanged(k, false, nil)
	c.enqueue(k, e, later)
}

// BeginWrite marks keys as being committed by this handle elsewhere.
func (c *Cache) BeginWrite(keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		c.writing[k]++
		c.dirChanged(k, false, nil) // List must not answer without it
		if e := c.lookup(k, false); e != nil {
			e.valid = false
			e.from = c.next
			e.sent = 0
		}
	}
}

// EndWrite ends what BeginWrite began, whether or not the commit applied
// the writes, and reads the keys again: after RefetchDelay, or with the
// next command sent on the stream (a commit usually), so that a commit
// costs no read of its own.
func (c *Cache) EndWrite(keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if c.writing[k]--; c.writing[k] <= 0 {
			delete(c.writing, k)
		}
		if e := c.lookup(k, c.live); e != nil {
			c.resync(k, e, true)
		}
	}
}

// Due moves the delayed reads to the queue; the writer calls it when
// RefetchDelay has passed, or when it sends reads anyway.
func (c *Cache) Due() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue = append(c.queue, c.later...)
	c.later = nil
}

// Invalidated handles the stream's report that keys changed.
func (c *Cache) Invalidated(keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		e := c.lookup(k, false)
		if e == nil {
			if g, ok := c.layout.Dir(k); ok && c.dirs[g] != nil {
				e = c.lookup(k, true)
			}
		}
		if e != nil {
			e.valid = false
			c.dirChanged(k, false, nil)
			c.enqueue(k, e, true)
		}
	}
}

// Seq numbers a command that is about to be sent on the stream and will
// tell the cache values (a commit; reads are numbered by Take). The
// engine takes it in the order it sends.
func (c *Cache) Seq() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	return c.next - 1
}

// Committed stores what a commit run on the stream as command seq read
// and (with apply) wrote: its reply showed them current, and the engine
// calls this where the reply arrives, before handling anything later.
func (c *Cache) Committed(seq uint64, reads, writes map[string][]byte, apply bool) {
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
		if seq < e.from {
			return // k was read elsewhere after the commit was sent
		}
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

// Take returns up to max queued keys to read in one command, numbered
// seq, and counts them as sent. The reply goes to Filled.
func (c *Cache) Take(max int) (keys []string, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	seq = c.next
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
	}
	c.queue = c.queue[n:]
	if len(c.queue) == 0 {
		c.queue = nil
	}
	if len(keys) > 0 {
		c.next++
	}
	return keys, seq
}

// Filled stores the reply to a read that Take handed out.
func (c *Cache) Filled(seq uint64, keys []string, vals [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, k := range keys {
		e := c.lookup(k, false)
		if e == nil || seq < e.from {
			continue
		}
		e.sent--
		if c.writing[k] == 0 {
			e.v, e.valid = vals[i], true
			c.dirChanged(k, true, vals[i])
		}
	}
}

// Up marks the cache usable: the stream reports changes since a moment
// before sent.
func (c *Cache) Up(sent time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live, c.acked = true, sent
}

// Ack records that a barrier sent at sent was answered.
func (c *Cache) Ack(sent time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sent.After(c.acked) {
		c.acked = sent
	}
}

// Reset forgets every value: the stream broke or the server dropped its
// promises. With down, values are not used or gathered until Up.
func (c *Cache) Reset(down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m.Clear()
	c.floor = c.next
	c.queue, c.later = nil, nil
	c.dirs, c.names, c.lists = map[string]*dirNames{}, 0, nil
	if down {
		// The barriers of the fences will not be answered. (Otherwise
		// they will, and a fence ends with its own barrier.)
		c.fences, c.marks = map[string]int{}, nil
		c.live = false
	}
}
