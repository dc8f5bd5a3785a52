package tikv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tikv/client-go/v2/config"
	tikverr "github.com/tikv/client-go/v2/error"
	"github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/txnkv/transaction"
	"github.com/tikv/client-go/v2/util"
	pd "github.com/tikv/pd/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

const (
	// dialTimeout bounds Open: reaching PD and the first read.
	dialTimeout = 10 * time.Second
	// sep ends the volume prefix. It is not valid UTF-8 and PREFIX must be,
	// so the key ranges of two volumes never overlap.
	sep = 0xfd
	// format is the byte stored before every value (TiKV refuses empty
	// values).
	format = 0x00
)

// DB is a kvstore.DB in a TiKV cluster, under one key prefix.
type DB struct {
	store  *tikv.KVStore
	name   string
	prefix []byte // PREFIX + sep: every key of the volume starts with it
	end    []byte // first key after the volume's range
	close  func() error
}

var (
	_ kvstore.DB      = (*DB)(nil)
	_ kvstore.Limiter = (*DB)(nil)
)

// Limits declares that TiKV misses phantoms (see the package doc); it has
// no operation bound the core can reach.
func (d *DB) Limits() store.Limits { return store.Limits{MissesPhantoms: true} }

// New returns a DB over the volume under prefix in s, a store the caller
// made (tests use client-go's mock) and keeps: Close leaves s open.
func New(s *tikv.KVStore, prefix string) (*DB, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	return newDB(s, "tikv://"+s.UUID()+"/"+prefix, prefix, func() error { return nil }), nil
}

func newDB(s *tikv.KVStore, name, prefix string, close func() error) *DB {
	p := append([]byte(prefix), sep)
	return &DB{store: s, name: name, prefix: p, end: append([]byte(prefix), sep+1), close: close}
}

func checkPrefix(prefix string) error {
	if prefix == "" {
		return errors.New("no PREFIX naming the volume's keys")
	}
	if !utf8.ValidString(prefix) {
		return errors.New("PREFIX is not valid UTF-8")
	}
	return nil
}

const urlForm = "tikv://PD_HOST:PORT[,PD_HOST:PORT...]/PREFIX"

// parseURL returns the PD addresses and the prefix of a TiKV URL; the
// "tikv://" scheme may be left out.
func parseURL(raw string) (pds []string, prefix string, err error) {
	bad := func(format string, args ...any) ([]string, string, error) {
		return nil, "", fmt.Errorf("malformed TiKV URL %q: %s (expected %s)", raw, fmt.Sprintf(format, args...), urlForm)
	}
	rest := raw
	if scheme, after, ok := strings.Cut(raw, "://"); ok {
		if !strings.EqualFold(scheme, "tikv") {
			return bad("scheme %q is not tikv", scheme)
		}
		rest = after
	}
	if strings.ContainsAny(rest, "?@") {
		return bad("no options or user names are supported")
	}
	authority, path, _ := strings.Cut(rest, "/")
	if authority == "" {
		return bad("no PD_HOST:PORT")
	}
	for _, ep := range strings.Split(authority, ",") {
		host, port, err := net.SplitHostPort(ep)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return bad("PD address %q is not HOST:PORT", ep)
		}
		pds = append(pds, ep)
	}
	if prefix, err = url.PathUnescape(path); err != nil {
		return bad("bad escape in PREFIX")
	}
	prefix = strings.Trim(prefix, "/")
	if err := checkPrefix(prefix); err != nil {
		return bad("%v", err)
	}
	return pds, prefix, nil
}

