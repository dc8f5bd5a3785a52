// Package kvstore implements store.Tx once over an ordered, transactional
// key-value database, so that an engine which offers such a database
// (Redis, etcd, TiKV, an in-memory tree) needs only a thin adapter
// implementing DB and Txn. kvtest is the adapters' contract test.
//
// Key layout (all integers big-endian so that keys sort numerically):
//
//	"A" ino "I"            node attributes
//	"A" ino "D" name       directory entry
//	"A" ino "S"            symlink target
//	"A" ino "X" name       extended attribute
//	"A" ino "C" idx(u32)   chunk slice list
//	"A" ino "F" sid owner  flock of one owner
//	"A" ino "P" sid owner  POSIX record locks of one owner
//	"K" id size(u32)       extra slice references
//	"C" name               counter
//	"S"                    volume settings
//	"N" sid                session
//	"O" sid ino            sustained inode of a session
//	"U" sid id size(u32)   unsynced slice of a session (value: ino, idx(u32))
//	"Q" sid ino            inode on which a session holds locks
//	"D" ino length         file waiting for data deletion (value: expiry)
//	"L" id size(u32)       slice waiting for block deletion
//	"T" ino                truncation left to finish (value: from chunk, u32)
package kvstore

import (
	"context"
	"encoding/json"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Pair is one key and its value.
type Pair struct {
	Key, Value []byte
}

// Txn is the transaction an engine adapter provides. Get returns nil and no
// error for a missing key. Writes may be buffered; an adapter reports write
// failures from the commit of DB.Update.
type Txn interface {
	Get(key []byte) ([]byte, error)
	// GetMany fetches several keys, ideally in one round trip.
	GetMany(keys [][]byte) ([][]byte, error)
	// Scan returns up to limit pairs with begin <= key < end in key order;
	// limit <= 0 means no limit. kvstore scans only inside one record
	// family of the layout below (whole families go through Lister when
	// the Txn has it), so an adapter may index each family on its own.
	Scan(begin, end []byte, limit int) ([]Pair, error)
	Set(key, value []byte)
	Delete(key []byte)
}

// Range is the keys begin <= key < end.
type Range struct {
	Begin, End []byte
}

// MultiScanner is an optional Txn ability for adapters that can scan
// several ranges in few round trips (a pipeline, one multi-range request).
// kvstore asks for it where it scans many small ranges together (the
// extended attributes of many inodes, store.BatchReader); without it, it
// calls Scan for each range.
type MultiScanner interface {
	// ScanMany returns, for each range in order, what Scan(r.Begin,
	// r.End, limit) would: up to limit pairs in key order (limit <= 0:
	// all), the transaction's own writes included, each range counting
	// as a scan of the transaction. Ranges follow Scan's rules (inside
	// one record family).
	ScanMany(ranges []Range, limit int) ([][]Pair, error)
}

// Appender is an optional Txn ability for adapters that can append to a
// value at commit without reading it (Redis's APPEND). kvstore appends a
// slice to a chunk's slice list with it, so that the commit of a write
// does not first fetch the list: on a new file that read always goes to
// the server.
type Appender interface {
	// Append adds suffix at the end of key's value when the transaction
	// commits, creating the key when it is missing. The transaction does
	// not depend on the value: another transaction changing it meanwhile
	// is no conflict, and both changes apply in commit order. A later Get
	// or Scan of the key in the same transaction returns the value with
	// its suffixes (and from then on the transaction depends on it like
	// on any read); a Set or Delete of the key replaces what was appended
	// before it.
	Append(key, suffix []byte)
}

// Adder is an optional Txn ability for adapters that can add to a
// counter at commit without reading it. kvstore counts a slice's extra
// references with it when a copy shares the slice.
type Adder interface {
	// Add adds delta to key's value, an 8-byte big-endian two's-complement
	// integer, when the transaction commits. A missing key counts as 0,
	// and a sum of 0 deletes the key. As with Appender.Append, the
	// transaction does not depend on the value, a later read of the key
	// in the transaction returns the sum, and a Set or Delete replaces
	// what was added before it.
	Add(key []byte, delta int64)
}

// DB is the ordered transactional key-value database an engine adapter
// provides.
type DB interface {
	// Update runs fn once inside a read-write transaction and commits it.
	// It returns an error wrapping store.ErrConflict when the transaction
	// lost a race and may be retried.
	Update(ctx context.Context, fn func(Txn) error) error
	// View runs fn inside a read-only transaction.
	View(ctx context.Context, fn func(Txn) error) error
	Name() string
	Close() error
}

// Limiter is the optional interface of a DB whose transactions have
// bounds, counted in keys: MaxTxnOps bounds the keys one Update reads and
// writes together. Store forwards it as store.Limiter (each record of the
// typed transaction is one key).
type Limiter interface {
	Limits() store.Limits
}

// Store is a store.Store over a DB.
type Store struct {
	db DB
}

var (
	_ store.Store   = (*Store)(nil)
	_ store.Limiter = (*Store)(nil)
)

// New returns a store.Store that keeps its records in db: a *Store, or,
// when db declares no bound on a transaction's keys (Limiter), a *Store
// that also implements store.BulkWriter (see BulkStore). A DB with such a
// bound (etcd) cannot store a large Bulk atomically, so its store does not
// claim to: store.WriteBulk then splits the Bulk within the bound.
func New(db DB) store.Store {
	s := &Store{db: db}
	if s.Limits().MaxTxnOps > 0 {
		return s
	}
	return &BulkStore{s}
}

// Name names the engine.
func (s *Store) Name() string { return s.db.Name() }

// DB returns the database the store keeps its records in.
func (s *Store) DB() DB { return s.db }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Limits returns the bounds the DB declares through Limiter, or none.
func (s *Store) Limits() store.Limits {
	if l, ok := s.db.(Limiter); ok {
		return l.Limits()
	}
	return store.Limits{}
}

// Update runs fn in a transaction, retrying on conflict (store.Retry).
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	return store.Retry(ctx, func() error {
		return s.db.Update(ctx, func(t Txn) error {
			x := &tx{t: t}
			if err := fn(x); err != nil {
				return err
			}
			return x.err
		})
	})
}

// View runs fn in a read-only transaction.
func (s *Store) View(ctx context.Context, fn func(store.Tx) error) error {
	return s.db.View(ctx, func(t Txn) error { return fn(&tx{t: t}) })
}

var _ store.CacheDisabler = (*Store)(nil)

var _ store.Reporter = (*Store)(nil)

// Report forwards to a DB that implements store.Reporter; it returns nil
// for one that does not.
func (s *Store) Report(ctx context.Context) (json.RawMessage, error) {
	if r, ok := s.db.(store.Reporter); ok {
		return r.Report(ctx)
	}
	return nil, nil
}

// DisableCache forwards to a DB that implements store.CacheDisabler; it
// does nothing on others.
func (s *Store) DisableCache() {
	if c, ok := s.db.(store.CacheDisabler); ok {
		c.DisableCache()
	}
}
