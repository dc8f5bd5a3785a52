// Package redis is the Redis metadata engine: kvstore's ordered key-value
// database kept in one Redis server or Redis Cluster.
//
// # URLs
//
// The URL forms follow JuiceFS:
//
//	redis://[USER:PASS@]HOST[:PORT][/DB][?prefix=NAME]        one server
//	rediss://[USER:PASS@]HOST[:PORT][/DB][?prefix=NAME]       one server over TLS
//	redis://[USER:PASS@]HOST:PORT,HOST:PORT,...[/0][?prefix=NAME]   Redis Cluster
//
// PORT defaults to 6379 and DB to 0; Redis Cluster has only database 0. A
// URL without a password takes it from the REDIS_PASSWORD environment
// variable. A single address that turns out to be a cluster node is opened
// as a cluster. The prefix names the volume's namespace, so several volumes
// (or tests) can share one database; it defaults to "sluice".
//
// # Key layout
//
// Every key of a volume lies inside one hash tag, so the whole volume maps
// to one cluster slot and a transaction may touch any of its keys:
//
//	{PREFIX}k KEY      the value of kvstore key KEY (binary)
//	{PREFIX}i GROUP    sorted set (all scores 0) of the keys in scan group GROUP
//	{PREFIX}w          never written: names the volume's master on a cluster
//
// Redis has no ordered keyspace, so every key that kvstore may find by a
// range scan is also a member of its group's sorted set; Scan reads the
// members with ZRANGEBYLEX (byte order, like kvstore's) and their values
// with MGET. Which keys belong to which group is decided by scanGroup alone.
//
// # Transactions
//
// Update is optimistic and needs no WATCH: reads are plain MGETs, writes
// are buffered and read back by the transaction, and the commit is one
// call of a server-side script (commitScript) that compares every value
// the transaction read, and every sorted-set range it scanned, with what
// is stored now, and applies the writes with the matching ZADD/ZREM only
// if nothing changed. A change returns an error wrapping
// store.ErrConflict, which kvstore retries. The scripts are generic: they
// compare, read and write keys, and know nothing of POSIX; the Redis user
// must be allowed EVALSHA and EVAL. Writes that
// were not preceded by a read of the same key do not conflict, so clients
// creating different names in one directory do not collide. A transaction
// that only read still runs the script, so its reads are known to have
// been current when it returns. View reads without any check and
// therefore sees no snapshot: each call reads the latest committed values.
//
// Round trips are what an operation costs, so the adapter saves them in
// two ways. kvstore's Lookup reads a directory entry and the node record
// it names in one round trip (kvstore.Follower: fetchScript follows the
// entry on the server). And an Update may start from the values this
// handle read or committed in the last moments (see recent) instead of
// reading them again: the commit checks them like any other read, so a
// stale one only costs a conflict and a retry. A FUSE LOOKUP followed by
// CREATE or UNLINK thus reads once and commits once.
//
// A handle also keeps a cache (package kvcache) that the server keeps
// current through CLIENT TRACKING (see trackStream): reads it can answer cost no
// round trip at all, and commits run on its connection. On a cluster that
// connection goes to the master of the volume's slot.
//
// # Why go-redis
//
// github.com/redis/go-redis is the maintained official Go client. It speaks
// to a single server, Sentinel and Redis Cluster behind one interface
// (redis.UniversalClient), follows cluster redirections, supports TLS and
// ACL users, and runs scripts by SHA with a fallback to EVAL.
package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore/kvcache"
)

// DB is a kvstore.DB in a Redis server or cluster.
type DB struct {
	c      redis.UniversalClient
	name   string // URL with the password removed
	ns     string // "{PREFIX}": the hash tag every key starts with
	recent *recent
	cache  *kvcache.Cache   // values the server reports changes of
	watch  *kvcache.Tracker // keeps cache current from stream
	stream *trackStream
}

var _ kvstore.DB = (*DB)(nil)

// cacheMax is the number of values a cache keeps per generation: it keeps
// up to twice as many, about 200 bytes each. (A variable for tests.)
var cacheMax = 1 << 16

// Timeouts of Open and of single network operations.
var (
	openTimeout = 10 * time.Second
	dialTimeout = 5 * time.Second
)

// options is what a Redis URL says.
type options struct {
	tls      bool
	addrs    []string
	db       int
	user     string
	password string
	prefix   string
	wait     time.Duration // how long Open waits for an answer
}