// Open connects to the TiKV cluster whose PD a URL names (see the package
// doc). With create false the prefix must already hold a volume.
func Open(ctx context.Context, rawURL string, create bool) (*DB, error) {
	pds, prefix, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	name := "tikv://" + strings.Join(pds, ",") + "/" + prefix
	start := time.Now()
	openCtx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	// The PD client lives as long as its context: give it one of its own,
	// cancelled by Close, or by the open deadline until Open succeeds.
	life, stop := context.WithCancel(context.Background())
	unbind := context.AfterFunc(openCtx, stop)
	s, err := connect(life, pds)
	if err == nil {
		d := newDB(s, name, prefix, func() error { defer stop(); return s.Close() })
		err = d.probe(openCtx, create)
		if err == nil && unbind() {
			return d, nil
		}
		d.Close()
	}
	stop()
	if errors.Is(openCtx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("tikv: PD at %s is unreachable (no answer in %v): %w",
			strings.Join(pds, ","), time.Since(start).Round(100*time.Millisecond), openCtx.Err())
	}
	return nil, fmt.Errorf("tikv: PD at %s: %w", strings.Join(pds, ","), err)
}

// connect builds a KVStore the way txnkv.NewClient does, but with a PD
// client that ctx can cancel: txnkv.NewClient retries an unreachable PD 100
// times a second apart and takes no context.
func connect(ctx context.Context, pds []string) (*tikv.KVStore, error) {
	cfg := config.GetGlobalConfig()
	pdCli, err := pd.NewClientWithContext(ctx, pds, pd.SecurityOption{},
		pd.WithGRPCDialOptions(grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:    time.Duration(cfg.TiKVClient.GrpcKeepAliveTime) * time.Second,
			Timeout: time.Duration(cfg.TiKVClient.GrpcKeepAliveTimeout) * time.Second,
		})),
		pd.WithCustomTimeoutOption(time.Duration(cfg.PDClient.PDServerTimeout)*time.Second),
		pd.WithForwardingOption(cfg.EnableForwarding))
	if err != nil {
		return nil, err
	}
	codec := tikv.NewCodecPDClient(tikv.ModeTxn, util.InterceptedPDClient{Client: pdCli})
	spkv, err := tikv.NewEtcdSafePointKV(pds, nil)
	if err != nil {
		codec.Close()
		return nil, err
	}
	uuid := fmt.Sprintf("tikv-%v", codec.GetClusterID(ctx))
	s, err := tikv.NewKVStore(uuid, codec, spkv, tikv.NewRPCClient(tikv.WithCodec(codec.GetCodec())))
	if err != nil {
		spkv.Close()
		codec.Close()
		return nil, err
	}
	return s, nil
}

// probe reads one key of the volume's range: it proves that TiKV answers
// and tells whether the prefix holds a volume.
func (d *DB) probe(ctx context.Context, create bool) error {
	found := false
	err := d.View(ctx, func(t kvstore.Txn) error {
		ps, err := t.Scan(nil, nil, 1)
		found = len(ps) > 0
		return err
	})
	if err == nil && !create && !found {
		return fmt.Errorf("%s holds no volume (not formatted?)", d.name)
	}
	return err
}

// Name returns the URL of the volume.
func (d *DB) Name() string { return d.name }

// Close closes the store if Open made it.
func (d *DB) Close() error { return d.close() }

// Update runs fn once in an optimistic transaction and commits it; a write
// conflict returns an error wrapping store.ErrConflict.
func (d *DB) Update(ctx context.Context, fn func(kvstore.Txn) error) error {
	tx, err := d.store.Begin()
	if err != nil {
		return describe(err)
	}
	t := &txn{ctx: ctx, d: d, tx: tx}
	if err := fn(t); err != nil {
		tx.Rollback()
		return err
	}
	if t.err != nil || tx.IsReadOnly() {
		tx.Rollback() // a snapshot that wrote nothing needs no commit
		return t.err
	}
	// Lock what was read so that prewrite checks it for conflicts too
	// (optimistic mode: this only marks the keys in the buffer).
	if len(t.read) > 0 {
		if err := tx.LockKeysWithWaitTime(ctx, 0, t.read...); err != nil {
			tx.Rollback()
			return describe(err)
		}
	}
	return describe(tx.Commit(ctx))
}

// View runs fn on a snapshot; the transaction is rolled back.
func (d *DB) View(ctx context.Context, fn func(kvstore.Txn) error) error {
	tx, err := d.store.Begin()
	if err != nil {
		return describe(err)
	}
	defer tx.Rollback()
	t := &txn{ctx: ctx, d: d, tx: tx, readOnly: true}
	if err := fn(t); err != nil {
		return err
	}
	return t.err
}

