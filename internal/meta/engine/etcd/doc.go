// Package etcd is a distributed metadata engine: the ordered key-value
// interface of kvstore over an etcd v3 cluster, through clientv3, the
// official Go client maintained with etcd itself (it balances requests over
// the members, re-authenticates and retries safe reads; a hand-written gRPC
// client would have to redo all of that).
//
// # URL
//
//	etcd://[USER:PASS@]HOST:PORT[,HOST:PORT...]/PREFIX[?serializable=true]
//
// All keys of the volume live under PREFIX followed by the byte 0xFD, which
// valid UTF-8 never contains, so no two volume prefixes nest inside each
// other ("vol" and "vol/x" have disjoint key ranges). PREFIX is required and
// must be valid UTF-8; percent-escapes are decoded in PREFIX, USER and PASS
// (write an "@" in a password as %40). serializable=true lets read-only
// transactions (View) be answered by any member from its local state, which
// is cheaper but may miss writes committed an instant earlier through another
// member; Update always reads linearizably. Open fails after a bounded dial
// timeout (5 s) with a one-line error for an unreachable cluster, a wrong
// user name or password, a malformed URL, or (without create) a prefix that
// holds no volume.
//
// # Transactions
//
// etcd has no interactive transactions, only one atomic compare-and-swap
// request (Txn: If compares, Then operations). Update therefore runs an
// optimistic transaction:
//
//   - Reads form one snapshot. The first read is linearizable and fixes the
//     snapshot revision R (its response header revision); every later read of
//     the transaction asks for revision R, so the callback never sees half of
//     another transaction. GetMany sends its keys as Gets in one etcd Txn
//     (batches of 128, etcd's default --max-txn-ops); a Scan is one range read.
//   - Each key read records its ModRevision at R (0 when absent). Each Scan
//     records the key range it observed: [begin, end), or up to the last key
//     returned when the limit cut it short.
//   - Writes are buffered; reads and scans inside the transaction see them.
//   - Commit sends one Txn: If ModRevision(k) == recorded for every key read,
//     and ModRevision < R+1 over every scanned range (a range compare, which
//     etcd evaluates over every key present in the range), Then the buffered
//     puts and deletes. A failed If returns an error wrapping
//     store.ErrConflict, and kvstore retries the callback.
//
// The range compare catches keys inserted into or changed in a scanned range
// after R. A key deleted from the range after R has no revision left to
// compare, so deletions are caught by the per-key compare every scanned key
// gets. This gives serializable Update transactions without relying on how
// the core uses scans (the core also writes a directory's node whenever it
// changes its entries, which would cover directory scans on its own). A
// transaction that wrote nothing does not commit: its reads were one
// consistent snapshot. A read at a revision etcd has already compacted also
// reports a conflict, so the retry takes a fresh snapshot.
//
// View reads the same way (one snapshot) and never commits; a write in View
// is an error.
//
// # Limits and operation
//
// etcd refuses a Txn with more than --max-txn-ops compares or more than that
// many operations (default 128), and requests larger than
// --max-request-bytes (default 1.5 MiB). An atomic commit cannot be split,
// so a transaction over a limit fails with an error that names the flag.
// The DB declares the default limit (kvstore.Limiter, store.Limits), and
// the core sizes the transactions that drop chunks (truncation, deletion of
// a file's data, trash expiry) to stay under about 100 operations, while
// its other transactions touch a handful of keys, so the default limit works
// (TestManyChunksDefaultLimits checks it on a throwaway etcd). Still run
// etcd with a larger --max-txn-ops (e.g. 10000) for headroom, and a larger
// --max-request-bytes if chunks may hold tens of thousands of slices.
//
// etcd keeps every revision of every key until it is compacted: run it with
// automatic compaction (for example --auto-compaction-mode=periodic
// --auto-compaction-retention=1h) so the database does not grow without
// bound. A transaction whose snapshot gets compacted away simply retries.
package etcd
