// Package metaserver is the in-memory metadata server (`sluice
// meta-server`): one process holds one volume's metadata in memory and
// serves it over TCP (package wire) to the sluice engine
// (internal/meta/engine/sluice), a kvstore.DB.
//
// The contract, stated once:
//
//   - Order. Every change is applied by one goroutine, the apply loop, in
//     the order commits arrive; no lock guards the data, because nothing
//     else writes it.
//   - Isolation. A transaction reads one snapshot (a copy-on-write clone
//     the loop published, which nobody writes again) and commits only if
//     no key it read and no range it scanned changed since, phantoms
//     included; otherwise it is told to start again, once the change it
//     lost to is published, so that the snapshot its retry reads has it.
//   - Durability. A commit is acknowledged only after the log records
//     holding it are synced, and readers see a change only from then on.
//     Many commits share one sync (group commit).
//   - Effects, not operations. A log record holds the keys a commit set
//     and deleted, so replay never depends on the clock or on the code
//     that decided them. Records are numbered without gaps (index) and
//     carry a term, so that replication can ship them as a Raft log.
//   - Once. A commit names its client and transaction; one received again
//     after it was applied (a reply lost with its connection) is answered,
//     not applied twice, across restarts too.
//   - Recovery. Start-up loads the newest checkpoint and replays the log
//     after it. A torn or corrupt end of the last log segment is cut;
//     anything else that fails its checksum is refused, never half
//     applied.
//   - Admission. A connection is served only once it passed TLS (when
//     configured) and proved it holds Options.Secret (wire.AuthServer);
//     one that fails is closed before any request of it is read.
//   - Failure. If the log cannot be written, every later commit is
//     refused with the error; reads go on.
//
// docs/metaserver.md describes the formats, the figures, and what is
// still to be built.
package metaserver
