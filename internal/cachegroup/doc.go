// Package cachegroup lets the mounts of one volume pool their block
// caches, so that a cluster reads each block from object storage once.
//
// # Members and owners
//
// The mounts that name the same group (sluice mount --cache-group NAME)
// are its members. Each serves its peers over HTTP on an address it
// records in its metadata session, with a weight (0 with --no-sharing);
// every member reads the session list every few seconds, so no service
// beyond the metadata engine is needed, and a member whose session stops
// beating leaves the group.
//
// Every block key has one owner: the member with the highest weighted
// rendezvous score for it (see owner), so adding or removing a member
// moves only the blocks it gains or loses, and members that see the same
// list agree without talking. A member reading a block no cache of its
// own holds asks the owner (Group.Read); the owner serves it from its
// caches, or fetches it from object storage once (concurrent requests for
// a block share one fetch), caches it and serves it. A block from a peer
// is kept in the reader's memory cache only: its disk cache holds the
// member's own share.
//
// # Faults
//
// Nothing the group does makes a read fail or return wrong bytes. A peer
// that refuses a connection, does not answer within Config.Timeout, or
// answers badly is marked down for Config.DownFor, and the read goes to
// object storage at once; the blocks a down member owned go to the
// others meanwhile. Every reply carries a CRC-32 of its bytes, checked
// before they are used; a reply that fails the check is dropped and read
// from object storage instead.
//
// # Who may read
//
// Requests carry an HMAC-SHA256 of what they ask and when, keyed with a
// key derived from the volume's settings (its UUID, object storage
// secret and encryption key; see DeriveKey): only hosts that can read
// the volume's settings, and so its data anyway, can derive it. A member
// refuses a request without a valid signature, or signed more than
// MaxSkew away from its clock, before reading anything. On an encrypted
// volume, and with Config.Seal, replies are sealed with AES-256-GCM under
// a key derived the same way, so that blocks cross the network encrypted
// and authenticated. With Config.TLS the connections are TLS 1.3, both
// sides presenting a certificate derived from the group's key (see
// groupCert), so that a host without it cannot even connect.
package cachegroup
