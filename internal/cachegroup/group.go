package cachegroup

import (
	"context"
	"crypto/cipher"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a Group.
type Config struct {
	// Name names the group.
	Name string
	// Self is this member; its Addr is where Serve listens.
	Self Member
	// Key is the group's key (DeriveKey).
	Key []byte
	// Seal seals replies (AES-256-GCM); every member must agree.
	Seal bool
	// TLS serves and asks over TLS 1.3, each side proving it holds the
	// group's key with a certificate derived from it (see groupCert);
	// every member must agree.
	TLS bool
	// Members lists the live members of the group, this one included
	// or not (it always counts); of entries with one ID (a member
	// restarted before its old session expired) the first counts. Called
	// every Refresh.
	Members func(ctx context.Context) ([]Member, error)
	// Refresh is how often the member list is read again (default 3s).
	Refresh time.Duration
	// Timeout bounds each request to a peer (default 2s): a peer slower
	// than that is marked down and the read goes to object storage.
	Timeout time.Duration
	// DownFor is how long a peer that failed is left out (default 10s).
	DownFor time.Duration
	// Logger receives membership changes and peer faults; nil discards
	// them.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (c *Config) defaults() {
	if c.Refresh <= 0 {
		c.Refresh = 3 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Second
	}
	if c.DownFor <= 0 {
		c.DownFor = 10 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Group is one member of a cache group: it finds the owners of blocks,
// reads from them, and serves its own share to its peers (ServeHTTP). It
// satisfies chunk.Peers.
type Group struct {
	conf   Config
	log    *slog.Logger
	signer signer
	sealer cipher.AEAD // nil when replies are not sealed
	tls    *tls.Config // the server side's, nil without TLS
	scheme string      // of peers' URLs: http or https
	http   *http.Client
	blocks Blocks
	srv    *http.Server

	mu      sync.Mutex
	members []Member // sorted by ID, self included
	ring    ring
	down    map[string]time.Time // member ID: left out until
	// refreshed is when refreshSoon last read the member list.
	refreshed time.Time

	stats     counters
	stop      chan struct{}
	closeOnce sync.Once
	done      sync.WaitGroup
}

// counters are a Group's figures.
type counters struct {
	hits, misses, fetchedBytes atomic.Uint64
	served, servedBytes        atomic.Uint64
	refused, failures, corrupt atomic.Uint64
}

// New returns the member conf describes, serving its peers from blocks.
// Start begins its work.
func New(conf Config, blocks Blocks) (*Group, error) {
	conf.defaults()
	if conf.Name == "" || len(conf.Key) == 0 || conf.Self.ID == "" {
		return nil, errors.New("cache group: a name, a key and this member's ID are needed")
	}
	g := &Group{conf: conf, log: conf.Logger.With("cache-group", conf.Name), signer: newSigner(conf.Key),
		blocks: blocks, down: map[string]time.Time{}, stop: make(chan struct{}), scheme: "http"}
	var client *tls.Config
	if conf.TLS {
		var err error
		if g.tls, client, err = tlsConfigs(conf.Key); err != nil {
			return nil, err
		}
		g.scheme = "https"
	}
	g.http = newTransport(client)
	if conf.Seal {
		var err error
		if g.sealer, err = newSealer(conf.Key); err != nil {
			return nil, err
		}
	}
	g.setMembers(nil)
	return g, nil
}

// Start serves peers on ln and reads the member list now and every
// Config.Refresh, until Close.
func (g *Group) Start(ctx context.Context, ln net.Listener) {
	g.srv = &http.Server{Handler: g, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelWarn)}
	if g.tls != nil {
		ln = tls.NewListener(ln, g.tls)
	}
	g.done.Add(2)
	go func() {
		defer g.done.Done()
		if err := g.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.Error("cache group: serving peers stopped", "err", err)
		}
	}()
	g.refresh(ctx)
	go func() {
		defer g.done.Done()
		t := time.NewTicker(g.conf.Refresh)
		defer t.Stop()
		for {
			select {
			case <-g.stop:
				return
			case <-t.C:
				g.refresh(ctx)
			}
		}
	}()
}

// Close stops serving peers and following the member list. Calls after
// the first do nothing.
func (g *Group) Close() error {
	var err error
	g.closeOnce.Do(func() {
		close(g.stop)
		if g.srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err = g.srv.Shutdown(ctx)
		}
		g.done.Wait()
		g.http.CloseIdleConnections()
	})
	return err
}

