package meta

import (
	"context"
	"sync"
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// statahead answers the kernel's lookups of names in a directory that is
// being walked name after name (a stat of every file after the kernel's
// caches expired, rm -r, make checking timestamps) from one listing of
// the directory with its entries' attributes, instead of one engine read
// per name (Lustre's statahead does the same). It is on when
// Config.Statahead is set; only LookupAhead uses it.
//
// When: the third lookup in a row that the engine answered with a name
// found in one directory, within Statahead, lists the directory (up to
// maxListed entries). A bigger directory, or one whose listing answered
// few of its names before it expired (lookups of a few names over and
// over, each after the kernel forgot it), is not listed again for
// restFor: a listing costs a read per entry, and must pay for itself.
//
// How fresh: a listing answers for Statahead after it was read, and
// LookupAhead returns how old its answer is, so the mount takes that off
// the times it lets the kernel cache the answer: what the kernel holds is
// never older than its cache times allow, as with a lookup read from the
// engine at that moment. A name not in the listing is looked up in the
// engine (another mount may have created it), so a listing never hides a
// file.
//
// This client's own changes: every write of a node or an entry through
// the client's transactions forgets what it writes from the listings
// before the transaction commits, and a listing read while such a write
// was under way is not kept (gen), so the mount never answers from a
// listing older than its own change.
type statahead struct {
	ttl time.Duration // 0: off
	now func() time.Time

	mu      sync.Mutex
	gen     uint64 // bumped when a write of nodes or entries begins and ends, and by ForgetAhead
	writing int    // transactions writing nodes or entries, under way
	dirs    map[Ino]*listing
	streak  map[Ino]streak
	resting map[Ino]time.Time // directories not to list, and since when
}

// listing is one directory's entries with their attributes, as read at at.
type listing struct {
	at    time.Time
	dir   Attr
	names map[string]*Attr
	byIno map[Ino][]string
	hits  int // lookups answered
}

// streak counts the engine's answers found in one directory in a row.
type streak struct {
	n  int
	at time.Time
}

const (
	// aheadAfter is how many lookups in a row in one directory the engine
	// answers before the directory is listed.
	aheadAfter = 3
	// maxListed bounds the entries of a listing: about 4 ms of reads on
	// SQLite, the time of some 60 lookups, and 200 KiB of memory.
	maxListed = 1024
	// maxListings bounds the directories listed at once, and maxStreaks
	// those whose lookups are counted.
	maxListings = 16
	maxStreaks  = 1024
	// restFor is how long a directory too big to list, or whose listing
	// answered fewer than a quarter of its names (and fewer than
	// paidHits), is not listed again.
	restFor  = 10 * time.Second
	paidHits = 64
)

func (s *statahead) on() bool { return s.ttl > 0 }

// lookup answers name in parent from a fresh listing, with the answer's
// age; ok is false when no listing holds it or cred may not search parent
// by the listing's attributes (the engine then decides).
func (s *statahead) lookup(parent Ino, name []byte, cred Cred) (a *Attr, age time.Duration, ok bool) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.dirs[parent]
	if l == nil {
		return nil, 0, false
	}
	if age = now.Sub(l.at); age >= s.ttl {
		s.expireLocked(parent, l, now)
		return nil, 0, false
	}
	n := l.names[string(name)]
	if n == nil {
		return nil, 0, false
	}
	if !cred.IsRoot() && (l.dir.Flags&FlagACL != 0 || !permits(cred, &l.dir, MayExec)) {
		return nil, 0, false
	}
	l.hits++
	cp := *n
	return &cp, age, true
}

// found counts an engine's answer found in parent, and reports whether
// parent should now be listed.
func (s *statahead) found(parent Ino) bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if at, ok := s.resting[parent]; ok {
		if now.Sub(at) < restFor {
			return false
		}
		delete(s.resting, parent)
	}
	if s.streak == nil || len(s.streak) >= maxStreaks {
		s.streak = map[Ino]streak{}
	}
	st := s.streak[parent]
	if now.Sub(st.at) >= s.ttl {
		st.n = 0
	}
	st.n++
	st.at = now
	s.streak[parent] = st
	if st.n < aheadAfter {
		return false
	}
	if l := s.dirs[parent]; l != nil && now.Sub(l.at) < s.ttl {
		return false // listed already: the name is new since
	}
	return true
}

