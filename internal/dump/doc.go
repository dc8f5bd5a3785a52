// Package dump moves a volume's metadata out of and into the JSON dump of
// JuiceFS 1.x (../shared/spec/dump-format.md), over any store.Store: one
// implementation for every metadata engine. `sluice dump` and `sluice
// load` use it, and so do the backups of package backup; `sluice load`
// takes JuiceFS 1.0-1.4 dumps and `juicefs load` takes Sluice's.
//
// Dump streams: it walks the tree depth-first in name order, a batch of
// entries at a time, and holds in memory only the batches in flight,
// whatever the size of the volume or of one directory. By default it
// reads one snapshot (one View on one goroutine); with Options.Fast, and
// always on engines without snapshots, each batch is read in its own
// View, several at once, and the dump may show a state the volume never
// had.
//
// Load decodes a dump as it arrives into a store that holds no volume and
// writes it in batches, several at once. It keeps a few bits per inode
// and per slice, and recomputes link counts, usage, the next ids and
// slice reference counts instead of trusting the dump's. It is all or
// nothing: the volume's settings are written last, a load that fails
// removes what it wrote, and one that was killed is removed by the next.
// A malformed dump is refused with the path and byte offset where it
// went wrong.
//
// JuiceFS's conventions are kept at this edge: names escaped as %XX,
// flags and ACLs in the dump's form, the object storage secrets written
// as "removed" unless Options.KeepSecretKey, and the secrets written
// (the encryption key too) sealed with the volume's UUID. NewWriter and
// NewReader add and remove gzip or zstd compression.
package dump