// refresh reads the member list; on error it keeps the one it had.
func (g *Group) refresh(ctx context.Context) {
	if g.conf.Members == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, g.conf.Refresh+g.conf.Timeout)
	defer cancel()
	ms, err := g.conf.Members(ctx)
	if err != nil {
		g.log.Warn("cache group: reading the members", "err", err)
		return
	}
	g.setMembers(ms)
}

// setMembers replaces the member list with ms and this member.
func (g *Group) setMembers(ms []Member) {
	all := []Member{g.conf.Self}
	for _, m := range ms {
		if m.ID != g.conf.Self.ID && m.Addr != "" {
			all = append(all, m)
		}
	}
	// Stable: of two entries with one ID the first stays (Members lists
	// the newest session of a restarted member first).
	slices.SortStableFunc(all, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	all = slices.CompactFunc(all, func(a, b Member) bool { return a.ID == b.ID })
	g.mu.Lock()
	defer g.mu.Unlock()
	if old := g.members; !slices.Equal(all, old) {
		if old != nil {
			g.log.Info("cache group: members changed", "members", len(all))
		}
		g.members = all
		g.ring = newRing(all)
		// A member that left, or came back at another address, starts
		// afresh.
		for id := range g.down {
			i := slices.IndexFunc(all, func(m Member) bool { return m.ID == id })
			if i < 0 || !slices.Contains(old, all[i]) {
				delete(g.down, id)
			}
		}
	}
}

// owner returns the member that owns key now, when it is another one.
func (g *Group) owner(key string) (Member, bool) {
	now := g.conf.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	i := g.ring.owner(key, func(i int) bool {
		until, ok := g.down[g.ring.members[i].ID]
		return !ok || now.After(until)
	})
	if i < 0 || g.ring.members[i].ID == g.conf.Self.ID {
		return Member{}, false
	}
	return g.ring.members[i], true
}

// failed marks m down after a request to it failed with err.
func (g *Group) failed(m Member, err error) {
	g.stats.failures.Add(1)
	g.mu.Lock()
	_, already := g.down[m.ID]
	g.down[m.ID] = g.conf.Now().Add(g.conf.DownFor)
	g.mu.Unlock()
	if !already {
		g.log.Warn("cache group: peer left out", "peer", m.ID, "addr", m.Addr, "for", g.conf.DownFor, "err", err)
	}
}

// succeeded clears a down mark of m.
func (g *Group) succeeded(m Member) {
	g.mu.Lock()
	_, was := g.down[m.ID]
	delete(g.down, m.ID)
	g.mu.Unlock()
	if was {
		g.log.Info("cache group: peer back", "peer", m.ID, "addr", m.Addr)
	}
}

// Remote reports whether another member owns block key now.
func (g *Group) Remote(key string) bool {
	_, ok := g.owner(key)
	return ok
}

// Read fills p with bytes [off, off+len(p)) of block key from its owner.
// It reports false when this member owns the block, or the owner could
// not serve it (it is then left out for a while): the caller reads
// object storage.
func (g *Group) Read(ctx context.Context, key string, off int, p []byte) bool {
	m, ok := g.owner(key)
	if !ok {
		return false
	}
	err := g.get(ctx, m.Addr, key, off, p, false)
	switch {
	case err == nil:
		g.succeeded(m)
		g.stats.hits.Add(1)
		g.stats.fetchedBytes.Add(uint64(len(p)))
		return true
	case errors.Is(err, errNotHeld):
		g.stats.misses.Add(1)
	case ctx.Err() != nil:
		// The reader gave up, not the peer.
	default:
		g.stats.misses.Add(1)
		g.failed(m, err)
	}
	return false
}

// Warm asks the owner of block key to cache it. It reports false when
// this member owns it, or the owner could not.
func (g *Group) Warm(ctx context.Context, key string) bool {
	m, ok := g.owner(key)
	if !ok {
		return false
	}
	if err := g.get(ctx, m.Addr, key, 0, nil, false); err != nil {
		if !errors.Is(err, errNotHeld) && ctx.Err() == nil {
			g.failed(m, err)
		}
		return false
	}
	g.succeeded(m)
	return true
}

// Find looks for block key in the caches of the other members, for a
// block object storage does not have yet (staged by a member's
// writeback): it fills p and reports true when one has it. When a member
// cannot be reached it reads the member list again (at most once a
// second) and asks the members whose address changed: one restarted on
// another port.
func (g *Group) Find(ctx context.Context, key string, p []byte) bool {
	g.mu.Lock()
	ms := slices.Clone(g.members)
	g.mu.Unlock()
	asked := map[string]string{} // ID: address asked
	for round := 0; round < 2; round++ {
		unreachable := false
		for _, m := range ms {
			if m.ID == g.conf.Self.ID || asked[m.ID] == m.Addr {
				continue
			}
			asked[m.ID] = m.Addr
			err := g.get(ctx, m.Addr, key, 0, p, true)
			if err == nil {
				g.stats.hits.Add(1)
				g.stats.fetchedBytes.Add(uint64(len(p)))
				return true
			}
			if ctx.Err() != nil {
				return false
			}
			unreachable = unreachable || !errors.Is(err, errNotHeld)
		}
		if !unreachable || !g.refreshSoon(ctx) {
			return false
		}
		g.mu.Lock()
		ms = slices.Clone(g.members)
		g.mu.Unlock()
	}
	return false
}

// refreshSoon reads the member list again unless it was read less than a
// second ago, and reports whether it did.
func (g *Group) refreshSoon(ctx context.Context) bool {
	now := g.conf.Now()
	g.mu.Lock()
	if now.Sub(g.refreshed) < time.Second {
		g.mu.Unlock()
		return false
	}
	g.refreshed = now
	g.mu.Unlock()
	g.refresh(ctx)
	return true
}

// MemberStatus is one member as Stats shows it.
type MemberStatus struct {
	Member
	// Share is the part of the blocks it owns when all are up.
	Share float64
	// Self marks this member.
	Self bool
	// Down marks a member left out after a failed request.
	Down bool
}

// Stats are a member's view of its group and its figures.
type Stats struct {
	Name    string
	Members []MemberStatus
	// Hits counts reads a peer served; Misses those it could not (the
	// reads went to object storage); FetchedBytes what peers sent.
	Hits, Misses, FetchedBytes uint64
	// Served counts the requests of peers this member answered, and
	// ServedBytes what it sent.
	Served, ServedBytes uint64
	// Refused counts requests refused for a missing or wrong
	// signature; Failures requests to peers that failed (each marks
	// the peer down); Corrupt replies dropped for a bad checksum.
	Refused, Failures, Corrupt uint64
}

// Stats returns the member's view of the group and its figures.
func (g *Group) Stats() Stats {
	now := g.conf.Now()
	st := Stats{Name: g.conf.Name,
		Hits: g.stats.hits.Load(), Misses: g.stats.misses.Load(), FetchedBytes: g.stats.fetchedBytes.Load(),
		Served: g.stats.served.Load(), ServedBytes: g.stats.servedBytes.Load(),
		Refused: g.stats.refused.Load(), Failures: g.stats.failures.Load(), Corrupt: g.stats.corrupt.Load()}
	g.mu.Lock()
	defer g.mu.Unlock()
	total := 0
	for _, m := range g.members {
		total += max(m.Weight, 0)
	}
	for _, m := range g.members {
		ms := MemberStatus{Member: m, Self: m.ID == g.conf.Self.ID}
		if total > 0 && m.Weight > 0 {
			ms.Share = float64(m.Weight) / float64(total)
		}
		if until, ok := g.down[m.ID]; ok && now.Before(until) {
			ms.Down = true
		}
		st.Members = append(st.Members, ms)
	}
	return st
}