// parseURL parses a redis:// or rediss:// URL. Its errors never contain the
// password.
func parseURL(raw string) (*options, error) {
	// url.Parse rejects a host list with an IPv6 address in it, so the
	// hosts are cut out first and the rest parsed with a placeholder host.
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, errors.New("malformed Redis URL: expected redis://[USER:PASS@]HOST:PORT[,HOST:PORT...]/DB")
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	userinfo, hosts := "", rest[:end]
	if at := strings.LastIndex(hosts, "@"); at >= 0 {
		userinfo, hosts = hosts[:at+1], hosts[at+1:]
	}
	if hosts == "" {
		return nil, errors.New("malformed Redis URL: no host (expected redis://HOST:PORT/DB)")
	}
	u, err := url.Parse(scheme + "://" + userinfo + "host" + rest[end:])
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password included
		}
		return nil, fmt.Errorf("malformed Redis URL: %w", err)
	}
	o := &options{prefix: "sluice"}
	switch u.Scheme {
	case "redis":
	case "rediss":
		o.tls = true
	default:
		return nil, fmt.Errorf("malformed Redis URL: scheme %q is not redis or rediss", u.Scheme)
	}
	for _, a := range strings.Split(hosts, ",") {
		if !strings.Contains(strings.TrimPrefix(a, "["), ":") || strings.HasSuffix(a, "]") {
			a = net.JoinHostPort(strings.Trim(a, "[]"), "6379")
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" {
			return nil, fmt.Errorf("malformed Redis URL: bad address %q", a)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return nil, fmt.Errorf("malformed Redis URL: bad port in %q", a)
		}
		o.addrs = append(o.addrs, a)
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || strings.Contains(p, "/") {
			return nil, fmt.Errorf("bad database number %q in Redis URL: want a number such as /0", p)
		}
		o.db = n
	}
	if len(o.addrs) > 1 && o.db != 0 {
		return nil, fmt.Errorf("bad database number %d in Redis URL: Redis Cluster has only database 0", o.db)
	}
	if u.User != nil {
		o.user = u.User.Username()
		o.password, _ = u.User.Password()
	}
	if o.password == "" {
		o.password = os.Getenv("REDIS_PASSWORD")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("malformed Redis URL query: %w", err)
	}
	for k, v := range q {
		if k != "prefix" {
			return nil, fmt.Errorf("unknown Redis URL parameter %q (supported: prefix)", k)
		}
		o.prefix = v[len(v)-1]
		if o.prefix == "" || strings.ContainsAny(o.prefix, "{}") {
			return nil, fmt.Errorf("bad prefix %q in Redis URL: want a non-empty name without braces", o.prefix)
		}
	}
	return o, nil
}

// String returns the URL of o without the password.
func (o *options) String() string {
	u := url.URL{Scheme: "redis", Host: strings.Join(o.addrs, ","), Path: "/" + strconv.Itoa(o.db)}
	if o.tls {
		u.Scheme = "rediss"
	}
	if o.user != "" {
		u.User = url.User(o.user)
	}
	if o.prefix != "sluice" {
		u.RawQuery = url.Values{"prefix": {o.prefix}}.Encode()
	}
	return u.String()
}

func (o *options) client(cluster bool) redis.UniversalClient {
	uo := &redis.UniversalOptions{
		Addrs:                 o.addrs,
		DB:                    o.db,
		Username:              o.user,
		Password:              o.password,
		DialTimeout:           dialTimeout,
		ContextTimeoutEnabled: true,
		IsClusterMode:         cluster,
		// Redis versions before 8 do not know CLIENT MAINT_NOTIFICATIONS;
		// the handshake would only add a round trip and a log line.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	if o.tls {
		// No ServerName: crypto/tls takes it from each node's address.
		uo.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return redis.NewUniversalClient(uo)
}

// Open connects to the Redis server or cluster named by rawURL (redis:// or
// rediss://) and checks that it may hold metadata: it must answer PING
// within a bounded time and must not evict keys (a maxmemory-policy of
// allkeys-*). create is accepted for symmetry with other engines: Redis
// has nothing to create, and an empty namespace opens fine (meta.Load then
// reports that no volume is formatted).
func Open(ctx context.Context, rawURL string, create bool) (*DB, error) {
	o, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	dl, _ := ctx.Deadline() // the caller's, when it is sooner
	o.wait = time.Until(dl).Round(time.Millisecond)
	if err := probe(ctx, o.addrs); err != nil {
		return nil, err
	}
	cluster := len(o.addrs) > 1
	c := o.client(cluster)
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, describeOpenError(o, err)
	}
	if !cluster {
		info, err := c.Info(ctx, "cluster").Result()
		if err == nil && strings.Contains(info, "cluster_enabled:1") {
			c.Close()
			if o.db != 0 {
				return nil, fmt.Errorf("bad database number %d in Redis URL: %s is a cluster node and Redis Cluster has only database 0", o.db, o.addrs[0])
			}
			cluster = true
			c = o.client(true)
			if err := c.Ping(ctx).Err(); err != nil {
				c.Close()
				return nil, describeOpenError(o, err)
			}
		}
	}
	if err := checkEviction(ctx, c); err != nil {
		c.Close()
		return nil, err
	}
	ns := "{" + o.prefix + "}"
	d := &DB{c: c, name: o.String(), ns: ns, recent: newRecent()}
	d.cache = kvcache.New(cacheMax, cacheLayout)
	d.stream = newTrackStream(o, ns, d.locate)
	d.watch = kvcache.NewTracker(d.cache, d.stream, nil)
	return d, nil
}

