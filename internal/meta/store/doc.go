// Package store is the seam between the POSIX core in package meta and the
// metadata engines. It defines the records the core keeps (nodes, directory
// edges, chunk slice lists, symlink targets, extended attributes, counters,
// sessions, locks, deletion queues) and the typed transaction over them,
// Tx. This comment is the contract, stated once: what every engine
// guarantees, and where engines differ. The engines are sqlite, postgres
// and mysql (package sqlstore), and redis, etcd, tikv and mem (adapters of
// package kvstore).
//
// # Transactions
//
// The core runs every operation as one managed transaction:
//
//	err := s.Update(ctx, func(tx store.Tx) error { ... })
//
// Update runs fn in a read-write transaction and commits it; View runs fn
// in a read-only one. A Tx is valid only inside its callback and only on
// the callback's goroutine.
//
// # What every engine guarantees
//
// Atomic Update. The writes of one Update commit together or not at all.
// When fn returns an error nothing is committed and Update returns that
// error; when the commit fails nothing is committed either.
//
// Retries. An engine reports a transaction that lost a race with an error
// wrapping ErrConflict, from a read, from a write's deferred failure or
// from the commit. Update then runs fn again from the start, after a
// growing, jittered backoff, until the context's deadline (or RetryFor
// without one; see Retry), so fn must be idempotent: it may run several
// times, must reset at its start whatever it reports to the caller
// through captured variables, and must have no side effects outside the
// transaction. Update returns ErrConflict (wrapped) only when the next
// attempt would come too late.
//
// Serializable Update. A committed Update read the values current at its
// commit, whichever handle wrote them: every engine either checks each
// record the transaction read at commit (mem, redis, etcd, tikv) or locks
// it (the SQL engines). Which races on ranges are caught differs: see
// Phantoms below.
//
// Reads see the transaction's own writes, in Update: a node set, an entry
// deleted, a slice appended or a queue record added earlier in fn is what
// later reads of fn return, Edges, ChunkIndexes and the queue listings
// included. Write methods return no error: an engine buffers the write or
// runs it at once, and reports a failure from the commit.
//
// A write in View fails the View, and changes nothing.
//
// Missing records. Node, Edge, Symlink, Xattr and Setting return
// ErrNotFound (checked with errors.Is); Nodes returns a nil element for a
// missing inode; NodeEdge returns ErrNotFound for a missing directory and
// an Edge with Ino 0 for a missing name; Chunk returns no slices, and
// SliceRef and Counter return 0, for records never written. Storing the
// zero value deletes where noted (SetSliceRef 0, SetChunk of no slices,
// SetLock with empty Data), so deleted and never-written records read the
// same. Other errors are wrapped with context.
//
// Ordering. Edges returns entries in name byte order, after the name
// after (which need not exist), at most limit of them (limit <= 0: all);
// paging with the last name returned visits every entry of an unchanged
// directory once. ChunkIndexes returns indexes at or above from in
// ascending order. XattrNames, Sessions, Sustained, Unsynced, Locks,
// LockedInodes, DelFiles, DelSlices and Truncations come in no promised
// order.
//
// Whole-family scans (ScanInodes, ScanSliceRefs, ScanDelFiles,
// ScanDelSlices) page with cursors that stay valid across transactions,
// so a long scan runs as one short View per page. Pages may be short, even
// empty, before the end; the cursor is nil after the last. A record that
// exists from the first page to the last is returned; on an unchanged
// store each record once, except on redis (see below); records changed
// meanwhile may or may not be seen. Records come in key order on the
// ordered key-value engines, table by table in key order on SQL ones, and
// in no order on redis.
//
// Visibility across handles. A View sees every commit made through the
// same handle before it began, and a handle never reads a value older
// than one it has already read. A commit made through another handle
// (another mount) may stay unseen for up to MaxLag after it returned: the
// Redis engine answers from a client-side cache that the server keeps
// current by reports that travel beside the writer's reply. Update checks
// what it read at commit, so it never acts on such a stale value. (etcd's
// opt-in serializable=true URL parameter lets a View read any member's
// local state, which may lag further.)
//
// # Where engines differ
//
// Snapshots in View. mem, etcd, tikv and sqlite read one snapshot for the
// whole View. On postgres and mysql the first statement of a View runs
// alone, outside a transaction (a lookup or getattr is one round trip),
// and the rest in one REPEATABLE READ snapshot begun by the second. redis
// has no snapshot: each round trip reads the latest values, and a value
// read once in a View is kept for the rest of it. fn therefore tolerates a
// record that changed or vanished between two of its reads.
//
// Snapshots in Update. The optimistic engines (mem, redis, etcd, tikv)
// read a snapshot, or on redis the latest values, and validate at commit;
// the SQL engines lock what they read (sqlite: one writer at a time;
// postgres: SERIALIZABLE; mysql: locking reads), so a second writer waits
// or fails with a serialization failure, deadlock or lock timeout, which
// they report as ErrConflict. etcd and tikv do not commit an Update that
// wrote nothing (its reads were one snapshot); the other engines validate
// or commit it like any other.
//
// Phantoms: a record inserted into a range an Update scanned (Edges,
// ChunkIndexes, the queue listings), by a transaction that committed
// meanwhile. mem, redis (it checks each scanned sorted-set range), etcd
// (a range compare), sqlite, postgres and mysql (next-key locks) make the
// Update conflict; tikv does not, as TiKV has no range locks, and declares
// it (Limits.MissesPhantoms). On such an engine the core must not rest a
// decision on a scan alone finding nothing: the transactions that insert
// into the range must also write a record the scanning one reads (meta
// then writes a directory's node with every change of its entries,
// instead of skipping it within Config.DirMtimeSkip).
//
// The largest transaction. Engines may bound the records one transaction
// touches, and declare it through the optional Limiter (see Limits and
// LimitsOf); the core sizes its batched work within those bounds. etcd
// declares 128, its default --max-txn-ops, and also refuses requests over
// --max-request-bytes (1.5 MiB by default); TiKV bounds a transaction's
// total size and each value's by client and server settings. The SQL engines, redis
// and mem declare no bound the core can reach.
//
// Whole-family scans on redis list keys with SCAN, which may return a
// record twice, even on an unchanged keyspace; the other engines return
// each once.
//
// # Optional interfaces
//
// An engine grows through small optional interfaces found by type
// assertion, each with a fallback for engines without it, in the manner
// of database/sql/driver:
//
//   - Limiter (fallback: the zero Limits, no bound, full isolation, a
//     snapshot in View);
//   - BatchReader, on a Tx: the chunks, symlinks and extended attributes
//     of many inodes in few round trips (fallback: per-record reads, see
//     ReadChunks, ReadSymlinks, ReadXattrs);
//   - BulkWriter: many new records at once, atomically (fallback:
//     Updates within Limits, see WriteBulk);
//   - Analyzer: refresh a query planner's statistics after bulk writes
//     (fallback: nothing);
//   - CacheDisabler: stop a client-side cache for a handle that reads
//     each record once (fallback: nothing).
//
// A Store decorator forwards Limiter, and implements Unwrapper so that
// the others, whose promises it cannot make for every engine, are found
// on the engine under it (meta's operation-timeout decorator does both). Below the typed transaction, kvstore has its own (kvstore.Lister,
// kvstore.Limiter, kvstore.MultiScanner).
//
// # Conformance
//
// Every engine runs storetest.Run (each Tx method's semantics, atomicity,
// read-your-writes, conflict retries) and storetest.Races (two handles),
// the key-value adapters also kvstore/kvtest.Run, and all of them
// metatest (the POSIX behaviour, with a model-based random test). A new
// engine learns its duties from the first of these that fails.
package store