// begin returns the generation a listing read from now must still see to
// be kept; ok is false while a write of nodes or entries is under way.
func (s *statahead) begin() (gen uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen, s.writing == 0
}

// keep stores the listing of parent read at at, unless a write of nodes
// or entries began since gen; a listing of more than maxListed entries
// marks parent too big instead.
func (s *statahead) keep(gen uint64, at time.Time, dir *Attr, es []store.Edge, nodes []*Attr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen != s.gen || s.writing != 0 {
		return
	}
	s.pruneLocked(at)
	if len(es) > maxListed {
		s.restLocked(dir.Ino, at)
		return
	}
	l := &listing{at: at, dir: *dir, names: make(map[string]*Attr, len(es)), byIno: make(map[Ino][]string, len(es))}
	for i, e := range es {
		if nodes[i] == nil {
			continue // removed between the two reads: let the engine answer
		}
		name := string(e.Name)
		l.names[name] = nodes[i]
		l.byIno[e.Ino] = append(l.byIno[e.Ino], name)
	}
	if s.dirs == nil {
		s.dirs = map[Ino]*listing{}
	}
	if len(s.dirs) >= maxListings {
		clear(s.dirs)
	}
	s.dirs[dir.Ino] = l
}

func (s *statahead) dropLocked(dir Ino) { delete(s.dirs, dir) }

// expireLocked drops the listing l of dir, which is too old to answer,
// and rests dir when the listing did not pay for itself.
func (s *statahead) expireLocked(dir Ino, l *listing, now time.Time) {
	delete(s.dirs, dir)
	if l.hits < paidHits && 4*l.hits < len(l.names) {
		s.restLocked(dir, now)
	}
}

func (s *statahead) restLocked(dir Ino, now time.Time) {
	if s.resting == nil || len(s.resting) >= maxStreaks {
		s.resting = map[Ino]time.Time{}
	}
	s.resting[dir] = now
}

// pruneLocked expires the listings too old to answer.
func (s *statahead) pruneLocked(now time.Time) {
	for dir, l := range s.dirs {
		if now.Sub(l.at) >= s.ttl {
			s.expireLocked(dir, l, now)
		}
	}
}

// prune expires the listings too old to answer, so that a walk's
// listings do not stay in memory after it (the client's background
// calls it every second).
func (s *statahead) prune() {
	if !s.on() {
		return
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked(now)
}

// writeBegan and writeEnded bracket a transaction that writes nodes or
// entries, from its first such write until it has committed or failed.
func (s *statahead) writeBegan() {
	s.mu.Lock()
	s.gen++
	s.writing++
	s.mu.Unlock()
}

func (s *statahead) writeEnded() {
	s.mu.Lock()
	s.gen++
	s.writing--
	s.mu.Unlock()
}

// node forgets what the listings hold of n.Ino, which is being written:
// the names leading to it, and, when it is a listed directory whose
// permissions or owner change, the whole listing (its other changes, such
// as the times an entry change writes, do not matter to lookups).
func (s *statahead) node(n *store.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.dirs[n.Ino]; l != nil {
		if n.Mode != l.dir.Mode || n.Uid != l.dir.Uid || n.Gid != l.dir.Gid || n.Flags != l.dir.Flags || n.Type != l.dir.Type {
			s.dropLocked(n.Ino)
		}
	}
	s.forgetInoLocked(n.Ino)
}

// deleted forgets ino, which is being deleted (or must be read anew),
// everywhere, and keeps no listing read meanwhile: one that began before
// a lock's ForgetAhead must not come back after it.
func (s *statahead) deleted(ino Ino) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	s.dropLocked(ino)
	s.forgetInoLocked(ino)
}

func (s *statahead) forgetInoLocked(ino Ino) {
	for _, l := range s.dirs {
		for _, name := range l.byIno[ino] {
			delete(l.names, name)
		}
		delete(l.byIno, ino)
	}
}

