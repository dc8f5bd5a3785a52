package etcd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// txn is one optimistic transaction (see the package doc). Keys in its
// maps carry the volume prefix.
type txn struct {
	ctx      context.Context
	d        *DB
	readOnly bool
	rev      int64             // snapshot revision; 0 until the first read
	reads    map[string]int64  // key → ModRevision at rev (0: absent)
	ranges   []keyRange        // scanned ranges, guarded at commit
	writes   map[string][]byte // buffered writes; nil value = delete
	conflict error             // a read lost the snapshot; the txn must retry
	err      error             // a write in a read-only transaction
}

// keyRange is [begin, end) in prefixed keys.
type keyRange struct{ begin, end string }

var _ kvstore.Txn = (*txn)(nil)

func newTxn(ctx context.Context, d *DB, readOnly bool) *txn {
	t := &txn{ctx: ctx, d: d, readOnly: readOnly}
	if !readOnly {
		t.reads = map[string]int64{}
		t.writes = map[string][]byte{}
	}
	return t
}

// get is one range read: key alone when end is empty.
type get struct {
	key, end string
	limit    int64
}

// read sends gets as one etcd Txn at the snapshot revision, fixing the
// snapshot at the first read.
func (t *txn) read(gets []get) ([]*pb.RangeResponse, error) {
	serializable := t.readOnly && t.d.serializable
	resp, err := t.send(gets, serializable)
	if serializable && errors.Is(err, rpctypes.ErrFutureRev) {
		// The member answering lags behind the one that fixed the
		// snapshot: let it catch up through a linearizable read.
		resp, err = t.send(gets, false)
	}
	if err != nil {
		if errors.Is(err, rpctypes.ErrCompacted) {
			t.conflict = describe(err, 0, 0)
			return nil, t.conflict
		}
		if status.Code(err) == codes.Unavailable {
			// The connection broke (an etcd member stopped, a reset):
			// nothing was committed, so the caller may run the
			// transaction again, as it does within --meta-timeout.
			return nil, store.NotApplied(fmt.Errorf("%w: %w", store.ErrDisconnected, describe(err, 0, 0)))
		}
		return nil, describe(err, 0, 0)
	}
	if t.rev == 0 {
		t.rev = resp.Header.Revision
	}
	out := make([]*pb.RangeResponse, len(resp.Responses))
	for i, r := range resp.Responses {
		out[i] = r.GetResponseRange()
	}
	return out, nil
}

func (t *txn) send(gets []get, serializable bool) (*clientv3.TxnResponse, error) {
	ops := make([]clientv3.Op, len(gets))
	for i, g := range gets {
		var opts []clientv3.OpOption
		if g.end != "" {
			opts = append(opts, clientv3.WithRange(g.end))
		}
		if g.limit > 0 {
			opts = append(opts, clientv3.WithLimit(g.limit))
		}
		if t.rev != 0 {
			opts = append(opts, clientv3.WithRev(t.rev))
		}
		if serializable {
			opts = append(opts, clientv3.WithSerializable())
		}
		ops[i] = clientv3.OpGet(g.key, opts...)
	}
	return t.d.cli.Txn(t.ctx).Then(ops...).Commit()
}

// buffered returns the transaction's own write of k, if any.
func (t *txn) buffered(k string) (v []byte, ok bool) {
	v, ok = t.writes[k]
	return bytes.Clone(v), ok
}

// observe records the ModRevision of a key read from etcd (0: absent).
func (t *txn) observe(k string, rev int64) {
	if !t.readOnly {
		t.reads[k] = rev
	}
}

// single returns the one key r holds: its value (nil when absent, empty
// but not nil when present and empty) and ModRevision.
func single(r *pb.RangeResponse) ([]byte, int64) {
	if len(r.Kvs) == 0 {
		return nil, 0
	}
	return nonNil(r.Kvs[0].Value), r.Kvs[0].ModRevision
}

// nonNil returns v, or an empty slice for nil: protobuf decodes an empty
// value as nil, which kvstore reads as a missing key.
func nonNil(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}

func (t *txn) Get(key []byte) ([]byte, error) {
	k := t.d.prefix + string(key)
	if v, ok := t.buffered(k); ok {
		return v, nil
	}
	rs, err := t.read([]get{{key: k}})
	if err != nil {
		return nil, err
	}
	v, rev := single(rs[0])
	t.observe(k, rev)
	return v, nil
}

func (t *txn) GetMany(keys [][]byte) ([][]byte, error) {
	out := make([][]byte, len(keys))
	var gets []get
	var idx []int // position in out of each get
	for i, key := range keys {
		k := t.d.prefix + string(key)
		if v, ok := t.buffered(k); ok {
			out[i] = v
			continue
		}
		gets = append(gets, get{key: k})
		idx = append(idx, i)
	}
	for start := 0; start < len(gets); start += maxReadOps {
		stop := min(start+maxReadOps, len(gets))
		rs, err := t.read(gets[start:stop])
		if err != nil {
			return nil, err
		}
		for j, r := range rs {
			v, rev := single(r)
			t.observe(gets[start+j].key, rev)
			out[idx[start+j]] = v
		}
	}
	return out, nil
}

