package etcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

const (
	// dialTimeout bounds Open: connecting, authenticating and the first read.
	dialTimeout = 5 * time.Second
	// maxReadOps is the number of Gets sent in one etcd Txn by GetMany,
	// and the bound of a transaction the DB declares (Limits): etcd's
	// default --max-txn-ops.
	maxReadOps = 128
	// sep ends the volume prefix. It is not valid UTF-8 and PREFIX must be,
	// so the key ranges of two volumes never overlap.
	sep = "\xfd"
	// sepEnd is the byte after sep: PREFIX+sepEnd ends the volume's range.
	sepEnd = "\xfe"
)

// DB is a kvstore.DB in an etcd cluster, under one key prefix.
type DB struct {
	cli          *clientv3.Client
	name         string // URL without the password
	prefix       string // PREFIX + sep: every key of the volume starts with it
	end          string // first key after the volume's range
	serializable bool   // View may read from any member's local state
}

var (
	_ kvstore.DB      = (*DB)(nil)
	_ kvstore.Limiter = (*DB)(nil)
)

// Limits declares etcd's default --max-txn-ops, which the server applies
// to the compares and to the writes of one commit: the core keeps every
// transaction under it. A server started with a larger limit only gains
// headroom.
func (d *DB) Limits() store.Limits { return store.Limits{MaxTxnOps: maxReadOps} }

// location is what an etcd URL names.
type location struct {
	endpoints      []string
	user, password string
	prefix         string
	serializable   bool
}

// String returns the URL with the password removed.
func (l location) String() string {
	user := ""
	if l.user != "" {
		user = url.User(l.user).String() + "@"
	}
	s := "etcd://" + user + strings.Join(l.endpoints, ",") + "/" + l.prefix
	if l.serializable {
		s += "?serializable=true"
	}
	return s
}

const urlForm = "etcd://[USER:PASS@]HOST:PORT[,HOST:PORT...]/PREFIX"

// parseURL parses an etcd URL; the "etcd://" scheme may be left out.
func parseURL(raw string) (location, error) {
	var l location
	bad := func(format string, args ...any) (location, error) {
		return l, fmt.Errorf("malformed etcd URL %q: %s (expected %s)",
			redact(raw), fmt.Sprintf(format, args...), urlForm)
	}
	rest := raw
	if scheme, after, ok := strings.Cut(raw, "://"); ok {
		if !strings.EqualFold(scheme, "etcd") {
			return bad("scheme %q is not etcd", scheme)
		}
		rest = after
	}
	rest, query, _ := strings.Cut(rest, "?")
	authority, path, _ := strings.Cut(rest, "/")
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		user, pass, _ := strings.Cut(authority[:i], ":")
		var err1, err2 error
		l.user, err1 = url.PathUnescape(user)
		l.password, err2 = url.PathUnescape(pass)
		if err := errors.Join(err1, err2); err != nil || l.user == "" {
			return bad("bad user name or password")
		}
		authority = authority[i+1:]
	}
	if authority == "" {
		return bad("no HOST:PORT")
	}
	for _, ep := range strings.Split(authority, ",") {
		host, port, err := net.SplitHostPort(ep)
		if err != nil || host == "" {
			return bad("endpoint %q is not HOST:PORT", ep)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return bad("endpoint %q has no valid port", ep)
		}
		l.endpoints = append(l.endpoints, ep)
	}
	prefix, err := url.PathUnescape(path)
	if err != nil {
		return bad("bad escape in PREFIX")
	}
	l.prefix = strings.Trim(prefix, "/")
	if l.prefix == "" {
		return bad("no PREFIX naming the volume's keys")
	}
	if !utf8.ValidString(l.prefix) {
		return bad("PREFIX is not valid UTF-8")
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return bad("bad query")
	}
	for k, vs := range values {
		switch k {
		case "serializable":
			if l.serializable, err = strconv.ParseBool(vs[len(vs)-1]); err != nil {
				return bad("serializable=%q is not a boolean", vs[len(vs)-1])
			}
		default:
			return bad("unknown option %q (known: serializable)", k)
		}
	}
	return l, nil
}

// redact hides the password of a URL that may not parse.
func redact(raw string) string {
	at := strings.LastIndexByte(raw, '@')
	if at < 0 {
		return raw
	}
	start := strings.Index(raw, "://") + 3
	if c := strings.IndexByte(raw[start:at], ':'); c >= 0 {
		return raw[:start+c+1] + "xxxxx" + raw[at:]
	}
	return raw
}