// describe classifies a TiKV error: conflicts wrap store.ErrConflict.
func describe(err error) error {
	if err == nil {
		return nil
	}
	var latch *tikverr.ErrWriteConflictInLatch
	var retry *tikverr.ErrRetryable
	if tikverr.IsErrWriteConflict(err) || errors.As(err, &latch) || errors.As(err, &retry) {
		return fmt.Errorf("tikv: %w: %v", store.ErrConflict, oneLine(err))
	}
	var tooLarge *tikverr.ErrTxnTooLarge
	var entryTooLarge *tikverr.ErrEntryTooLarge
	if errors.As(err, &tooLarge) || errors.As(err, &entryTooLarge) {
		return fmt.Errorf("tikv: transaction too large for the cluster's limits: %w", err)
	}
	return fmt.Errorf("tikv: %w", err)
}

// oneLine drops the stack trace some client-go errors print with %+v.
func oneLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// txn adapts a client-go transaction to kvstore.Txn.
type txn struct {
	ctx      context.Context
	d        *DB
	tx       *transaction.KVTxn
	readOnly bool
	read     [][]byte // keys read, locked before commit
	err      error    // first failure of a write
}

var _ kvstore.Txn = (*txn)(nil)

func (t *txn) key(k []byte) []byte {
	return append(bytes.Clone(t.d.prefix), k...)
}

func (t *txn) observe(k []byte) {
	if !t.readOnly {
		t.read = append(t.read, k)
	}
}

// decode strips the format byte.
func decode(v []byte) ([]byte, error) {
	if len(v) == 0 || v[0] != format {
		return nil, fmt.Errorf("tikv: value in an unknown format (%d bytes)", len(v))
	}
	return bytes.Clone(v[1:]), nil
}

func (t *txn) Get(key []byte) ([]byte, error) {
	k := t.key(key)
	t.observe(k)
	v, err := t.tx.Get(t.ctx, k)
	if tikverr.IsErrNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, describe(err)
	}
	return decode(v)
}

func (t *txn) GetMany(keys [][]byte) ([][]byte, error) {
	ks := make([][]byte, len(keys))
	for i, key := range keys {
		ks[i] = t.key(key)
		t.observe(ks[i])
	}
	m, err := t.tx.BatchGet(t.ctx, ks)
	if err != nil {
		return nil, describe(err)
	}
	out := make([][]byte, len(keys))
	for i, k := range ks {
		if v, ok := m[string(k)]; ok {
			if out[i], err = decode(v); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func (t *txn) Scan(begin, end []byte, limit int) ([]kvstore.Pair, error) {
	b, e := t.key(begin), t.d.end
	if end != nil {
		e = t.key(end)
	}
	if bytes.Compare(b, e) >= 0 {
		return nil, nil
	}
	it, err := t.tx.Iter(b, e)
	if err != nil {
		return nil, describe(err)
	}
	defer it.Close()
	var out []kvstore.Pair
	for it.Valid() && (limit <= 0 || len(out) < limit) {
		k := bytes.Clone(it.Key())
		v, err := decode(it.Value())
		if err != nil {
			return nil, err
		}
		t.observe(k)
		out = append(out, kvstore.Pair{Key: k[len(t.d.prefix):], Value: v})
		if err := it.Next(); err != nil {
			return nil, describe(err)
		}
	}
	return out, nil
}

func (t *txn) Set(key, value []byte) {
	t.write(func() error { return t.tx.Set(t.key(key), append([]byte{format}, value...)) })
}

func (t *txn) Delete(key []byte) {
	t.write(func() error { return t.tx.Delete(t.key(key)) })
}

func (t *txn) write(do func() error) {
	if t.err != nil {
		return
	}
	if t.readOnly {
		t.err = errors.New("tikv: write in a read-only transaction")
		return
	}
	if err := do(); err != nil {
		t.err = describe(err)
	}
}