// entry forgets name in parent, which is being written or removed.
func (s *statahead) entry(parent Ino, name []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.dirs[parent]; l != nil {
		delete(l.names, string(name)) // byIno may keep it: deleting twice is harmless
	}
}

// LookupAhead is Lookup for the kernel's lookups: with Config.Statahead it
// may answer from a listing of parent read up to that long ago, and
// returns how old its answer is (0 when read now), which the mount takes
// off the times the kernel may cache it. Callers that act on the answer
// themselves use Lookup, which always reads the engine.
func (c *Client) LookupAhead(ctx context.Context, parent Ino, name []byte) (*Attr, time.Duration, error) {
	if !c.ahead.on() || len(name) > 255 || string(name) == "." || string(name) == ".." {
		a, err := c.Lookup(ctx, parent, name)
		return a, 0, err
	}
	cred := CredOf(ctx)
	if a, age, ok := c.ahead.lookup(parent, name, cred); ok {
		return a, age, nil
	}
	a, err := c.Lookup(ctx, parent, name)
	if err != nil || !c.ahead.found(parent) {
		return a, 0, err
	}
	c.listAhead(ctx, parent)
	return a, 0, nil
}

// ForgetAhead drops what the statahead holds of ino: its listing, when it
// is a listed directory, and every listed name that leads to it; and the
// open cache's attributes of ino. The mount calls it where it needs the
// engine's answer for names next time: under a lock just taken (names
// next to the locked file), and for an inode found gone or changed (the
// kernel looks its name up again).
func (c *Client) ForgetAhead(ino Ino) {
	if c.ahead.on() {
		c.ahead.deleted(ino)
	}
	if c.opened.on() {
		c.opened.forget(ino)
	}
}

// listAhead lists parent with its entries' attributes for the statahead.
// Failures only leave it unlisted: the lookups go to the engine.
func (c *Client) listAhead(ctx context.Context, parent Ino) {
	gen, ok := c.ahead.begin()
	if !ok {
		return
	}
	at := c.conf.Now()
	var dir *Attr
	var es []store.Edge
	var nodes []*Attr
	err := c.st.View(ctx, func(tx store.Tx) error {
		var err error
		if dir, err = node(tx, parent); err != nil {
			return err
		}
		if es, err = tx.Edges(parent, nil, maxListed+1); err != nil || len(es) > maxListed {
			return err
		}
		inos := make([]Ino, len(es))
		for i, e := range es {
			inos[i] = e.Ino
		}
		nodes, err = tx.Nodes(inos)
		return err
	})
	if err != nil || dir.Type != store.TypeDir {
		return
	}
	c.ahead.keep(gen, at, dir, es, nodes)
}

// ChangeBegins tells the statahead that this session is about to change
// records through another path than this client's transactions (the
// metadata server runs the session's operations): no listing read until
// the returned function is called is kept. The caller forgets what it
// changes with ForgetNode and ForgetEntry, before the change and again
// after it, before calling the function.
func (k caches) ChangeBegins() (end func()) {
	c := k.c
	if !c.ahead.on() {
		return func() {}
	}
	c.ahead.writeBegan()
	return c.ahead.writeEnded
}

// ForgetNode forgets the names the listings hold that lead to ino,
// whose node is being written elsewhere (see Caches.ChangeBegins), and with
// listing the listing of ino too (its permissions may change).
func (k caches) ForgetNode(ino Ino, listing bool) {
	c := k.c
	if !c.ahead.on() {
		return
	}
	c.ahead.mu.Lock()
	defer c.ahead.mu.Unlock()
	if listing {
		c.ahead.dropLocked(ino)
	}
	c.ahead.forgetInoLocked(ino)
}

// ForgetEntry forgets name in parent, being written or removed elsewhere
// (see Caches.ChangeBegins), and every listed name of the node it leads to,
// whose link count changes.
func (k caches) ForgetEntry(parent Ino, name []byte) {
	c := k.c
	if !c.ahead.on() {
		return
	}
	c.ahead.mu.Lock()
	defer c.ahead.mu.Unlock()
	if l := c.ahead.dirs[parent]; l != nil {
		if a := l.names[string(name)]; a != nil {
			c.ahead.forgetInoLocked(a.Ino)
		}
		delete(l.names, string(name))
	}
}