// Open connects to the etcd cluster a URL names (see the package doc).
// With create false the prefix must already hold a volume.
func Open(ctx context.Context, rawURL string, create bool) (*DB, error) {
	l, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	d := &DB{name: l.String(), prefix: l.prefix + sep, end: l.prefix + sepEnd,
		serializable: l.serializable}
	start := time.Now()
	timeout := dialTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            l.endpoints,
		Username:             l.user,
		Password:             l.password,
		DialTimeout:          timeout, // bounds the login too
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: 10 * time.Second,
		Logger:               zap.NewNop(), // errors are returned, not logged
	})
	if err != nil {
		return nil, describeOpen(l, err, time.Since(start))
	}
	// One read proves that the cluster answers and accepts the
	// credentials, and tells whether the prefix holds a volume.
	probe, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := cli.Get(probe, d.prefix, clientv3.WithRange(d.end), clientv3.WithLimit(1),
		clientv3.WithKeysOnly())
	if err != nil {
		cli.Close()
		return nil, describeOpen(l, err, time.Since(start))
	}
	if !create && len(resp.Kvs) == 0 {
		cli.Close()
		return nil, fmt.Errorf("%s holds no volume (not formatted?)", d.name)
	}
	d.cli = cli
	return d, nil
}

// describeOpen turns a failure to reach or log in to etcd into one line a
// user can act on.
func describeOpen(l location, err error, waited time.Duration) error {
	eps := strings.Join(l.endpoints, ",")
	switch {
	case errors.Is(err, rpctypes.ErrAuthFailed):
		return fmt.Errorf("etcd at %s rejected user %q: wrong user name or password", eps, l.user)
	case errors.Is(err, rpctypes.ErrUserEmpty), errors.Is(err, rpctypes.ErrInvalidAuthToken):
		return fmt.Errorf("etcd at %s requires authentication: give USER:PASS@ in the URL", eps)
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		return fmt.Errorf("etcd at %s: user %q may not read prefix %q: permission denied", eps, l.user, l.prefix)
	case errors.Is(err, context.DeadlineExceeded), status.Code(err) == codes.DeadlineExceeded,
		status.Code(err) == codes.Unavailable:
		return fmt.Errorf("etcd at %s is unreachable (no answer in %v): %w", eps, waited.Round(100*time.Millisecond), err)
	}
	return fmt.Errorf("etcd at %s: %w", eps, err)
}

// Name returns the URL of the volume without the password.
func (d *DB) Name() string { return d.name }

// Close closes the connections to the cluster.
func (d *DB) Close() error { return d.cli.Close() }

// Update runs fn once in an optimistic transaction and commits it with one
// etcd Txn, returning an error wrapping store.ErrConflict when another
// transaction changed what fn read.
func (d *DB) Update(ctx context.Context, fn func(kvstore.Txn) error) error {
	t := newTxn(ctx, d, false)
	err := fn(t)
	if t.conflict != nil {
		// A read lost its snapshot; whatever fn made of that, retry.
		return t.conflict
	}
	if err != nil {
		return err
	}
	return t.commit()
}

// View runs fn on one snapshot of the volume.
func (d *DB) View(ctx context.Context, fn func(kvstore.Txn) error) error {
	t := newTxn(ctx, d, true)
	err := fn(t)
	if t.conflict != nil {
		return t.conflict
	}
	if err != nil {
		return err
	}
	return t.err
}

// describe adds what a user can do about an etcd error of a transaction.
func describe(err error, cmps, ops int) error {
	switch {
	case errors.Is(err, rpctypes.ErrTooManyOps):
		return fmt.Errorf("etcd commit of %d writes guarded by %d compares exceeds the server's "+
			"--max-txn-ops (default 128); restart etcd with a larger one, e.g. --max-txn-ops=10000: %w",
			ops, cmps, err)
	case errors.Is(err, rpctypes.ErrRequestTooLarge):
		return fmt.Errorf("etcd commit of %d writes exceeds the server's --max-request-bytes "+
			"(default 1.5 MiB); restart etcd with a larger one: %w", ops, err)
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("etcd compacted the snapshot of the transaction: %w (%w)", store.ErrConflict, err)
	}
	return fmt.Errorf("etcd: %w", err)
}
