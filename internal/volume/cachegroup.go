package volume

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicefs/sluice/internal/cachegroup"
	"github.com/sluicefs/sluice/internal/meta"
)

// CacheGroupOptions make a mount a member of a cache group (package
// cachegroup). The zero value joins none.
type CacheGroupOptions struct {
	// Name names the group; empty joins none.
	Name string
	// Listen is the HOST:PORT this member serves its peers on. Default
	// a free port on this host's address (its first non-loopback IPv4
	// address, else 127.0.0.1). A HOST left empty listens on every
	// address and is advertised as this host's.
	Listen string
	// Weight is this member's share of the blocks relative to the
	// others'; default 1. NoSharing holds none: the member reads from
	// the group only.
	Weight    int
	NoSharing bool
	// Seal seals the blocks peers send (AES-256-GCM under a key derived
	// from the volume's settings). Always on for an encrypted volume.
	Seal bool
	// TLS talks to peers over TLS 1.3 with a certificate derived from
	// the same key.
	TLS bool
}

// MemberLiveFor is how long after its last heartbeat a session still
// counts as a member of its cache group, with heartbeat the interval of
// heartbeats (0: meta's default): three heartbeats (a member that fails
// a request is left out at once anyway).
func MemberLiveFor(heartbeat time.Duration) time.Duration {
	if heartbeat <= 0 {
		heartbeat = meta.DefaultHeartbeat
	}
	return 3*heartbeat + 5*time.Second
}

