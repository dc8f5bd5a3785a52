// Package tikv is a distributed metadata engine: the ordered key-value
// interface of kvstore over a TiKV cluster, through client-go's txnkv, the
// official Go client of TiKV. It speaks TiKV's two-phase commit protocol
// and timestamp oracle (PD) itself, and it ships an in-process mock cluster
// (testutils.NewMockTiKV) with real MVCC, locks and conflict detection, so
// the adapter is tested without a server. No TiKV or PD server was
// available where this package was written: only the mock has run it (see
// docs/engines-tikv.md).
//
// # URL
//
//	tikv://PD_HOST:PORT[,PD_HOST:PORT...]/PREFIX
//
// The addresses are PD's client URLs. All keys of the volume live under
// PREFIX followed by the byte 0xFD, which valid UTF-8 never contains, so no
// two volume prefixes nest ("vol" and "vol/x" have disjoint key ranges).
// PREFIX is required and must be valid UTF-8. TLS is not supported yet.
// Open fails after a bounded timeout (10 s, or the context's deadline if
// sooner) with a one-line error when PD does not answer, and (without
// create) when the prefix holds no volume. New wraps a *tikv.KVStore the
// caller made, such as one over the mock.
//
// TiKV cannot store an empty value, so every value is stored behind one
// format byte (0x00), and an empty value stays distinct from a missing key.
//
// # Transactions
//
// Update runs one TiKV optimistic transaction: it begins at a start
// timestamp from PD, every read (Get, BatchGet, a range iterator) sees the
// snapshot at that timestamp merged with the transaction's own buffered
// writes, and commit is TiKV's two-phase commit. TiKV checks write-write
// conflicts only (snapshot isolation), so before committing, every key the
// transaction read is also locked (an Op_Lock mutation, which costs no extra
// round trip in optimistic mode): prewrite then fails if any key read or
// written was committed by another transaction after the start timestamp.
// A write conflict is returned wrapping store.ErrConflict and kvstore
// retries the callback. A transaction that wrote nothing does not commit:
// its reads were one consistent snapshot.
//
// Phantoms are not detected: a key inserted into a scanned range after the
// start timestamp does not conflict, because TiKV has no range locks (see
// the contract in package store). The core mostly covers it by also
// writing the node whose records it changes, which every transaction
// scanning them has read, so the node's key conflicts instead. The one
// exception, a create within meta.Config.DirMtimeSkip of the directory's
// last stamp, which leaves the directory's node unwritten (an rmdir whose
// emptiness scan raced it could commit too), is turned off because the DB
// declares store.Limits.MissesPhantoms. kvtest checks the declaration
// (a phantom must not conflict here, and must on engines that do not
// declare it).
//
// View runs fn on a transaction that is rolled back; a write in View is an
// error.
package tikv
