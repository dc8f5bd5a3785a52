// Package storetest is the contract suite of store.Store, run by every
// metadata engine: the semantics of each store.Tx method (Run) and the
// serializability of Update across handles (Races). A new engine learns
// its duties from the first case that fails. The POSIX behaviour built on
// top is metatest's.
package storetest