// locate returns the address of the server that holds the volume's keys:
// the URL's server, or on a cluster the master of the volume's slot.
func (d *DB) locate(ctx context.Context) (string, error) {
	switch c := d.c.(type) {
	case *redis.Client:
		return c.Options().Addr, nil
	case *redis.ClusterClient:
		m, err := c.MasterForKey(ctx, d.ns+"w")
		if err != nil {
			return "", err
		}
		return m.Options().Addr, nil
	}
	return "", fmt.Errorf("unexpected client %T", d.c)
}

// probe dials the addresses until one answers, so that an unreachable
// server is reported at once with the dial error, rather than after the
// client's retries with a timeout.
func probe(ctx context.Context, addrs []string) error {
	var err error
	for _, a := range addrs {
		var c net.Conn
		d := net.Dialer{Timeout: dialTimeout}
		if c, err = d.DialContext(ctx, "tcp", a); err == nil {
			c.Close()
			return nil
		}
	}
	return fmt.Errorf("cannot reach Redis at %s: %w", strings.Join(addrs, ","), err)
}

// describeOpenError turns a failed first contact into a one-line error a
// user can act on.
func describeOpenError(o *options, err error) error {
	where := strings.Join(o.addrs, ",")
	var re redis.Error
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("cannot reach Redis at %s: no answer to PING within %v", where, o.wait)
	}
	if !errors.As(err, &re) {
		return fmt.Errorf("cannot reach Redis at %s: %w", where, err)
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "NOAUTH"),
		strings.Contains(msg, "invalid password"), strings.Contains(msg, "AUTH"):
		return fmt.Errorf("authentication to Redis at %s failed (check the user and password in the URL or REDIS_PASSWORD): %w", where, err)
	case strings.Contains(msg, "DB index is out of range"):
		return fmt.Errorf("bad database number %d in Redis URL: the server at %s has fewer databases: %w", o.db, where, err)
	case strings.Contains(msg, "SELECT is not allowed in cluster mode"):
		return fmt.Errorf("bad database number %d in Redis URL: %s is a cluster node and Redis Cluster has only database 0", o.db, where)
	}
	return fmt.Errorf("Redis at %s: %w", where, err)
}

// checkEviction refuses servers that may evict keys without a TTL: losing
// a metadata key corrupts the volume. Servers where CONFIG is disabled
// (managed services) are given the benefit of the doubt.
func checkEviction(ctx context.Context, c redis.UniversalClient) error {
	check := func(ctx context.Context, c *redis.Client) error {
		m, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			var re redis.Error
			if errors.As(err, &re) {
				return nil // CONFIG renamed, disabled or not permitted
			}
			return fmt.Errorf("cannot reach Redis at %s: %w", c.Options().Addr, err)
		}
		if p := m["maxmemory-policy"]; strings.HasPrefix(p, "allkeys-") {
			return fmt.Errorf("Redis at %s has maxmemory-policy %s, which may evict metadata: set it to noeviction", c.Options().Addr, p)
		}
		return nil
	}
	switch c := c.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, check)
	case *redis.Client:
		return check(ctx, c)
	}
	return nil
}

// Name returns the URL of the database without its password.
func (d *DB) Name() string { return d.name }

// Close closes the connections.
func (d *DB) Close() error {
	if d.watch != nil {
		d.watch.Close()
	}
	return d.c.Close()
}

func (d *DB) dataKey(k string) string  { return d.ns + "k" + k }
func (d *DB) indexKey(g []byte) string { return d.ns + "i" + string(g) }
func (d *DB) anchorKey() string        { return d.ns + "w" }

// Update runs fn once in an optimistic transaction and commits its writes
// with commitScript; see the package doc.
func (d *DB) Update(ctx context.Context, fn func(kvstore.Txn) error) error {
	t := newTxn(ctx, d, true)
	if err := fn(t); err != nil {
		if cerr := t.checkGuesses(); cerr != nil {
			return cerr
		}
		return err
	}
	if t.err != nil {
		return t.err
	}
	return t.commit()
}

// View runs fn with plain reads; a write in it fails the View.
func (d *DB) View(ctx context.Context, fn func(kvstore.Txn) error) error {
	t := newTxn(ctx, d, false)
	if err := fn(t); err != nil {
		return err
	}
	return t.err
}
