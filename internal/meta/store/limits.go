package store

// Limits are the bounds an engine puts on one transaction, which the core
// plans around: it never builds a transaction that exceeds them (dropping
// the chunks of a truncated or deleted file, emptying the trash and
// unqueueing deleted slices run in batches), and it covers for weaker
// isolation. The zero Limits is an engine with no bound and full
// isolation: a zero field declares no bound of that kind, and the core
// then keeps to its own, moderate batch sizes, since on every engine a
// huge transaction holds locks or risks conflicts for long.
type Limits struct {
	// MaxTxnOps bounds the records one Update may read, and those it
	// may write, each Tx read or write of one record counting once. The
	// core keeps its reads and writes together under it, which leaves a
	// margin: etcd's --max-txn-ops (128 by default) bounds the compares
	// that guard the reads and the writes of its atomic commit separately.
	MaxTxnOps int
	// MissesPhantoms says that an Update which scanned a range does not
	// conflict with a commit that inserted a record into it meanwhile
	// (tikv; see the package doc). The core then writes, with every
	// change of a directory's entries, the directory's node, which every
	// transaction scanning the entries reads.
	MissesPhantoms bool
	// NoSnapshot says that a View reads no snapshot: each of its round
	// trips reads the latest values (redis; see the package doc). Work
	// that wants one consistent picture of many records, such as a dump,
	// cannot have it on such an engine, and need not pay for one View.
	NoSnapshot bool
}

// Limiter is the optional interface of a Store whose transactions have
// bounds the core must respect. Engines without such bounds need not
// implement it; decorators of a Store forward it (see LimitsOf).
type Limiter interface {
	// Limits returns the engine's bounds; it does no I/O.
	Limits() Limits
}

// LimitsOf returns the bounds of s's transactions: those s declares
// through Limiter, and the zero Limits (no declared bound) for an engine
// that does not implement it.
func LimitsOf(s Store) Limits {
	if l, ok := s.(Limiter); ok {
		return l.Limits()
	}
	return Limits{}
}