// openCacheGroup listens for the peers of the group opts.CacheGroup
// names, sets the chunk store to read through the group and records the
// member in the session info of mconf. startCacheGroup starts it once
// the session exists.
func (v *Volume) openCacheGroup(opts *Options, mconf *meta.Config) error {
	o := opts.CacheGroup
	if o.Name == "" {
		return nil
	}
	listen, advertise, err := listenAddr(o.Listen)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("cache group %s: listen for peers: %w", o.Name, err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	self := cachegroup.Member{Addr: net.JoinHostPort(advertise, port), Weight: o.Weight}
	if self.Weight <= 0 {
		self.Weight = 1
	}
	if o.NoSharing || mconf.ReadOnly {
		// A read-only mount registers no session, so its peers cannot
		// find it: it reads from the group and owns nothing.
		self.Weight = 0
	}
	host := mconf.SessionInfo.Host
	if dirs := opts.Chunks.CacheDirs; len(dirs) > 0 && dirs[0] != "memory" {
		abs, _ := filepath.Abs(dirs[0])
		self.ID = host + ":" + abs
	} else {
		self.ID = host + ":" + self.Addr // a memory cache lasts as long as the process
	}
	f := v.format
	live := MemberLiveFor(mconf.Heartbeat)
	g, err := cachegroup.New(cachegroup.Config{
		Name:   o.Name,
		Self:   self,
		Key:    cachegroup.DeriveKey(f.UUID, f.SecretKey, f.EncryptKey, o.Name),
		Seal:   o.Seal || f.EncryptKey != "",
		TLS:    o.TLS,
		Logger: opts.logger(),
		Members: func(ctx context.Context) ([]cachegroup.Member, error) {
			ss, err := meta.Sessions(ctx, v.st)
			if err != nil {
				return nil, err
			}
			// Newest session first: a member restarted before its
			// old session expired is where its new session says.
			slices.SortFunc(ss, func(a, b meta.SessionStatus) int { return cmp.Compare(b.Sid, a.Sid) })
			now := time.Now()
			var ms []cachegroup.Member
			for _, s := range ss {
				if s.CacheGroup == o.Name && s.CacheAddr != "" && meta.SessionLive(s.Heartbeat, now, live) {
					ms = append(ms, cachegroup.Member{ID: s.CacheID, Addr: s.CacheAddr, Weight: s.CacheWeight})
				}
			}
			return ms, nil
		},
	}, v.chunks)
	if err != nil {
		ln.Close()
		return err
	}
	v.group, v.groupListener = g, ln
	v.chunks.SetPeers(g)
	mconf.SessionInfo.CacheGroup = o.Name
	mconf.SessionInfo.CacheID = self.ID
	mconf.SessionInfo.CacheAddr = self.Addr
	mconf.SessionInfo.CacheWeight = self.Weight
	mconf.Figures = func() map[string]uint64 {
		st := g.Stats()
		return map[string]uint64{"CacheGroupHits": st.Hits, "CacheGroupMisses": st.Misses,
			"CacheGroupFetchedBytes": st.FetchedBytes, "CacheGroupServed": st.Served,
			"CacheGroupServedBytes": st.ServedBytes, "CacheGroupFailures": st.Failures,
			"CacheGroupRefused": st.Refused, "CacheGroupCorrupt": st.Corrupt}
	}
	return nil
}

// startCacheGroup starts serving peers and following the members.
func (v *Volume) startCacheGroup(ctx context.Context) {
	if v.group != nil {
		v.group.Start(context.WithoutCancel(ctx), v.groupListener)
	}
}

// CacheGroup returns the cache group the volume's mount is a member of,
// or nil.
func (v *Volume) CacheGroup() *cachegroup.Group { return v.group }

// listenAddr returns the address to listen on for listen (see
// CacheGroupOptions.Listen) and the host to advertise.
func listenAddr(listen string) (addr, advertise string, err error) {
	if listen == "" {
		h := hostAddress()
		return net.JoinHostPort(h, "0"), h, nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", "", fmt.Errorf("--cache-group-listen %q: want HOST:PORT: %w", listen, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		return net.JoinHostPort(host, port), hostAddress(), nil
	}
	return listen, host, nil
}

// hostAddress returns this host's first non-loopback IPv4 address, or
// 127.0.0.1 when it has none.
func hostAddress() string {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
				return n.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

// groupCollector reports the cache group's figures.
type groupCollector struct {
	stats                                     func() cachegroup.Stats
	hits, misses, fetched, served, servedB    *prometheus.Desc
	refused, failures, corrupt, members, down *prometheus.Desc
}

// newGroupCollector reports the figures of g, at zero when g is nil (no
// group), so that the series exist on every mount.
func newGroupCollector(g *cachegroup.Group) *groupCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	stats := func() cachegroup.Stats { return cachegroup.Stats{} }
	if g != nil {
		stats = g.Stats
	}
	return &groupCollector{stats: stats,
		hits:     d("sluice_cachegroup_hits_total", "Block reads a peer of the cache group served."),
		misses:   d("sluice_cachegroup_misses_total", "Block reads the owner could not serve; they went to object storage."),
		fetched:  d("sluice_cachegroup_fetched_bytes_total", "Bytes received from peers."),
		served:   d("sluice_cachegroup_served_total", "Requests of peers this member answered."),
		servedB:  d("sluice_cachegroup_served_bytes_total", "Bytes sent to peers."),
		refused:  d("sluice_cachegroup_refused_total", "Peer requests refused for a missing or wrong signature."),
		failures: d("sluice_cachegroup_failures_total", "Requests to peers that failed; each leaves the peer out for a while."),
		corrupt:  d("sluice_cachegroup_corrupt_total", "Replies from peers dropped for a bad checksum."),
		members:  d("sluice_cachegroup_members", "Members of the cache group this member sees, itself included."),
		down:     d("sluice_cachegroup_members_down", "Members left out after a failed request."),
	}
}

// Describe sends the descriptions of the metrics.
func (c *groupCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.hits, c.misses, c.fetched, c.served, c.servedB, c.refused, c.failures, c.corrupt, c.members, c.down} {
		ch <- d
	}
}

// Collect sends the current figures.
func (c *groupCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	down := 0
	for _, m := range st.Members {
		if m.Down {
			down++
		}
	}
	for d, v := range map[*prometheus.Desc]uint64{c.hits: st.Hits, c.misses: st.Misses, c.fetched: st.FetchedBytes,
		c.served: st.Served, c.servedB: st.ServedBytes, c.refused: st.Refused, c.failures: st.Failures, c.corrupt: st.Corrupt} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(len(st.Members)))
	ch <- prometheus.MustNewConstMetric(c.down, prometheus.GaugeValue, float64(down))
}