func (t *txn) Scan(begin, end []byte, limit int) ([]kvstore.Pair, error) {
	out, err := t.ScanMany([]kvstore.Range{{Begin: begin, End: end}}, limit)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

var _ kvstore.MultiScanner = (*txn)(nil)

// scan is one range of ScanMany: its prefixed bounds, the buffered writes
// in it in key order, and the get that reads it (none when empty).
type scan struct {
	b, e string
	mine []string
	get  int // index in the gets; -1 for an empty range
}

// ScanMany reads the ranges in etcd Txns of up to maxReadOps range reads
// each (etcd's --max-txn-ops applies to a read-only Txn too), all at the
// transaction's snapshot, and merges each with the buffered writes in it.
func (t *txn) ScanMany(ranges []kvstore.Range, limit int) ([][]kvstore.Pair, error) {
	scans := make([]scan, len(ranges))
	var gets []get
	for i, r := range ranges {
		b, e := t.d.prefix+string(r.Begin), t.d.end
		if r.End != nil {
			e = t.d.prefix + string(r.End)
		}
		scans[i] = scan{b: b, e: e, get: -1}
		if b >= e {
			continue
		}
		// Buffered writes in the range, in key order. Buffered deletes can
		// hide fetched keys, so fetch that many more than asked.
		hidden := 0
		for k, v := range t.writes {
			if k >= b && k < e {
				scans[i].mine = append(scans[i].mine, k)
				if v == nil {
					hidden++
				}
			}
		}
		slices.Sort(scans[i].mine)
		g := get{key: b, end: e}
		if limit > 0 {
			g.limit = int64(limit + hidden)
		}
		scans[i].get = len(gets)
		gets = append(gets, g)
	}
	resps := make([]*pb.RangeResponse, 0, len(gets))
	for start := 0; start < len(gets); start += maxReadOps {
		rs, err := t.read(gets[start:min(start+maxReadOps, len(gets))])
		if err != nil {
			return nil, err
		}
		resps = append(resps, rs...)
	}
	out := make([][]kvstore.Pair, len(ranges))
	for i, s := range scans {
		if s.get < 0 {
			continue
		}
		out[i] = t.merge(resps[s.get].Kvs, s.mine, limit)
		if !t.readOnly {
			e := s.e
			if limit > 0 && len(out[i]) == limit {
				// Only the range up to the last key returned was observed.
				e = t.d.prefix + string(out[i][len(out[i])-1].Key) + "\x00"
			}
			t.ranges = append(t.ranges, keyRange{s.b, e})
		}
	}
	return out, nil
}

// merge merges the keys fetched from etcd with the buffered writes mine
// and returns up to limit visible pairs with the prefix stripped. When the
// fetch was cut short by its limit, the first limit merged keys all come
// before the cut, so no unfetched key can be missing among them. Each
// returned key that came from etcd is observed, so that its deletion before
// commit is noticed (a range compare cannot see a deleted key).
func (t *txn) merge(kvs []*mvccpb.KeyValue, mine []string, limit int) []kvstore.Pair {
	var out []kvstore.Pair
	add := func(k string, v []byte) {
		out = append(out, kvstore.Pair{Key: []byte(k[len(t.d.prefix):]), Value: v})
	}
	i, j := 0, 0
	for (limit <= 0 || len(out) < limit) && (i < len(kvs) || j < len(mine)) {
		if j == len(mine) || (i < len(kvs) && string(kvs[i].Key) < mine[j]) {
			add(string(kvs[i].Key), nonNil(kvs[i].Value))
			t.observe(string(kvs[i].Key), kvs[i].ModRevision)
			i++
			continue
		}
		if i < len(kvs) && string(kvs[i].Key) == mine[j] {
			i++ // shadowed by the buffered write
		}
		if v := t.writes[mine[j]]; v != nil {
			add(mine[j], bytes.Clone(v))
		}
		j++
	}
	return out
}

func (t *txn) Set(key, value []byte) {
	if t.readOnly {
		t.err = errors.New("etcd: write in a read-only transaction")
		return
	}
	if value == nil {
		value = []byte{}
	}
	t.writes[t.d.prefix+string(key)] = bytes.Clone(value)
}

func (t *txn) Delete(key []byte) {
	if t.readOnly {
		t.err = errors.New("etcd: write in a read-only transaction")
		return
	}
	t.writes[t.d.prefix+string(key)] = nil
}

// commit sends the buffered writes guarded by the reads as one etcd Txn.
func (t *txn) commit() error {
	if len(t.writes) == 0 {
		return nil // the reads were one consistent snapshot
	}
	cmps := make([]clientv3.Cmp, 0, len(t.reads)+len(t.ranges))
	for k, rev := range t.reads {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", rev))
	}
	for _, r := range t.ranges {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(r.begin), "<", t.rev+1).WithRange(r.end))
	}
	ops := make([]clientv3.Op, 0, len(t.writes))
	for k, v := range t.writes {
		if v == nil {
			ops = append(ops, clientv3.OpDelete(k))
		} else {
			ops = append(ops, clientv3.OpPut(k, string(v)))
		}
	}
	resp, err := t.d.cli.Txn(t.ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return describe(err, len(cmps), len(ops))
	}
	if !resp.Succeeded {
		return fmt.Errorf("etcd: a key read was changed before commit: %w", store.ErrConflict)
	}
	return nil
}
