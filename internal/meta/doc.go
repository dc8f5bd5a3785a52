// Package meta is the POSIX core of Sluice: every file system rule —
// permission checks, the sticky and setgid bits, link counts, rename edge
// cases, unlink of open files, truncation — is written here once, over the
// typed transaction of package store, so each metadata engine stays a thin
// adapter.
//
// A Client is one mount's view of a volume. Its methods take a
// context.Context that carries the caller's credentials (see WithCred) and
// return errors that wrap a syscall.Errno for POSIX failures; any other
// error is an engine or I/O failure that the file system reports as EIO.
//
// Data is described, not stored, here: a file is cut into chunks of
// ChunkSize bytes, and each chunk keeps an ordered list of slices written
// into it (see store.Slice). The chunk package stores the slices' bytes.
package meta
